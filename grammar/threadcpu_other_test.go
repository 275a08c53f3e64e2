//go:build !linux

package grammar

import "time"

// threadCPU is unavailable here: the benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
