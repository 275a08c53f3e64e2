//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// TestQKPanelNEONVsRow: the SDOT panel tiles give every output the bits of
// the SDOT row kernel (q4kDotDP and its kin) and of kqModel (a NaN any NaN,
// as between the arm64 row kernels' own dot and tile), on quantized
// N(0,1) rows, random bytes (NaN and ±Inf scales, every level pattern)
// and the extremes (every level and scale at its largest, or 0, against
// activations of ±127 and −128), with activations holding an Inf, a zero
// and a subnormal block; through matQKNEON over row ranges that start and
// end off the panel grid (rows after the last panel, inputs after the last
// tile) with row blocks smaller than a panel, and through
// kqScratchPanelsNEON directly, so a path that silently skipped the panels
// would fail the "outputs written" check.
func TestQKPanelNEONVsRow(t *testing.T) {
	testutil.SkipRace(t, "the K-quant panels against the row kernels, bit for bit")
	if !cpuDotProd {
		t.Skip("SKIP neon-dotprod panels: CPU lacks SDOT")
	}
	defer func(v int) { kqnMinInputs = v }(kqnMinInputs)
	kqnMinInputs = 1
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	r := rand.New(rand.NewPCG(23, 2))
	tab := &quantScaleTable()[0]
	dots := map[tensor.DType]*qkNEON{tensor.Q4_K: &q4kDP, tensor.Q5_K: &q5kDP, tensor.Q6_K: &q6kDP}
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		for _, nb := range []int{1, 3} {
			for _, rows := range []int{16, 37} {
				for _, n := range []int{4, 7, 9} {
					for _, kind := range []string{"normal", "raw", "max", "zero"} {
						cols := nb * tensor.QK_K
						rb := nb * dt.BlockBytes()
						w := panelTestWeights(t, r, dt, kind, rows, nb)
						x := make([]float32, n*cols)
						for i := range x {
							x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.IntN(5)-2)))
						}
						x[r.IntN(len(x))] = float32(math.Inf(-1))
						clear(x[cols : cols+tensor.QK_K])
						for i := range tensor.QK_K {
							x[(n-1)*cols+i] = 1e-40 * float32(r.NormFloat64())
						}
						xb := nb * q8kBlk
						xq := make([]byte, n*xb)
						quantizeRowQ8K(xq, x)
						if kind == "max" || kind == "zero" { // extreme activations in input 2
							for b := range nb {
								blk := xq[2*xb+b*q8kBlk : 2*xb+(b+1)*q8kBlk]
								for i := range tensor.QK_K {
									blk[4+i] = byte([]int8{-128, 127, -127}[(i/8+b)%3])
								}
								for s := range 16 {
									var sum int16
									for i := 16 * s; i < 16*s+16; i++ {
										sum += int16(int8(blk[4+i]))
									}
									binary.LittleEndian.PutUint16(blk[260+2*s:], uint16(sum))
								}
							}
						}
						want := func(i, row int) float32 {
							wr, xr := w[row*rb:(row+1)*rb], xq[i*xb:(i+1)*xb]
							d := dots[dt].dot(&wr[0], &xr[0], nb, tab)
							if m := kqModel(dt, wr, xr, nb); math.Float32bits(m) != math.Float32bits(d) && !(m != m && d != d) {
								t.Fatalf("%v %s: output (%d, %d) row kernel %v, model %v", dt, kind, i, row, d, m)
							}
							return d
						}
						check := func(what string, dst []float32, nIn, lo, hi int) {
							for i := range n {
								for row := range rows {
									got := dst[i*rows+row]
									if i >= nIn || row < lo || row >= hi {
										if got != 12345 {
											t.Fatalf("%s: wrote output (%d, %d) outside its rows and inputs", what, i, row)
										}
										continue
									}
									if wv := want(i, row); math.Float32bits(got) != math.Float32bits(wv) && !(got != got && wv != wv) {
										t.Fatalf("%s: output (%d, %d) = %v (%#x), row kernel %v (%#x)", what, i, row, got, math.Float32bits(got), wv, math.Float32bits(wv))
									}
								}
							}
						}
						fresh := func() []float32 {
							dst := make([]float32, n*rows)
							for i := range dst {
								dst[i] = 12345
							}
							return dst
						}
						for _, span := range [][2]int{{0, rows}, {3, rows - 1}} {
							for _, blockBytes := range []int{256 << 10, 1} {
								rowBlockBytes = blockBytes
								what := fmt.Sprintf("%v %s nb=%d rows=%d n=%d rows [%d,%d) block=%d", dt, kind, nb, rows, n, span[0], span[1], blockBytes)
								dst := fresh()
								matQKNEON(dots[dt], dt, true, dst, w, xq, n, rows, cols, span[0], span[1])
								check("matQKNEON "+what, dst, n, span[0], span[1])
								dst = fresh()
								n4 := n / kqnTile * kqnTile
								full := kqScratchPanelsNEON(dt, dst, w, xq, n4, rows, span[0], span[1], nb, rb)
								if wf := span[0] + (span[1]-span[0])/PanelRows*PanelRows; full != wf {
									t.Fatalf("panels %s: returned %d, want %d", what, full, wf)
								}
								check("panels "+what, dst, n4, span[0], full)
							}
						}
					}
				}
			}
		}
	}
}

