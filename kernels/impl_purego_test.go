//go:build purego

package kernels_test

// wantImpl is the kernel set this build must dispatch to.
var wantImpl = "generic"
