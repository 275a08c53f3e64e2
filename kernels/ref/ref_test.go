package ref_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// The oracle is itself checked against values worked out by hand.

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u16Bytes(conv func(float32) uint16, v ...float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], conv(x))
	}
	return b
}

// q8Row is one Q8_0 block with scale d and q[j] = j-16 (so w_j = d*(j-16)).
func q8Row(d float32) []byte {
	b := make([]byte, tensor.Q8_0BlockLen)
	binary.LittleEndian.PutUint16(b, tensor.F32ToF16(d))
	for j := 0; j < 32; j++ {
		b[2+j] = byte(int8(j - 16))
	}
	return b
}

// q4Row is one Q4_0 block with scale d and nibble j%16 for weight j, i.e.
// byte j = j | j<<4 for j < 16 (w_j = w_{j+16} = d*(j-8)).
func q4Row(d float32) []byte {
	b := make([]byte, tensor.Q4_0BlockLen)
	binary.LittleEndian.PutUint16(b, tensor.F32ToF16(d))
	for j := 0; j < 16; j++ {
		b[2+j] = byte(j | j<<4)
	}
	return b
}

func TestMatVecHand(t *testing.T) {
	ones := make([]float32, 32)
	for i := range ones {
		ones[i] = 1
	}
	ramp := make([]float32, 32) // x_j = j
	for i := range ramp {
		ramp[i] = float32(i)
	}
	tests := []struct {
		name string
		w    kernels.Weight
		x    []float32
		want []float32
	}{
		{"f32 2x3", kernels.Weight{DType: tensor.F32, Rows: 2, Cols: 3, Data: f32Bytes(1, 2, 3, -4, 5, 0.5)},
			[]float32{1, 10, 100}, []float32{321, 96}},
		{"f16 1x2", kernels.Weight{DType: tensor.F16, Rows: 1, Cols: 2, Data: u16Bytes(tensor.F32ToF16, 0.5, -2)},
			[]float32{4, 1}, []float32{0}},
		{"bf16 1x2", kernels.Weight{DType: tensor.BF16, Rows: 1, Cols: 2, Data: u16Bytes(tensor.F32ToBF16, 3, 0.25)},
			[]float32{2, 8}, []float32{8}},
		// Σ_j 0.5*(j-16) over j<32 = 0.5*(496-512) = -8.
		{"q8_0 ones", kernels.Weight{DType: tensor.Q8_0, Rows: 1, Cols: 32, Data: q8Row(0.5)}, ones, []float32{-8}},
		// Σ_j 2*(j-16)*j = 2*(Σj² - 16Σj) = 2*(10416 - 7936) = 4960.
		{"q8_0 ramp", kernels.Weight{DType: tensor.Q8_0, Rows: 1, Cols: 32, Data: q8Row(2)}, ramp, []float32{4960}},
		// w_j = w_{j+16} = (j-8): Σ over both halves = 2*Σ_{j<16}(j-8) = 2*(120-128) = -16.
		{"q4_0 ones", kernels.Weight{DType: tensor.Q4_0, Rows: 1, Cols: 32, Data: q4Row(1)}, ones, []float32{-16}},
		// Σ_{j<16} (j-8)*j + (j-8)*(j+16) = Σ (j-8)(2j+16) = Σ (2j² - 128) = 2*1240 - 16*128 = 432.
		{"q4_0 ramp", kernels.Weight{DType: tensor.Q4_0, Rows: 1, Cols: 32, Data: q4Row(1)}, ramp, []float32{432}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]float32, tc.w.Rows)
			ref.MatVec(got, tc.w, tc.x)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("MatVec (-want +got):\n%s", d)
			}
		})
	}
}

func TestMatMulRows(t *testing.T) {
	w := kernels.Weight{DType: tensor.F32, Rows: 2, Cols: 2, Data: f32Bytes(1, 2, 3, 4)}
	got := make([]float32, 6)
	ref.MatMul(got, w, []float32{1, 0, 0, 1, 1, 1}, 3)
	if d := cmp.Diff([]float32{1, 3, 2, 4, 3, 7}, got); d != "" {
		t.Fatalf("MatMul (-want +got):\n%s", d)
	}
}

func TestElementwiseHand(t *testing.T) {
	if got := ref.Dot([]float32{1e8, 1, -1e8, 1}, []float32{1, 1, 1, 1}); got != 1 {
		t.Errorf("Dot = %v, want 1 (left-to-right float32)", got)
	}
	rms := make([]float32, 2)
	ref.RMSNorm(rms, []float32{3, 4}, []float32{1, 2}, 0)
	sm := []float32{0, float32(math.Log(3))}
	ref.Softmax(sm)
	silu := []float32{0, 1}
	ref.SiLU(silu)
	glu := make([]float32, 1)
	ref.SwiGLU(glu, []float32{1}, []float32{2})
	add := []float32{1, 2}
	ref.Add(add, []float32{10, 20})
	got := [][]float32{rms, sm, silu, glu, add}
	want := [][]float32{
		{float32(3 / math.Sqrt(12.5)), float32(8 / math.Sqrt(12.5))},
		{0.25, 0.75},
		{0, float32(1 / (1 + math.Exp(-1)))},
		{float32(2 / (1 + math.Exp(-1)))},
		{11, 22},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-6)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestRoPEHand(t *testing.T) {
	// Angles 2 and 0.02 (base 10000, 4 dims, position 2); see kernels' test.
	adj := []float32{1, 2, 3, 4}
	ref.RoPE(adj, 2, 1, 4, 4, 10000, kernels.RopeAdjacent)
	half := []float32{1, 2, 3, 4}
	ref.RoPE(half, 2, 1, 4, 4, 10000, kernels.RopeHalf)
	c2, s2, c, s := math.Cos(2), math.Sin(2), math.Cos(0.02), math.Sin(0.02)
	want := [][]float32{
		{float32(c2 - 2*s2), float32(s2 + 2*c2), float32(3*c - 4*s), float32(3*s + 4*c)},
		{float32(c2 - 3*s2), float32(2*c - 4*s), float32(s2 + 3*c2), float32(2*s + 4*c)},
	}
	if d := cmp.Diff(want, [][]float32{adj, half}, cmpopts.EquateApprox(0, 1e-6)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestAttentionTinyTrace(t *testing.T) {
	x := []float32{1, 0, 0, 1, 1, 1}
	kv := kernels.KV{K: [][]float32{x[:4], x[4:]}, V: [][]float32{{1, 0, 0, 2}, {1, 2}}, PageTokens: 2, Len: 3}
	var m kernels.Mask
	ref.CausalMask(&m, []int32{0, 1, 2}, 0)
	got := make([]float32, 6)
	ref.Attention(got, x, 3, kv, &m, kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: float32(1 / math.Sqrt(2))})
	if d := cmp.Diff([]float32{1, 0, 0.33, 1.34, 0.75, 1.50}, got, cmpopts.EquateApprox(0, 0.006)); d != "" {
		t.Fatalf("tiny trace (-want +got):\n%s", d)
	}
}

func TestCausalMaskWindow(t *testing.T) {
	var m kernels.Mask
	ref.CausalMask(&m, []int32{0, 3, 9}, 4)
	if d := cmp.Diff(kernels.Mask{Lo: []int32{0, 0, 6}, Hi: []int32{1, 4, 10}}, m); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}