// panelTestWeights is rows rows of nb dt super-blocks: quantized N(0,1)
// values ("normal"), random bytes with Inf and NaN scales ("raw"), every byte 0xff but finite
// scales (every level and 6-bit scale and min at its largest, Q6_K scales
// ±127/−128: "max"), or every level 0 with those scales ("zero").
func panelTestWeights(t *testing.T, r *rand.Rand, dt tensor.DType, kind string, rows, nb int) []byte {
	t.Helper()
	bb := dt.BlockBytes()
	rb := nb * bb
	w := make([]byte, rows*rb)
	switch kind {
	case "normal":
		v := make([]float32, nb*tensor.QK_K)
		for row := range rows {
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			if err := tensor.QuantizeRow(w[row*rb:(row+1)*rb], v, dt); err != nil {
				t.Fatal(err)
			}
		}
		return w
	case "raw":
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		// ±Inf scales (quantScaleTable's NaN, which the panels must
		// reproduce) and a signalling NaN one, in rows 1–3's first block.
		dOff := 0
		if dt == tensor.Q6_K {
			dOff = 208
		}
		binary.LittleEndian.PutUint16(w[rb+dOff:], 0x7c00)
		binary.LittleEndian.PutUint16(w[2*rb+dOff:], 0xfc00)
		binary.LittleEndian.PutUint16(w[3*rb+dOff:], 0x7c01)
		if dt != tensor.Q6_K {
			binary.LittleEndian.PutUint16(w[4*rb+2:], 0xfc00) // dmin
		}
		return w
	}
	fill := byte(0xff)
	if kind == "zero" {
		fill = 0
	}
	for b := 0; b < rows*nb; b++ {
		blk := w[b*bb : (b+1)*bb]
		for i := range blk {
			blk[i] = fill
		}
		switch dt {
		case tensor.Q4_K, tensor.Q5_K:
			for i := 4; i < 16; i++ {
				blk[i] = 0xff
			}
			binary.LittleEndian.PutUint16(blk[0:], 0x3c00)
			binary.LittleEndian.PutUint16(blk[2:], 0x3800)
		case tensor.Q6_K:
			for s := range 16 {
				blk[192+s] = byte([]int8{-128, 127}[s%2])
			}
			binary.LittleEndian.PutUint16(blk[208:], 0x3c00)
		}
	}
	return w
}

// TestKQLevelsNEON: the assembly level transpositions write the bytes of
// the Go model below (levelsQ4Panel and its kin, one row at a time) for
// random blocks at a row stride larger than a block.
func TestKQLevelsNEON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		bb := dt.BlockBytes()
		for trial := range 20 {
			rb := bb * (1 + trial%3)
			src := make([]byte, PanelRows*rb)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			got, want := make([]byte, 4096), make([]byte, 4096)
			for k := range PanelRows {
				blk := src[k*rb : k*rb+bb]
				switch dt {
				case tensor.Q4_K:
					levelsQ4Panel((*[4096]byte)(want), (*[tensor.Q4_KBlockLen]byte)(blk), k)
				case tensor.Q5_K:
					levelsQ5Panel((*[4096]byte)(want), (*[tensor.Q5_KBlockLen]byte)(blk), k)
				case tensor.Q6_K:
					levelsQ6Panel((*[4096]byte)(want), (*[tensor.Q6_KBlockLen]byte)(blk), k)
				}
			}
			switch dt {
			case tensor.Q4_K:
				kqLevelsQ4NEON(&got[0], &src[0], rb)
			case tensor.Q5_K:
				kqLevelsQ5NEON(&got[0], &src[0], rb)
			case tensor.Q6_K:
				kqLevelsQ6NEON(&got[0], &src[0], rb)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%v trial %d: level byte %d (group %d, row %d, value %d) = %#x, want %#x",
						dt, trial, i, i/64, i%64/4, 4*(i/64)+i%4, got[i], want[i])
				}
			}
		}
	}
}

