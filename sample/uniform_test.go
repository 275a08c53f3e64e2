package sample

import "testing"

func TestUniformAtStreamZeroIsUniform(t *testing.T) {
	for i := range uint64(1000) {
		if a, b := UniformAt(5, i%7, i, 0), Uniform(5, i%7, i); a != b {
			t.Fatalf("UniformAt(5, %d, %d, 0) = %v, Uniform = %v", i%7, i, a, b)
		}
	}
}

func TestUniformAtStreams(t *testing.T) {
	const draws, bins = 100_000, 100
	const limit = 170.0 // 99 degrees of freedom, as in TestUniformChiSquare
	exp := make([]float64, bins)
	for i := range exp {
		exp[i] = draws / bins
	}
	for _, stream := range []uint64{1, 2, 3, 1 << 63} {
		obs := make([]int, bins)
		var joint [10][10]int // (stream 0, this stream) at the same key
		for i := range uint64(draws) {
			u := UniformAt(9, 2, i, stream)
			if u < 0 || u >= 1 {
				t.Fatalf("stream %d draw %d = %v outside [0,1)", stream, i, u)
			}
			obs[int(u*bins)]++
			joint[int(Uniform(9, 2, i)*10)][int(u*10)]++
		}
		if x := chiSquare(obs, exp); x > limit {
			t.Errorf("stream %d: chi-square = %.1f, want < %.0f", stream, x, limit)
		}
		var jo []int
		je := make([]float64, 100)
		for i := range joint {
			jo = append(jo, joint[i][:]...)
		}
		for i := range je {
			je[i] = draws / 100
		}
		if x := chiSquare(jo, je); x > limit {
			t.Errorf("stream %d against stream 0: joint chi-square = %.1f, want < %.0f (streams correlated)", stream, x, limit)
		}
	}
	// Distinct streams at one key give distinct numbers.
	seen := map[float64]uint64{}
	for s := range uint64(10_000) {
		u := UniformAt(1, 1, 1, s)
		if prev, ok := seen[u]; ok {
			t.Fatalf("streams %d and %d collide", prev, s)
		}
		seen[u] = s
	}
}
