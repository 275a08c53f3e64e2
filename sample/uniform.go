package sample

// Uniform is the counter-based draw for position t of request r under seed: a
// pure function of the three words, in [0, 1) with 53-bit resolution. Because it
// has no state, the draw for (seed, r, t) does not depend on how many draws were
// made before or in which order, which is what lets speculative decoding and
// plain decoding agree token for token.
//
// Construction: each word is folded into a 64-bit state through the splitmix64
// finaliser (Stafford's "Mix13" constants, as in Java's SplittableRandom):
//
//	z = mix(seed ^ K0); z = mix(z ^ mix(r ^ K1)); z = mix(z ^ mix(t ^ K2)); z = mix(z + K3)
//	u = (z >> 11) · 2⁻⁵³
//
// For a fixed (seed, r) the map t → z is a bijection, so distinct positions never
// collide before the 53-bit truncation. Integer-only until the last exact
// conversion, so every platform returns the same bits.
func Uniform(seed, r, t uint64) float64 {
	const (
		k0 = 0x9e3779b97f4a7c15 // golden ratio
		k1 = 0xd1b54a32d192ed03
		k2 = 0xaef17502108ef2d9
		k3 = 0x632be59bd9b4e019
	)
	z := mix64(seed ^ k0)
	z = mix64(z ^ mix64(r^k1))
	z = mix64(z ^ mix64(t^k2))
	z = mix64(z + k3)
	return float64(z>>11) * 0x1p-53
}

// mix64 is the splitmix64 finaliser, a bijection on uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// UniformAt is Uniform with a fourth key word, the stream: the purpose a
// draw serves at position t of request r. Speculative decoding needs several
// independent draws at one position (the draft model's sample, the acceptance
// test, the residual resample); giving each purpose its own stream keeps them
// independent of each other and of the order they happen in, while every one
// stays a pure function of (seed, r, t, stream), so a rerun reproduces it.
//
// Stream 0 is plain sampling: UniformAt(seed, r, t, 0) == Uniform(seed, r, t),
// so a decoding mode that draws its token for position t from stream 0 agrees
// with plain decoding whenever the distributions agree. Any other stream
// folds one more word into Uniform's state before the last mix:
//
//	z = mix(seed ^ K0); z = mix(z ^ mix(r ^ K1)); z = mix(z ^ mix(t ^ K2))
//	z = mix(z ^ mix(stream ^ K4)); z = mix(z + K3)
//	u = (z >> 11) · 2⁻⁵³
//
// For fixed (seed, r, t) the map stream → z is a bijection, as t → z is in
// Uniform. Integer-only until the last exact conversion.
func UniformAt(seed, r, t, stream uint64) float64 {
	if stream == 0 {
		return Uniform(seed, r, t)
	}
	const (
		k0 = 0x9e3779b97f4a7c15
		k1 = 0xd1b54a32d192ed03
		k2 = 0xaef17502108ef2d9
		k3 = 0x632be59bd9b4e019
		k4 = 0x8cb92ba72f3d8dd7
	)
	z := mix64(seed ^ k0)
	z = mix64(z ^ mix64(r^k1))
	z = mix64(z ^ mix64(t^k2))
	z = mix64(z ^ mix64(stream^k4))
	z = mix64(z + k3)
	return float64(z>>11) * 0x1p-53
}
