//go:build (amd64 || arm64) && !purego

package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// kqModel is the arithmetic matqk_amd64.go and matqk_arm64.go state, in
// plain Go: the oracle every assembly set must match bit for bit.
func kqModel(t tensor.DType, w, x []byte, nb int) float32 {
	bb := t.BlockBytes()
	var s float32
	for b := range nb {
		blk, xb := w[b*bb:(b+1)*bb], x[b*q8kBlk:(b+1)*q8kBlk]
		dx := math.Float32frombits(binary.LittleEndian.Uint32(xb))
		q := xb[4 : 4+tensor.QK_K]
		bsum := func(k int) int32 { return int32(int16(binary.LittleEndian.Uint16(xb[260+2*k:]))) }
		levels := make([]int32, tensor.QK_K)
		var I, M int32
		switch t {
		case tensor.Q4_K, tensor.Q5_K:
			lv := make([]float32, tensor.QK_K)
			levelsK(t, blk, lv)
			for i := range levels {
				levels[i] = int32(lv[i])
			}
			for j := range 8 {
				sc, m := tensor.ScaleMinK4(j, blk[4:16])
				var dot int32
				for i := 32 * j; i < 32*j+32; i++ {
					dot += levels[i] * int32(int8(q[i]))
				}
				I += int32(sc) * dot
				M += int32(m) * (bsum(2*j) + bsum(2*j+1))
			}
			dd := kqF16(blk, 0) * dx
			dm := kqF16(blk, 2) * dx
			s += float32(dd*float32(I)) - float32(dm*float32(M))
		case tensor.Q6_K:
			lv := make([]float32, tensor.QK_K)
			levelsK(t, blk, lv)
			for sub := range 16 {
				var dot int32
				for i := 16 * sub; i < 16*sub+16; i++ {
					dot += int32(lv[i]) * int32(int8(q[i]))
				}
				I += int32(int8(blk[192+sub])) * (dot - 32*bsum(sub))
			}
			s += float32(kqF16(blk, 208) * dx * float32(I))
		}
	}
	return s
}

// kqF16 is the f16 at off, ±Inf taken as NaN.
func kqF16(b []byte, off int) float32 {
	h := binary.LittleEndian.Uint16(b[off:])
	if h&0x7fff == 0x7c00 {
		return float32(math.NaN())
	}
	return tensor.F16ToF32(h)
}

// levelsK decodes the unsigned integer levels of a K block (0..15, 0..31 or
// 0..63) by dequantizing a copy with d = 1, dmin = 0 and unit scales.
func levelsK(t tensor.DType, blk []byte, lv []float32) {
	c := append([]byte(nil), blk...)
	switch t {
	case tensor.Q4_K, tensor.Q5_K:
		binary.LittleEndian.PutUint16(c[0:], 0x3C00)
		binary.LittleEndian.PutUint16(c[2:], 0)
		for j := range 12 {
			c[4+j] = 0
		}
		c[4], c[5], c[6], c[7] = 1, 1, 1, 1 // sc 0..3 = 1; sc 4..7 = low nibbles of 12..15
		c[12], c[13], c[14], c[15] = 1, 1, 1, 1
		tensor.DequantizeBlock(lv, c, t)
	case tensor.Q6_K:
		binary.LittleEndian.PutUint16(c[208:], 0x3C00)
		for j := range 16 {
			c[192+j] = 1
		}
		tensor.DequantizeBlock(lv, c, t)
		for i := range lv {
			lv[i] += 32
		}
	}
}

// qkKern is one assembly set's Q4_K/Q5_K/Q6_K kernels (qkAsmKernels, per
// architecture): dot is one row against one input, tile one row against
// the four inputs at x + k·xs into out + k·os (bytes).
type qkKern struct {
	name string
	ok   bool
	dot  map[tensor.DType]func(w, x *byte, nb int) float32
	tile map[tensor.DType]func(w, x *byte, nb, xs int, out *float32, os int)
}

// TestQKAsmVsModel: every Q4_K/Q5_K/Q6_K assembly kernel this CPU runs
// equals kqModel bit for bit, on quantized N(0,1) rows and on random bytes
// (every scale pattern, NaN and Inf included), against activations with
// specials, zero and subnormal blocks.
func TestQKAsmVsModel(t *testing.T) {
	kerns := qkAsmKernels()
	r := rand.New(rand.NewPCG(6, 13))
	for _, k := range kerns {
		if !k.ok {
			t.Logf("SKIP %s: CPU lacks it", k.name)
			continue
		}
		for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
			for _, nb := range []int{1, 2, 3, 7} {
				for trial := range 40 {
					raw := trial%2 == 1
					w := make([]byte, nb*dt.BlockBytes())
					if raw {
						for i := range w {
							w[i] = byte(r.Uint32())
						}
					} else {
						v := make([]float32, nb*tensor.QK_K)
						for i := range v {
							v[i] = float32(r.NormFloat64())
						}
						if err := tensor.QuantizeRow(w, v, dt); err != nil {
							t.Fatal(err)
						}
					}
					x, xq := kqTestActivations(r, nb, trial)
					want := kqModel(dt, w, xq, nb)
					if !raw {
						kqCheckExact(t, dt, w, xq, nb, want)
					}
					got := k.dot[dt](&w[0], &xq[0], nb)
					if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
						t.Fatalf("%s %v nb=%d trial %d (raw=%v): asm %v (%#x), model %v (%#x)",
							k.name, dt, nb, trial, raw, got, math.Float32bits(got), want, math.Float32bits(want))
					}
					// The tile, with this input in each of its four slots
					// (the others shifted copies, one of them a NaN block).
					xs := 4 * len(xq)
					for slot := range 4 {
						x4 := make([]byte, xs)
						for k := range 4 {
							src := xq
							if k != slot {
								src = make([]byte, len(xq))
								quantizeRowQ8K(src, append(x[k*7%len(x):], x[:k*7%len(x)]...))
							}
							copy(x4[k*len(xq):], src)
						}
						out := make([]float32, 4*3)
						k.tile[dt](&w[0], &x4[0], nb, len(xq), &out[0], 12)
						for j := range 4 {
							wj := kqModel(dt, w, x4[j*len(xq):(j+1)*len(xq)], nb)
							if g := out[3*j]; math.Float32bits(g) != math.Float32bits(wj) && !(g != g && wj != wj) {
								t.Fatalf("%s tile %v nb=%d trial %d slot %d input %d: asm %v, model %v", k.name, dt, nb, trial, slot, j, g, wj)
							}
						}
					}
				}
			}
		}
	}
}

