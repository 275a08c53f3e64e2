//go:build arm64 && !purego

package kernels_test

import "github.com/sluicehq/sluice/kernels"

// setRowBlockBytes shrinks the batched kernels' row blocks (to cross block
// edges) and returns a func restoring them.
func setRowBlockBytes(v int) func() { return kernels.SetRowBlockBytes(v) }
