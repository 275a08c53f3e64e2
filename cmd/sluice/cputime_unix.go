//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used so far:
// bench reports it beside wall time because on a shared machine the wall
// clock also counts the time other processes held the cores.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
