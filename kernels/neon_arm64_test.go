//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/tensor"
)

// neonSpecials are values worth sprinkling into inputs.
var neonSpecials = []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 1e-38, math.MaxFloat32, -math.MaxFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 127, -127, 0.5, -63.5}

func requireNEON(t *testing.T) {
	t.Helper()
	if !cpuNEON {
		t.Skip("SKIP neon kernels: CPU lacks ASIMD")
	}
}

// sameBits is bit identity with every NaN equal to every NaN.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestQuantizeBlocksNEON checks the assembly activation quantizer gives
// quantizeBlockQ8's bits (values and scales) on random blocks at scales
// from 1e-40 to 1e40 mixed with zeros, -0, subnormals, the largest finite
// values, ±Inf, NaN, all-zero blocks and halfway cases of the rounding, at
// unaligned offsets.
func TestQuantizeBlocksNEON(t *testing.T) {
	requireNEON(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, nb := range []int{1, 2, 3, 7, 64} {
		for off := range 4 {
			x := make([]float32, off+nb*tile)[off:]
			for b := 0; b < nb; b++ {
				blk := x[b*tile : (b+1)*tile]
				scale := float32(math.Pow(10, float64(r.IntN(80)-40)))
				for j := range blk {
					blk[j] = float32(r.NormFloat64()) * scale
					if r.IntN(6) == 0 {
						blk[j] = neonSpecials[r.IntN(len(neonSpecials))]
					}
				}
				switch r.IntN(5) {
				case 0:
					clear(blk)
				case 1: // halfway points: amax 127, values k+0.5
					for j := range blk {
						blk[j] = float32(r.IntN(254)-127) + 0.5
					}
					blk[0] = 127
				}
			}
			wq, gq := make([]int8, nb*tile), make([]int8, off+nb*tile+3)[off:]
			wd, gd := make([]float32, nb), make([]float32, nb+1)
			gq[nb*tile], gd[nb] = 99, 99 // guards
			quantizeBlocks(wq, wd, x)
			quantizeBlocksNEON(gq[:nb*tile], gd[:nb], x)
			for b := range wd {
				if math.Float32bits(wd[b]) != math.Float32bits(gd[b]) {
					t.Fatalf("nb=%d off=%d block %d: scale %v (%#x), want %v (%#x)", nb, off, b, gd[b], math.Float32bits(gd[b]), wd[b], math.Float32bits(wd[b]))
				}
			}
			for j := range wq {
				if wq[j] != gq[j] {
					t.Fatalf("nb=%d off=%d value %d (x=%v): %d, want %d", nb, off, j, x[j], gq[j], wq[j])
				}
			}
			if gq[nb*tile] != 99 || gd[nb] != 99 {
				t.Fatalf("nb=%d off=%d: wrote past the last block", nb, off)
			}
		}
	}
}

// quantWeight is rows×nb random blocks of type t at byte offset off: raw
// random bytes (every scale pattern, NaN and ±Inf included) or, sane, with
// scales of ordinary magnitude.
func quantWeight(r *rand.Rand, t tensor.DType, rows, nb, off int, sane bool) []byte {
	bl := q8Blk
	if t == tensor.Q4_0 {
		bl = q4Blk
	}
	w := make([]byte, off+rows*nb*bl)[off:]
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	if sane {
		for b := 0; b < rows*nb; b++ {
			binary.LittleEndian.PutUint16(w[b*bl:], tensor.F32ToF16(float32(r.NormFloat64())/64))
		}
	}
	return w
}

// quantModel is matq_arm64.go's documented computation of one output in Go:
// acc = fma(float32(L_b), dW_b·dX_b, acc) over the blocks, L_b exact (see
// TestFloatNEONOrder on float32(math.FMA)).
func quantModel(dt tensor.DType, row []byte, q []int8, d []float32) float32 {
	bl := q8Blk
	if dt == tensor.Q4_0 {
		bl = q4Blk
	}
	var acc float32
	for b := range d {
		blk := row[b*bl : (b+1)*bl]
		var l int32
		for j := range tile {
			var wq int32
			if dt == tensor.Q8_0 {
				wq = int32(int8(blk[2+j]))
			} else if j < tile/2 {
				wq = int32(blk[2+j]&0x0f) - 8
			} else {
				wq = int32(blk[2+j-tile/2]>>4) - 8
			}
			l += wq * int32(q[b*tile+j])
		}
		s := quantScaleTable()[binary.LittleEndian.Uint16(blk)] * d[b]
		acc = float32(math.FMA(float64(l), float64(s), float64(acc)))
	}
	return acc
}

// TestNEONIntegerPaths checks that the SMULL/SADALP and the SDOT kernels
// give the same bits (their block sums are exact and their float steps the
// same), and that each output of every tile shape equals the one-row,
// one-input kernel's, which in turn equals quantModel, for Q8_0 and Q4_0 over 1–9 inputs, odd row counts,
// raw and sane weights, special activations and unaligned data, with
// guards after dst.
func TestNEONIntegerPaths(t *testing.T) {
	requireNEON(t)
	type kern = func(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int)
	sets := []struct {
		dt       tensor.DType
		plain    kern
		dot      kern
		one      *neonQuant
		blockLen int
	}{
		{tensor.Q8_0, matQ8_0NEON, matQ8_0DotProd, &q8NEON, q8Blk},
		{tensor.Q4_0, matQ4_0NEON, matQ4_0DotProd, &q4NEON, q4Blk},
	}
	tab := &quantScaleTable()[0]
	for _, s := range sets {
		t.Run(s.dt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, uint64(s.dt)))
			for _, nb := range []int{1, 2, 5} {
				cols := nb * tile
				for _, rows := range []int{1, 2, 3, 5, 8, 9} {
					for _, n := range []int{1, 2, 4, 5, 9} {
						for _, sane := range []bool{true, false} {
							off := r.IntN(4)
							w := quantWeight(r, s.dt, rows, nb, off, sane)
							x := make([]float32, n*cols)
							for i := range x {
								x[i] = float32(r.NormFloat64())
								if !sane && r.IntN(40) == 0 {
									x[i] = neonSpecials[r.IntN(len(neonSpecials))]
								}
							}
							var xq actQ8
							xq.quantize(x, n, cols, s.dt)
							what := fmt.Sprintf("%d×%d n=%d sane=%v", rows, cols, n, sane)
							want := make([]float32, n*rows)
							for i := 0; i < n; i++ {
								for rr := 0; rr < rows; rr++ {
									s.one.k1x1(&want[i*rows+rr], &w[rr*nb*s.blockLen], &xq.q[i*cols], &xq.d[i*nb], nb, tab)
									row := w[rr*nb*s.blockLen : (rr+1)*nb*s.blockLen]
									if m := quantModel(s.dt, row, xq.q[i*cols:(i+1)*cols], xq.d[i*nb:(i+1)*nb]); !sameBits(m, want[i*rows+rr]) {
										t.Fatalf("%s: row %d input %d = %v, the documented order gives %v", what, rr, i, want[i*rows+rr], m)
									}
								}
							}
							kerns := []kern{s.plain}
							if cpuDotProd {
								kerns = append(kerns, s.dot)
							}
							for k, f := range kerns {
								got := make([]float32, n*rows+4)
								for i := n * rows; i < len(got); i++ {
									got[i] = 12345
								}
								f(got, w, &xq, n, rows, cols, 0, rows)
								for i := range want {
									if !sameBits(want[i], got[i]) {
										t.Fatalf("%s kernel %d: dst[%d] = %v, one-by-one SMULL kernel %v", what, k, i, got[i], want[i])
									}
								}
								for i := n * rows; i < len(got); i++ {
									if got[i] != 12345 {
										t.Fatalf("%s kernel %d: wrote dst[%d] past the output", what, k, i)
									}
								}
							}
						}
					}
				}
			}
		})
	}
	if !cpuDotProd {
		t.Log("SKIP neon-dotprod integer path: CPU lacks the dot-product extension (only SMULL/SADALP compared)")
	}
}

