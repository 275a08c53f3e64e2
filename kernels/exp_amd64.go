//go:build amd64 && !purego

package kernels

// Constants of the exp: Cody–Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2,
// with ln2 split in a short high part (n·expLn2Hi is exact for |n| ≤ 2^15) and
// the remainder, then e^r ≈ 1 + r + r²·P(r), the degree-5 minimax P of
// Cephes' expf. Adding expRound (1.5·2^23) to x·log2(e) rounds it to the
// nearest integer n and leaves n in the low mantissa bits, so 2^n is built
// from those bits without a float→int conversion.
const (
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375
	expLn2Lo = -2.12194440e-4
	expRound = 12582912 // 1.5·2^23
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1

	// expUnder: below it n < -126 (2^n is no normal float) and e^x < 2^-126:
	// the result is 0 (math.Exp would give a subnormal up to 1.2e-38; in a
	// softmax that is a weight < 1.2e-38 against the max's 1).
	expUnder = -87.33
	// expOver: above it n > 127 and the result is +Inf. (e^x is finite up
	// to 88.72; no softmax score, x - max ≤ 0, gets near.)
	expOver = 88.37

	// expMaxRelErr is the relative error bound of expF32x16/expF32x8 against
	// math.Exp (float64) on [expUnder, expOver], rounding to float32
	// included. Measured by TestExpSIMD: 8.3e-8 (0.69 ulp of 1) at worst over
	// every 61st float32 of [-88, 0] plus a sweep of (0, 88.37] (19M inputs,
	// both widths); math.Exp rounded to float32 is itself up to 6e-8 off.
	expMaxRelErr = 1.5e-7
)
