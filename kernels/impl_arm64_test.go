//go:build arm64 && !purego

package kernels_test

import (
	"os"

	"golang.org/x/sys/cpu"
)

// wantImpl is the kernel set this CPU and SLUICE_ISA demand, worked out here
// independently of the package's own selector, so that a build which
// silently stays generic, or ignores the cap, fails TestImpl.
var wantImpl = func() string {
	c := os.Getenv("SLUICE_ISA")
	switch {
	case !cpu.ARM64.HasASIMD || c == "generic":
		return "generic"
	case cpu.ARM64.HasASIMDDP && c != "neon":
		return "neon-dotprod"
	}
	return "neon"
}()