// TestAttnNEONRoutines checks the two attention routines alone, at
// unaligned offsets and with guards: the dots, four slots at a time or one,
// equal the F32 decode kernel's dot (the same chain) times the scale, bit
// for bit; the value sums equal fma(a_j, v_j[t], out[t]) in slot order.
// Special values in q, k, a and v.
func TestAttnNEONRoutines(t *testing.T) {
	requireNEON(t)
	r := rand.New(rand.NewPCG(41, 42))
	fill := func(v []float32) {
		for i := range v {
			v[i] = float32(r.NormFloat64())
			if r.IntN(30) == 0 {
				v[i] = neonSpecials[r.IntN(len(neonSpecials))]
			}
		}
	}
	const g = 5 // guard floats each side
	for _, d := range []int{8, 16, 24, 40, 64, 128} {
		for _, n := range []int{1, 3, 4, 5, 8, 11} {
			for _, off := range []int{0, 1, 3} {
				width := d + 8 // slot stride: a KV row with another head beside it
				q := make([]float32, off+d)[off:]
				k := make([]float32, off+n*width)[off:]
				v := make([]float32, off+n*width)[off:]
				a := make([]float32, off+n)[off:]
				fill(q)
				fill(k)
				fill(v)
				fill(a)
				scale := float32(1 / math.Sqrt(float64(d)))
				buf := make([]float32, 2*g+off+n)
				for i := range buf {
					buf[i] = -7
				}
				sc := buf[g+off : g+off+n]
				attnDotsNEON(&sc[0], &q[0], &k[0], uintptr(width)*4, n, d, scale)
				for j := 0; j < n; j++ {
					var dot float32
					f32NEON1x1(&dot, unsafe.Pointer(&k[j*width]), &q[0], d)
					if want := dot * scale; !sameBits(sc[j], want) {
						t.Fatalf("d=%d n=%d off=%d: score %d = %v, want %v", d, n, off, j, sc[j], want)
					}
				}
				for i, x := range buf {
					if (i < g+off || i >= g+off+n) && x != -7 {
						t.Fatalf("d=%d n=%d off=%d: dots wrote scratch[%d]", d, n, off, i-g-off)
					}
				}
				obuf := make([]float32, 2*g+off+d)
				for i := range obuf {
					obuf[i] = -7
				}
				out := obuf[g+off : g+off+d]
				fill(out)
				want := make([]float32, d)
				copy(want, out)
				for j := 0; j < n; j++ {
					for tt := range want {
						want[tt] = float32(math.FMA(float64(a[j]), float64(v[j*width+tt]), float64(want[tt])))
					}
				}
				attnAxpyNEON(&out[0], &a[0], &v[0], uintptr(width)*4, n, d)
				for tt := range want {
					if !sameBits(out[tt], want[tt]) {
						t.Fatalf("d=%d n=%d off=%d: out[%d] = %v, want %v", d, n, off, tt, out[tt], want[tt])
					}
				}
				for i, x := range obuf {
					if (i < g+off || i >= g+off+d) && x != -7 {
						t.Fatalf("d=%d n=%d off=%d: axpy wrote out[%d]", d, n, off, i-g-off)
					}
				}
			}
		}
	}
}

