package kernels

import "github.com/sluicehq/sluice/tensor"

// KQuantFast reports whether MatMul takes a Q8_K-activation kernel for t
// under the current kernel set.
func KQuantFast(t tensor.DType) bool { return kqKernelFor(t) != nil }
