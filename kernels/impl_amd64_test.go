//go:build amd64 && !purego

package kernels_test

import (
	"os"

	"golang.org/x/sys/cpu"
)

// wantImpl is the kernel set this CPU and SLUICE_ISA demand, worked out here
// independently of the package's own selector (klauspost's haveSeqdecAsm
// pattern), so that a build which silently stays generic, or ignores the
// cap, fails TestImpl.
var wantImpl = func() string {
	c := os.Getenv("SLUICE_ISA")
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	avx512 := avx2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ
	amx := avx512 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && amxGranted()
	switch {
	case amx && (c == "" || c == "avx512-amx"):
		return withArchsimd("avx512-amx")
	case avx512 && (c == "" || c == "avx512" || c == "avx512-amx"):
		if cpu.X86.HasAVX512VNNI {
			return withArchsimd("avx512-vnni")
		}
		return withArchsimd("avx512")
	case avx2 && c != "generic":
		return withArchsimd("avx2")
	}
	return "generic"
}()