// TestKQScalesNEON: the assembly scale unpacking writes the bytes of the
// shared Go unpacking (panelizeSMScales, panelizeQ6K, as int32) with ±Inf
// f16 scales made 0x7e00, for random heads holding ±Inf, NaN and
// subnormal d and dmin, at row strides larger than a block.
func TestKQScalesNEON(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	specials := []uint16{0x7c00, 0xfc00, 0x7c01, 0xfe00, 0x0001, 0x8000, 0x3c00}
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		bb := dt.BlockBytes()
		for trial := range 20 {
			rb := bb * (1 + trial%3)
			src := make([]byte, PanelRows*rb)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for k := range PanelRows {
				if r.IntN(3) == 0 {
					o := []int{0, 2}[r.IntN(2)]
					if dt == tensor.Q6_K {
						o = 208
					}
					binary.LittleEndian.PutUint16(src[k*rb+o:], specials[r.IntN(len(specials))])
				}
			}
			pb := kqPanelBlk(dt)
			got, want := make([]byte, pb), make([]byte, pb)
			for k := range PanelRows {
				blk := src[k*rb : k*rb+bb]
				if dt == tensor.Q6_K {
					panelizeQ6K((*[kqp6]byte)(want), (*[tensor.Q6_KBlockLen]byte)(blk), k, false)
				} else {
					panelizeSMScales((*[kqpSM]byte)(want), (*[16]byte)(blk), k, false)
				}
			}
			for o := 0; o < 64; o += 2 {
				if h := binary.LittleEndian.Uint16(want[o:]); h&0x7fff == 0x7c00 {
					binary.LittleEndian.PutUint16(want[o:], 0x7e00)
				}
			}
			regions := [][2]int{{0, 1088}}
			if dt == tensor.Q6_K {
				kqScales6NEON(&got[0], &src[0], rb)
				regions = [][2]int{{0, 32}, {64, 1088}} // not the pairs, nor [32,64)
			} else {
				kqScalesSMNEON(&got[0], &src[0], rb)
			}
			for _, reg := range regions {
				for i := reg[0]; i < reg[1]; i++ {
					if got[i] != want[i] {
						t.Fatalf("%v trial %d: scale byte %d = %#x, want %#x", dt, trial, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// levelsQ4Panel writes row k's 256 Q4_K levels into a panel super-block's
// level groups lv (value v at 64·(v/4) + 4k + v%4): byte l of the
// 32-byte chunk c holds level 64c+l in its low nibble and 64c+32+l in its
// high one.
func levelsQ4Panel(lv *[4096]byte, blk *[tensor.Q4_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	qs := blk[16:]
	for c := range 4 {
		for m := range 8 {
			u := le.Uint32(qs[32*c+4*m:])
			le.PutUint32(lv[64*(16*c+m)+4*k:], u&0x0f0f0f0f)
			le.PutUint32(lv[64*(16*c+8+m)+4*k:], u>>4&0x0f0f0f0f)
		}
	}
}

// levelsQ5Panel is levelsQ4Panel for Q5_K: the nibbles after 32 bytes of
// high bits qh, bit 2c of qh[l] the fifth bit of level 64c+l and bit 2c+1
// that of 64c+32+l.
func levelsQ5Panel(lv *[4096]byte, blk *[tensor.Q5_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	qh, qs := blk[16:48], blk[48:]
	for m := range 8 {
		h := le.Uint32(qh[4*m:])
		for c := range 4 {
			u := le.Uint32(qs[32*c+4*m:])
			lo := u&0x0f0f0f0f | (h>>(2*c)&0x01010101)<<4
			hi := u>>4&0x0f0f0f0f | (h>>(2*c+1)&0x01010101)<<4
			le.PutUint32(lv[64*(16*c+m)+4*k:], lo)
			le.PutUint32(lv[64*(16*c+8+m)+4*k:], hi)
		}
	}
}

// levelsQ6Panel writes row k's 256 Q6_K levels minus 32, as signed bytes,
// into a panel super-block's level groups. In half n (128 values) with
// ql = the 64 low-nibble bytes and qh = the 32 high-bit bytes of the
// half, level 128n+32g+l is ql[l]&15 | (qh[l]&3)<<4 (g = 0), ql[l+32]&15 |
// (qh[l]>>2&3)<<4 (1), ql[l]>>4 | (qh[l]>>4&3)<<4 (2), ql[l+32]>>4 |
// (qh[l]>>6)<<4 (3).
func levelsQ6Panel(lv *[4096]byte, blk *[tensor.Q6_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	// minus32 maps 4 bytes 0…63 to their value − 32 mod 256: with bit 5
	// set that clears it; clear, it is v + 224 = (v | 32) | 0xc0.
	minus32 := func(v uint32) uint32 {
		return v ^ 0x20202020 | (^v>>5&0x01010101)*0xc0
	}
	for n := range 2 {
		ql, qh := blk[64*n:], blk[128+32*n:]
		for m := range 8 {
			a, b, h := le.Uint32(ql[4*m:]), le.Uint32(ql[32+4*m:]), le.Uint32(qh[4*m:])
			g := 32*n + m
			le.PutUint32(lv[64*g+4*k:], minus32(a&0x0f0f0f0f|(h&0x03030303)<<4))
			le.PutUint32(lv[64*(g+8)+4*k:], minus32(b&0x0f0f0f0f|(h>>2&0x03030303)<<4))
			le.PutUint32(lv[64*(g+16)+4*k:], minus32(a>>4&0x0f0f0f0f|(h>>4&0x03030303)<<4))
			le.PutUint32(lv[64*(g+24)+4*k:], minus32(b>>4&0x0f0f0f0f|(h>>6&0x03030303)<<4))
		}
	}
}
