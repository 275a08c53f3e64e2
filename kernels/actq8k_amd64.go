//go:build amd64 && !purego

package kernels

// q8kBlockAVX2 is quantizeBlockQ8K in AVX2 assembly for the blocks it
// takes (finite, largest |x| at least 2^-119), with the same bytes; it
// returns false, having written nothing, for the others (actq8k_amd64.s).
//
//go:noescape
func q8kBlockAVX2(dst *byte, x *float32) bool

func init() { addSelector(selectQ8K) }

// selectQ8K installs the assembly activation quantizer from AVX2 up.
func selectQ8K(c isaLevel) {
	q8kBlockImpl = nil
	if c >= isaAVX2 && cpuAVX2 {
		q8kBlockImpl = func(dst []byte, x []float32) bool {
			_, _ = dst[q8kBlk-1], x[256-1]
			return q8kBlockAVX2(&dst[0], &x[0])
		}
	}
}