// TestFloatNEONOrder checks the float kernels compute exactly the order
// matfloat_arm64.go documents: two 4-lane FMA chains over the 8-column
// steps, lanes added pairwise, then the Go tail, for F32, F16 and BF16 on
// every tile shape (through the dispatch kernel: n = 1 and n = 6, odd rows,
// cols off the vector width). The model's float32 FMA is float32(math.FMA):
// the float32 product is exact in float64, so it equals a true float32 FMA
// unless the sum's rounding to float64 lands on a float32 halfway point
// (double rounding), which these fixed seeds never hit.
func TestFloatNEONOrder(t *testing.T) {
	requireNEON(t)
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	model := func(w, x []float32) float32 {
		var a, b [4]float32
		c8 := len(w) &^ 7
		for i := 0; i < c8; i += 8 {
			for l := range 4 {
				a[l] = fma(w[i+l], x[i+l], a[l])
				b[l] = fma(w[i+4+l], x[i+4+l], b[l])
			}
		}
		var s [4]float32
		for l := range s {
			s[l] = a[l] + b[l]
		}
		r := (s[0] + s[1]) + (s[2] + s[3])
		for j := c8; j < len(w); j++ {
			r += float32(w[j] * x[j])
		}
		return r
	}
	r := rand.New(rand.NewPCG(51, 52))
	for _, k := range []floatKind{kindF32, kindF16, kindBF16} {
		kern := [...]func(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int){matF32NEON, matF16NEON, matBF16NEON}[k]
		size := [...]int{4, 2, 2}[k]
		for _, cols := range []int{8, 9, 15, 16, 24, 33, 64, 100} {
			for _, rows := range []int{1, 3, 5, 9} {
				for _, n := range []int{1, 6} {
					wb := make([]byte, rows*cols*size)
					wf := make([]float32, rows*cols)
					for i := range wf {
						v := float32(r.NormFloat64())
						switch k {
						case kindF32:
							binary.LittleEndian.PutUint32(wb[4*i:], math.Float32bits(v))
						case kindF16:
							h := tensor.F32ToF16(v)
							binary.LittleEndian.PutUint16(wb[2*i:], h)
							v = tensor.F16ToF32(h)
						default:
							h := tensor.F32ToBF16(v)
							binary.LittleEndian.PutUint16(wb[2*i:], h)
							v = math.Float32frombits(uint32(h) << 16)
						}
						wf[i] = v
					}
					x := make([]float32, n*cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					dst := make([]float32, n*rows)
					kern(dst, wb, x, n, rows, cols, 0, rows)
					for i := 0; i < n; i++ {
						for rr := 0; rr < rows; rr++ {
							want := model(wf[rr*cols:(rr+1)*cols], x[i*cols:(i+1)*cols])
							if got := dst[i*rows+rr]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("kind %d %d×%d n=%d: dst[%d] = %v, documented order gives %v", k, rows, cols, n, i*rows+rr, got, want)
							}
						}
					}
				}
			}
		}
	}
}
