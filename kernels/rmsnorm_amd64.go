//go:build amd64 && !purego

package kernels

import "math"

// RMSNorm over a prompt's rows on AVX-512. The generic kernel's sum of
// squares is one serial chain per row (ss += float32(v·v), j ascending), so
// a row costs an add latency per element, about a thirtieth of a 110m
// prefill. rmsNormSS16 runs that chain for 16 rows at once, lane r being
// row r's: per column j a gather of the 16 rows' x[j], a multiply and an
// add, the very operations of the generic loop in its order, so each lane
// ends with the generic ss bits. The scale and the products then are the
// generic kernel's, per row (rmsNormScale: weight[j]·(ss·v), two roundings,
// no FMA), so a row has the same bits whether it is normalized alone (a
// decode step) or in a block of 16.

// rmsNormSS16 stores at ss the 16 rows' serial sums Σ float32(v·v), row r
// at x + r·d floats, d > 0.
//
//go:noescape
func rmsNormSS16(ss *[16]float32, x *float32, d int)

// rmsNormScale writes dst[j] = w[j]·(s·x[j]) for j < n.
//
//go:noescape
func rmsNormScale(dst, x, w *float32, n int, s float32)

// rmsNormRows16 is set by the selector when the rows kernel may run (the
// AVX-512 cap on a CPU with it).
var rmsNormRows16 bool

func init() {
	addSelector(func(c isaLevel) { rmsNormRows16 = c >= isaAVX512 && cpuAVX512 })
}

// rmsNormRowsFast normalizes rows [lo, hi) of x (d floats each) into dst,
// 16 at a time, the rest by rmsNormImpl; it reports false (having done
// nothing) when the kernel is not installed.
func rmsNormRowsFast(dst, x, w []float32, d, lo, hi int, eps float32) bool {
	if !rmsNormRows16 || d <= 0 {
		return false
	}
	_, _, _ = dst[hi*d-1], x[hi*d-1], w[d-1]
	var ss [16]float32
	r := lo
	for ; r+16 <= hi; r += 16 {
		rmsNormSS16(&ss, &x[r*d], d)
		for k := range 16 {
			s := ss[k]
			s /= float32(d)
			s += eps
			s = 1 / float32(math.Sqrt(float64(s)))
			rmsNormScale(&dst[(r+k)*d], &x[(r+k)*d], &w[0], d, s)
		}
	}
	for ; r < hi; r++ {
		rmsNormImpl(dst[r*d:(r+1)*d], x[r*d:(r+1)*d], w, eps)
	}
	return true
}
