//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// qkAsmKernels are the arm64 K-quant kernel sets for TestQKAsmVsModel: the
// SDOT kernels (run where the CPU has the dot product) and the
// SMULL/SADALP ones, with the scale table bound.
func qkAsmKernels() []qkKern {
	sets := []struct {
		name string
		ok   bool
		k    map[tensor.DType]*qkNEON
	}{
		{"neon-dotprod", cpuDotProd, map[tensor.DType]*qkNEON{tensor.Q4_K: &q4kDP, tensor.Q5_K: &q5kDP, tensor.Q6_K: &q6kDP}},
		{"neon", cpuNEON, map[tensor.DType]*qkNEON{tensor.Q4_K: &q4kSM, tensor.Q5_K: &q5kSM, tensor.Q6_K: &q6kSM}},
	}
	tab := &quantScaleTable()[0]
	var out []qkKern
	for _, s := range sets {
		kk := qkKern{s.name, s.ok, map[tensor.DType]func(w, x *byte, nb int) float32{},
			map[tensor.DType]func(w, x *byte, nb, xs int, out *float32, os int){}}
		for dt, k := range s.k {
			kk.dot[dt] = func(w, x *byte, nb int) float32 { return k.dot(w, x, nb, tab) }
			kk.tile[dt] = func(w, x *byte, nb, xs int, o *float32, os int) { k.tile(w, x, nb, xs, o, os, tab) }
		}
		out = append(out, kk)
	}
	return out
}

// TestQKNEONExtremes: the largest levels (15, 31, 63) and scales against
// activations of ±127 and −128 in every sign pattern the int16 partial sums
// of the SMULL/SMLAL path can meet (four products a lane, 4·63·128 <
// 2^15), on both sets and both kernel forms, equal kqModel bit for bit.
func TestQKNEONExtremes(t *testing.T) {
	requireNEON(t)
	const nb = 2
	weights := map[tensor.DType][]byte{}
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		bb := dt.BlockBytes()
		w := make([]byte, nb*bb)
		for b := range nb {
			blk := w[b*bb : (b+1)*bb]
			for i := range blk {
				blk[i] = 0xff // every level at its maximum, every 6-bit scale and min 63
			}
			switch dt {
			case tensor.Q4_K, tensor.Q5_K:
				binary.LittleEndian.PutUint16(blk[0:], 0x3c00) // d = 1
				binary.LittleEndian.PutUint16(blk[2:], 0x3800) // dmin = 0.5
			case tensor.Q6_K:
				for s := range 16 {
					blk[192+s] = byte(int8([]int8{-128, 127}[s%2]))
				}
				binary.LittleEndian.PutUint16(blk[208:], 0x3c00)
			}
		}
		weights[dt] = w
	}
	patterns := []func(i int) int8{
		func(int) int8 { return -128 },
		func(int) int8 { return 127 },
		func(i int) int8 { return []int8{-128, 127}[i/8%2] },
		func(i int) int8 { return []int8{127, -127}[i/16%2] },
	}
	for pi, pat := range patterns {
		x := make([]byte, 4*nb*q8kBlk) // four inputs for the tile
		for k := range 4 * nb {
			blk := x[k*q8kBlk : (k+1)*q8kBlk]
			binary.LittleEndian.PutUint32(blk, math.Float32bits(0.25))
			for i := range tensor.QK_K {
				blk[4+i] = byte(pat(i + k))
			}
			for s := range 16 {
				var sum int16
				for i := 16 * s; i < 16*s+16; i++ {
					sum += int16(int8(blk[4+i]))
				}
				binary.LittleEndian.PutUint16(blk[260+2*s:], uint16(sum))
			}
		}
		for _, k := range qkAsmKernels() {
			if !k.ok {
				continue
			}
			for dt, w := range weights {
				want := kqModel(dt, w, x[:nb*q8kBlk], nb)
				if got := k.dot[dt](&w[0], &x[0], nb); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s %v pattern %d: dot %v, model %v", k.name, dt, pi, got, want)
				}
				out := make([]float32, 4)
				k.tile[dt](&w[0], &x[0], nb, nb*q8kBlk, &out[0], 4)
				for j := range 4 {
					wj := kqModel(dt, w, x[j*nb*q8kBlk:(j+1)*nb*q8kBlk], nb)
					if math.Float32bits(out[j]) != math.Float32bits(wj) {
						t.Fatalf("%s %v pattern %d: tile input %d %v, model %v", k.name, dt, pi, j, out[j], wj)
					}
				}
			}
		}
	}
}
