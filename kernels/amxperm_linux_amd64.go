//go:build amd64 && !purego

package kernels

import "syscall"

// amxPermit asks Linux for the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA): without it the first tile
// instruction kills the process with SIGILL. The permission is
// process-wide and lasts for the process; the kernel refuses it when it
// does not support AMX (before 5.16, or with AMX disabled), when the
// process's signal stacks are too small for the larger signal frame, or
// under a seccomp filter that blocks the call: each means no AMX set.
func amxPermit() bool {
	const archReqXcompPerm, xfeatureXtileData = 0x1023, 18
	_, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtileData, 0)
	return e == 0
}
