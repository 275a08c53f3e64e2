//go:build !purego

package kernels

// pureGo is true when the build forces the generic kernels (-tags purego).
const pureGo = false
