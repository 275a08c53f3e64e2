//go:build arm64 && !purego

package kernels

// q8kBlockNEON is quantizeBlockQ8K in NEON assembly for the blocks it takes
// (finite, largest |x| at least 2^-119), with the same bytes; it returns
// false, having written nothing, for the others (actq8k_arm64.s). A batch
// quantizes n×cols values per MatMul call: the assembly takes about 550
// instructions a block plus its scan for mx, where the Go code runs three
// scalar passes over the 256 values.
//
//go:noescape
func q8kBlockNEON(dst *byte, x *float32) bool

func init() { addSelector(selectQ8K) }

// selectQ8K installs the assembly activation quantizer from the neon cap.
func selectQ8K(c isaLevel) {
	q8kBlockImpl = nil
	if c >= isaNEON && cpuNEON {
		q8kBlockImpl = func(dst []byte, x []float32) bool {
			_, _ = dst[q8kBlk-1], x[256-1]
			return q8kBlockNEON(&dst[0], &x[0])
		}
	}
}
