//go:build (amd64 || arm64) && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestQ8KBlockAsm: the assembly activation quantizer (AVX2 on amd64, NEON
// on arm64: q8kBlockAsm) writes
// quantizeBlockQ8K's bytes for every block it takes, and takes the
// ordinary ones: N(0,1) at scales from 1e-30 to 1e30, ties for the
// largest |x| (either sign first), -0, a single nonzero value, values at
// ±amax; and it leaves NaN, Inf, zero and tiny blocks to the Go code.
func TestQ8KBlockAsm(t *testing.T) {
	q8kBlock, ok, need := q8kBlockAsm()
	if !ok {
		t.Skip("SKIP: CPU lacks " + need)
	}
	r := rand.New(rand.NewPCG(8, 9))
	x := make([]float32, tensor.QK_K)
	for trial := range 4000 {
		scale := float32(math.Pow(10, float64(r.IntN(61)-30)))
		for i := range x {
			x[i] = float32(r.NormFloat64()) * scale
		}
		wantTaken := true
		switch trial % 10 {
		case 1: // a tie for the largest |x|, opposite signs
			i, j := r.IntN(256), r.IntN(256)
			x[i], x[j] = 9*scale, -9*scale
		case 2:
			clear(x)
			x[r.IntN(256)] = -scale
		case 3:
			x[r.IntN(256)] = float32(math.NaN())
			wantTaken = false
		case 4:
			x[r.IntN(256)] = float32(math.Inf(-1))
			wantTaken = false
		case 5:
			clear(x)
			wantTaken = false
		case 6:
			for i := range x {
				x[i] = float32(r.NormFloat64()) * 1e-37
			}
			wantTaken = false
		case 7:
			x[r.IntN(256)] = float32(math.Copysign(0, -1))
		case 8: // exact halves after scaling
			for i := range x {
				x[i] = float32(r.IntN(255)-127) / 2
			}
		}
		want := make([]byte, q8kBlk)
		quantizeBlockQ8K(want, x)
		got := make([]byte, q8kBlk)
		for i := range got {
			got[i] = 0xA5
		}
		taken := q8kBlock(&got[0], &x[0])
		if taken != wantTaken && trial%10 != 6 {
			t.Fatalf("trial %d: taken %v, want %v", trial, taken, wantTaken)
		}
		if !taken {
			for i, b := range got {
				if b != 0xA5 {
					t.Fatalf("trial %d: not taken but wrote byte %d", trial, i)
				}
			}
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d (case %d): byte %d = %#x, Go %#x", trial, trial%10, i, got[i], want[i])
			}
		}
	}
}
