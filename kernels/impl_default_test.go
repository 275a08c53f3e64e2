//go:build !purego && !amd64 && !arm64

package kernels_test

// wantImpl is the kernel set this build must dispatch to: no fast path
// outside amd64 and arm64.
var wantImpl = "generic"
