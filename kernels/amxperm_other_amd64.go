//go:build amd64 && !purego && !linux

package kernels

// amxPermit reports whether the OS lets this process use the AMX tiles:
// only Linux is asked (amxperm_linux_amd64.go); elsewhere the AMX set is
// never selected.
func amxPermit() bool { return false }
