package grammar

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the calling OS thread's CPU time (the caller locks its
// goroutine to the thread), from CLOCK_THREAD_CPUTIME_ID, which counts
// nanoseconds (getrusage counts scheduler ticks): the benchmarks report it
// beside wall time, which on a shared machine also counts the time other
// processes held the core.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
