//go:build !unix

package main

import "time"

// processCPU is unavailable here: bench leaves its CPU-time fields out.
func processCPU() (time.Duration, bool) { return 0, false }
