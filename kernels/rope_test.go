package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

func TestRoPEVsRef(t *testing.T) {
	type shape struct{ heads, headDim, ropeDim int }
	shapes := []shape{
		{1, 0, 0}, {1, 2, 2}, {1, 2, 0}, {3, 8, 8}, {2, 6, 4}, {4, 16, 16}, {8, 64, 64},
		{2, 64, 32}, {5, 9, 8}, {1, 128, 128}, {32, 128, 128}, {2, 17, 2},
	}
	for _, style := range []kernels.RopeStyle{kernels.RopeAdjacent, kernels.RopeHalf} {
		for _, k := range []kind{normal, special} {
			t.Run(fmt.Sprintf("style=%d/%v", style, k), func(t *testing.T) {
				r := newRand(t)
				positions := []int32{0, 1, 2, 7, 255, 4096, 131071, math.MaxInt32}
				bases := []float32{10000, 500000, 1e6, 10}
				if testing.Short() {
					positions, bases = []int32{0, 7, 4096, math.MaxInt32}, []float32{10000, 1e6}
				}
				for _, sh := range shapes {
					for _, pos := range positions {
						for _, base := range bases {
							for _, off := range offsets() {
								want := vec(r, sh.heads*sh.headDim, k)
								buf, got := guarded(len(want), off)
								copy(got, want)
								ref.RoPE(want, pos, sh.heads, sh.headDim, sh.ropeDim, base, style)
								kernels.RoPE(got, pos, sh.heads, sh.headDim, sh.ropeDim, base, style)
								checkGuard(t, buf, off, len(want))
								requireSame(t, fmt.Sprintf("%+v pos=%d base=%v off=%d", sh, pos, base, off), want, got)
							}
						}
					}
				}
			})
		}
	}
}

// TestRoPEHand checks the rotation against values worked out by hand (in
// float64): x = (1,2,3,4), one head of 4 dims, base 10000, position 2, so the
// angles are 2·1 and 2·10000^(-2/4) = 0.02.
func TestRoPEHand(t *testing.T) {
	tests := []struct {
		name  string
		style kernels.RopeStyle
		want  []float32
	}{
		// (x0,x1) by 2 rad, (x2,x3) by 0.02 rad:
		// x0 = cos2 - 2 sin2, x1 = sin2 + 2 cos2, x2 = 3 cos.02 - 4 sin.02, x3 = 3 sin.02 + 4 cos.02
		{"adjacent", kernels.RopeAdjacent, []float32{-2.2347417, 0.07700375, 2.9194054, 4.059196}},
		// (x0,x2) by 2 rad, (x1,x3) by 0.02 rad:
		// x0 = cos2 - 3 sin2, x2 = sin2 + 3 cos2, x1 = 2 cos.02 - 4 sin.02, x3 = 2 sin.02 + 4 cos.02
		{"half", kernels.RopeHalf, []float32{-3.144039, 1.9196053, -0.33914307, 4.0391974}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := []float32{1, 2, 3, 4}
			kernels.RoPE(x, 2, 1, 4, 4, 10000, tc.style)
			if d := cmp.Diff(tc.want, x, cmpopts.EquateApprox(0, 1e-6)); d != "" {
				t.Fatalf("RoPE (-want +got):\n%s", d)
			}
		})
	}
}

func TestRoPEPartialAndIdentity(t *testing.T) {
	// Two heads of 6 dims, 4 rotated: dims 4 and 5 of each head never change.
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	orig := append([]float32(nil), x...)
	kernels.RoPE(x, 3, 2, 6, 4, 10000, kernels.RopeHalf)
	for _, i := range []int{4, 5, 10, 11} {
		if x[i] != orig[i] {
			t.Errorf("dim %d beyond ropeDim changed: %v → %v", i, orig[i], x[i])
		}
	}
	for _, i := range []int{0, 1, 2, 3, 6, 7, 8, 9} {
		if x[i] == orig[i] {
			t.Errorf("rotated dim %d unchanged (%v)", i, x[i])
		}
	}
	// Both heads rotate alike: head 1 = head 0 applied to its own values.
	h1 := []float32{7, 8, 9, 10, 11, 12}
	kernels.RoPE(h1, 3, 1, 6, 4, 10000, kernels.RopeHalf)
	requireSame(t, "head 1 alone", h1, x[6:])

	// Position 0 is the identity, exactly.
	y := []float32{1.5, -2, 3.25, -0}
	want := append([]float32(nil), y...)
	kernels.RoPE(y, 0, 1, 4, 4, 10000, kernels.RopeAdjacent)
	requireSame(t, "pos 0", want, y)

	// The norm of each rotated pair is preserved.
	z := []float32{3, 4}
	kernels.RoPE(z, 12345, 1, 2, 2, 10000, kernels.RopeAdjacent)
	if n := math.Hypot(float64(z[0]), float64(z[1])); math.Abs(n-5) > 1e-5 {
		t.Fatalf("|rotated (3,4)| = %v, want 5", n)
	}
}

func TestRoPEPanics(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		n, heads, headDim, ropeD int
		style                    kernels.RopeStyle
	}{
		{"odd ropeDim", 8, 1, 8, 3, kernels.RopeAdjacent},
		{"ropeDim > headDim", 8, 1, 8, 10, kernels.RopeAdjacent},
		{"short x", 7, 1, 8, 8, kernels.RopeAdjacent},
		{"bad style", 8, 1, 8, 8, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustPanic(t, "kernels: RoPE:", func() {
				kernels.RoPE(make([]float32, tc.n), 1, tc.heads, tc.headDim, tc.ropeD, 10000, tc.style)
			})
		})
	}
}
