package kernels

// SplitAllAttention makes AttentionPool use every thread however small the
// call (so small test shapes exercise the split) and returns a func restoring
// the threshold.
func SplitAllAttention() (restore func()) {
	old := attnMinWork
	attnMinWork = 1
	return func() { attnMinWork = old }
}
