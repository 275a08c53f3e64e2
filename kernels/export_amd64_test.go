//go:build amd64 && !purego

package kernels

// SetRowBlockBytes sets the weight bytes a batched kernel keeps hot per input
// tile (small values force many row blocks) and returns a func restoring it.
func SetRowBlockBytes(v int) (restore func()) {
	old := rowBlockBytes
	rowBlockBytes = v
	return func() { rowBlockBytes = old }
}

// SetKQPanelMinInputs sets the smallest batch that takes the K-quant panel
// tiles (VNNI/AVX2 and AMX alike), so tests can reach them with small shapes.
func SetKQPanelMinInputs(v int) (restore func()) {
	old, oldV, oldA := kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs
	kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs = v, v, v
	return func() { kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs = old, oldV, oldA }
}

// q8kBlockAsm is this architecture's Q8_K block quantizer in assembly, whether
// this CPU runs it, and the feature it needs (TestQ8KBlockAsm).
func q8kBlockAsm() (q8kBlock func(dst *byte, x *float32) bool, ok bool, need string) {
	return q8kBlockAVX2, cpuAVX2, "AVX2"
}
