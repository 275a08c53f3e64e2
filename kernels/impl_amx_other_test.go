//go:build amd64 && !purego && !linux

package kernels_test

// amxGranted: the AMX set is only selected on Linux.
func amxGranted() bool { return false }
