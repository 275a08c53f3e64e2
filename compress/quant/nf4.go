package quant

// NF4Levels are QLoRA's 16 NormalFloat levels (Dettmers et al., 2023,
// appendix E), as float32. They are quantiles of N(0,1) scaled into [-1, 1]:
// 8 positive levels from the quantiles at linspace(0.9677083, 0.5, 9), 7 negative
// ones at linspace(0.9677083, 0.5, 8), and an exact 0, each side divided by the
// largest, so -1, 0 and 1 are represented exactly. More levels sit near 0,
// where normally distributed weights are densest.
var NF4Levels = [16]float32{
	-1.0,
	-0.6961928009986877,
	-0.5250730514526367,
	-0.39491748809814453,
	-0.28444138169288635,
	-0.18477343022823334,
	-0.09105003625154495,
	0.0,
	0.07958029955625534,
	0.16093020141124725,
	0.24611230194568634,
	0.33791524171829224,
	0.44070982933044434,
	0.5626170039176941,
	0.7229568362236023,
	1.0,
}

// nf4Mid[i] is the midpoint between levels i and i+1: the decision boundaries
// of nearest-level rounding.
var nf4Mid = func() (m [15]float32) {
	for i := range m {
		m[i] = (NF4Levels[i] + NF4Levels[i+1]) / 2
	}
	return m
}()

// nf4Code returns the index of the level nearest to x (x in [-1, 1]); a value
// exactly on a midpoint goes to the lower level, as bitsandbytes' decision
// tree does (it compares with '>').
func nf4Code(x float32) byte {
	lo, hi := 0, len(nf4Mid) // count the midpoints strictly below x
	for lo < hi {
		m := (lo + hi) / 2
		if x > nf4Mid[m] {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return byte(lo)
}

// quantizeNF4 writes one group: f32 absmax, then codes two per byte, the even
// weight in the low nibble.
func quantizeNF4(dst []byte, src []float32) {
	a := absmax(src)
	putScale(dst, a)
	codes := dst[4 : 4+(len(src)+1)/2]
	clear(codes)
	for i, v := range src {
		c := byte(7) // the exact zero level, for an all-zero group
		if a != 0 {
			c = nf4Code(v / a)
		}
		codes[i/2] |= c << (4 * (i & 1))
	}
}

func dequantizeNF4(dst []float32, src []byte) {
	a := scaleOf(src)
	for i := range dst {
		c := src[4+i/2] >> (4 * (i & 1)) & 0x0f
		dst[i] = NF4Levels[c] * a
	}
}
