//go:build !purego

package kernels_test

import (
	"syscall"
	"unsafe"
)

// amxGranted reports whether this process holds the AMX tile state
// permission (arch_prctl ARCH_GET_XCOMP_PERM, bit XFEATURE_XTILEDATA):
// the package asks for it when it selects kernels on an AMX CPU, so a
// selector that picked AMX without asking, or failed to ask, shows here.
func amxGranted() bool {
	const archGetXcompPerm, xfeatureXtileData = 0x1022, 18
	var mask uint64
	_, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXcompPerm, uintptr(unsafe.Pointer(&mask)), 0)
	return e == 0 && mask&(1<<xfeatureXtileData) != 0
}