// TestQuantizeQ8KMatchesGGML: for finite, normal input the activation
// quantizer writes the bytes of tensor.QuantizeRowQ8K (ggml's
// quantize_row_q8_K_ref, checked against ggml's own output in tensor).
func TestQuantizeQ8KMatchesGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		x := make([]float32, 3*tensor.QK_K)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * float32(trial+1)
		}
		if trial%3 == 0 {
			clear(x[tensor.QK_K : 2*tensor.QK_K])
		}
		got, want := make([]byte, 3*q8kBlk), make([]byte, 3*q8kBlk)
		quantizeRowQ8K(got, x)
		tensor.QuantizeRowQ8_K(want, x)
		if string(got) != string(want) {
			t.Fatalf("trial %d: Q8_K activations differ from tensor.QuantizeRowQ8_K", trial)
		}
	}
	// The cases ggml leaves undefined.
	x := make([]float32, tensor.QK_K)
	x[5] = float32(math.NaN())
	b := make([]byte, q8kBlk)
	quantizeBlockQ8K(b, x)
	if d := math.Float32frombits(binary.LittleEndian.Uint32(b)); d == d {
		t.Errorf("NaN block: d = %v, want NaN", d)
	}
	for i := range x {
		x[i] = 1e-40 * float32(i%7-3)
	}
	quantizeBlockQ8K(b, x)
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	for i, v := range x {
		if q := float32(int8(b[4+i])); math.Abs(float64(v-d*q)) > math.Abs(float64(d))/2*1.01+1e-45 {
			t.Fatalf("subnormal block: x[%d]=%v ≉ d·q = %v·%v", i, v, d, q)
		}
	}
}

// kqCheckExact checks the model against Σ_j W_j·(dx·q_j) in float64 (the
// product the integer sums stand for, with the activations as quantized):
// only the float32 rounding of the scaled sums may separate them, at most
// 2^-20·√cols·Σ_j (|d·sc·l_j| + |dmin·m_j|)·|dx·q_j| (the parts may cancel).
func kqCheckExact(t *testing.T, dt tensor.DType, w, xq []byte, nb int, got float32) {
	t.Helper()
	cols := nb * tensor.QK_K
	wv := make([]float32, cols)
	tensor.DequantizeRow(wv, w, dt, cols)
	a := make([]float32, cols)
	bb := dt.BlockBytes()
	c := append([]byte(nil), w...)
	if dt != tensor.Q6_K {
		for o := 0; o < len(c); o += bb {
			binary.LittleEndian.PutUint16(c[o+2:], 0) // dmin = 0: A alone
		}
	}
	tensor.DequantizeRow(a, c, dt, cols)
	var exact, parts float64
	for j := range cols {
		xb := xq[j/tensor.QK_K*q8kBlk:]
		dx := float64(math.Float32frombits(binary.LittleEndian.Uint32(xb)))
		xv := dx * float64(int8(xb[4+j%tensor.QK_K]))
		exact += float64(wv[j]) * xv
		parts += (math.Abs(float64(a[j])) + math.Abs(float64(a[j]-wv[j]))) * math.Abs(xv)
	}
	if math.IsNaN(exact) || math.IsInf(exact, 0) {
		return
	}
	if tol := math.Ldexp(1, -20) * math.Sqrt(float64(cols)) * parts * 1.01; math.Abs(float64(got)-exact) > tol+1e-37 {
		t.Fatalf("%v nb=%d: model %v, exact Σ W·dx·q %v: |diff| %v > %v", dt, nb, got, exact, math.Abs(float64(got)-exact), tol)
	}
}

// kqTestActivations is nb super-blocks of Q8_K activations for a kernel
// test's trial: normal values at scales from 1e-3 to 1e3, and by trial an
// Inf, a zero block or a block of denormals (which the quantizer keeps as
// special cases), as floats and quantized.
func kqTestActivations(r *rand.Rand, nb, trial int) (x []float32, xq []byte) {
	x = make([]float32, nb*tensor.QK_K)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.IntN(7)-3)))
	}
	switch trial % 5 {
	case 2:
		x[r.IntN(len(x))] = float32(math.Inf(1))
	case 3:
		clear(x[:tensor.QK_K])
	case 4:
		for i := range tensor.QK_K {
			x[i] = 1e-40 * float32(r.NormFloat64())
		}
	}
	xq = make([]byte, nb*q8kBlk)
	quantizeRowQ8K(xq, x)
	return x, xq
}
