//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/tensor"
)

// The AVX2 float tiles one by one, in the default build. TestKernelSets
// checks the whole kernels against ref and MatVec; this checks each tile
// shape at the level of its contract: every output of every R×C tile, for
// every nr ≤ R and C, is bit for bit the 2×1 tile's output for that row and
// input alone (the same chain, whatever the tile), only the tile's outputs
// are written, and weights, inputs and outputs need no alignment.

// tileFloatKinds are the three weight kinds with their element size and an
// encoder of one float32 (F16 and BF16 round to nearest even).
var tileFloatKinds = []struct {
	name string
	k    floatKind
	size int
	put  func(b []byte, v float32)
}{
	{"f32", kindF32, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }},
	{"f16", kindF16, 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, tensor.F32ToF16(v)) }},
	{"bf16", kindBF16, 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, tensor.F32ToBF16(v)) }},
}

// tileSpecials are mixed into weights and inputs when special is set.
var tileSpecials = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
	math.Float32frombits(1), 65504, -1e30,
}

func tileFloats(r *rand.Rand, n int, special bool) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if special && r.IntN(12) == 0 {
			v[i] = tileSpecials[r.IntN(len(tileSpecials))]
		}
	}
	return v
}

func TestFloatAVX2Tiles(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float tiles: CPU lacks AVX2+FMA+F16C")
	}
	const guard = 0x7f8badf1
	for _, fk := range tileFloatKinds {
		sh := &avx2Shapes[fk.k]
		for _, cols := range []int{8, 9, 15, 16, 17, 23, 31, 64, 100, 257} {
			t.Run(fmt.Sprintf("%s/cols=%d", fk.name, cols), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(cols), uint64(fk.k)))
				for trial, special := range []bool{false, true} {
					woff, xoff := 1+2*trial, 1+trial // odd byte offset, odd float offset
					wf := tileFloats(r, sh.rows*cols, special)
					wb := make([]byte, woff+len(wf)*fk.size)[woff:]
					for j, v := range wf {
						fk.put(wb[j*fk.size:], v)
					}
					xs := tileFloats(r, xoff+sh.cols*cols, special)[xoff:]
					rowp := func(i int) unsafe.Pointer { return unsafe.Pointer(&wb[i*cols*fk.size]) }
					// want[c][i]: row i · input c through the 2×1 tile alone.
					want := make([][]float32, sh.cols)
					for c := range want {
						want[c] = make([]float32, sh.rows)
						for i := range want[c] {
							sh.pair(&want[c][i], 4, rowp(i), rowp(i), rowp(i), &xs[c*cols], cols, 1)
						}
					}
					const stride = 7 // outputs per input in dst: room for guards
					for C := 1; C <= sh.cols; C++ {
						for nr := 1; nr <= sh.rows; nr++ {
							buf := make([]float32, 1+C*stride+1) // dst starts at an odd float
							for i := range buf {
								buf[i] = math.Float32frombits(guard)
							}
							last := nr - 1
							sh.tiles[C](&buf[1], stride*4, rowp(0), rowp(min(1, last)), rowp(min(2, last)), &xs[0], cols, nr)
							for j, v := range buf {
								c, i := (j-1)/stride, (j-1)%stride
								if j >= 1 && c < C && i < nr {
									if math.Float32bits(v) != math.Float32bits(want[c][i]) {
										t.Fatalf("special=%v %d×%d tile nr=%d: row %d · input %d = %v (%#08x), alone %v (%#08x)",
											special, sh.rows, C, nr, i, c, v, math.Float32bits(v), want[c][i], math.Float32bits(want[c][i]))
									}
									continue
								}
								if math.Float32bits(v) != guard {
									t.Fatalf("special=%v %d×%d tile nr=%d: wrote %v at buf[%d], outside its outputs", special, sh.rows, C, nr, v, j)
								}
							}
						}
					}
				}
			})
		}
	}
}

// TestFloatAVX2Rows checks the row loops in assembly (f32AVX2Rows) against
// the Go loop over the 3×C tiles that they replace: for every C ≤ 4 and
// nrows 1..10 (every clamp of the last triple, one to four triples), edge
// cols, NaN/Inf mixed into weights and inputs, weights and inputs one float
// off alignment and dst one float off with guards around and between the
// inputs' outputs, every output is the tile loop's bit for bit and nothing
// else is written. The entry runs a second time on a copy of the nrows rows
// that ends where an unreadable page begins: no row past nrows is read.
func TestFloatAVX2Rows(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float tiles: CPU lacks AVX2+FMA+F16C")
	}
	const guard = 0x7f8badf1
	const maxRows, stride = 10, 13 // outputs per input in dst: room for guards
	sh := &avx2Shapes[kindF32]
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 4*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[3*page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	edge := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), 3*page/4) // ends at the unreadable page
	for _, cols := range []int{8, 9, 15, 16, 17, 288, 291} {
		r := rand.New(rand.NewPCG(uint64(cols), 3))
		for trial, special := range []bool{false, true} {
			woff, xoff := 1+trial, 1+2*trial // one or three floats off alignment
			w := tileFloats(r, woff+maxRows*cols, special)[woff:]
			xs := tileFloats(r, xoff+4*cols, special)[xoff:]
			rowp := func(i int) unsafe.Pointer { return unsafe.Pointer(&w[i*cols]) }
			for C := 1; C <= 4; C++ {
				for nrows := 1; nrows <= maxRows; nrows++ {
					newBuf := func() []float32 {
						buf := make([]float32, 1+C*stride+1) // dst starts at an odd float
						for i := range buf {
							buf[i] = math.Float32frombits(guard)
						}
						return buf
					}
					want, got := newBuf(), newBuf()
					for r := 0; r < nrows; r += 3 {
						last := min(r+3, nrows) - 1
						sh.tiles[C](&want[1+r], stride*4, rowp(r), rowp(min(r+1, last)), rowp(min(r+2, last)), &xs[0], cols, last-r+1)
					}
					f32AVX2Rows[C](&got[1], stride*4, rowp(0), uintptr(4*cols), &xs[0], cols, nrows)
					tail := edge[len(edge)-nrows*cols:]
					copy(tail, w[:nrows*cols])
					atEdge := newBuf()
					f32AVX2Rows[C](&atEdge[1], stride*4, unsafe.Pointer(&tail[0]), uintptr(4*cols), &xs[0], cols, nrows)
					for j := range got {
						g, v := math.Float32bits(got[j]), math.Float32bits(want[j])
						c, i := (j-1)/stride, (j-1)%stride
						inside := j >= 1 && c < C && i < nrows
						switch {
						case !inside && g != guard:
							t.Fatalf("cols=%d special=%v C=%d nrows=%d: wrote %v at buf[%d], outside the outputs", cols, special, C, nrows, got[j], j)
						case inside && v == guard:
							t.Fatalf("cols=%d special=%v C=%d nrows=%d: the tile loop left row %d · input %d unwritten", cols, special, C, nrows, i, c)
						case g != v:
							t.Fatalf("cols=%d special=%v C=%d nrows=%d: row %d · input %d = %#08x, tile loop %#08x", cols, special, C, nrows, i, c, g, v)
						case math.Float32bits(atEdge[j]) != g:
							t.Fatalf("cols=%d special=%v C=%d nrows=%d: buf[%d] = %#08x from the rows at a page's end, %#08x", cols, special, C, nrows, j, math.Float32bits(atEdge[j]), g)
						}
					}
				}
			}
		}
	}
}

// TestFloatAVX2TileNaNPayload pins the operand order that keeps NaN
// payloads identical across the tiles and the decode kernel: a single NaN
// input element with a payload reaches every output of the row unchanged
// (quieted), whichever path computed it.
func TestFloatAVX2TileNaNPayload(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float tiles: CPU lacks AVX2+FMA+F16C")
	}
	const cols, rows, n = 40, 9, 7          // 2n inputs reach the widened path
	nan := math.Float32frombits(0x7fa12345) // signalling, payload 0x212345
	for _, fk := range tileFloatKinds {
		w := make([]byte, rows*cols*fk.size)
		for j := range rows * cols {
			fk.put(w[j*fk.size:], 0.5)
		}
		x := make([]float32, 2*n*cols)
		for i := range x {
			x[i] = 1
		}
		for i := range 2 * n {
			x[i*cols+(3*i)%cols] = nan
		}
		for _, m := range []int{1, n, 2 * n} {
			dst := make([]float32, m*rows)
			matFloatAVX2(fk.k, dst, w, x, m, rows, cols, 0, rows)
			for i, v := range dst {
				if got := math.Float32bits(v); got != 0x7fe12345 {
					t.Errorf("%s n=%d: dst[%d] = %#08x, want the quieted payload 0x7fe12345", fk.name, m, i, got)
				}
			}
		}
	}
}

// threadCPU is the calling thread's CPU time: on a machine shared with
// other jobs a kernel's rate per CPU second is steady where its wall-clock
// rate is not (the thread is descheduled, not slowed, by the others).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkFloatAVX2Prefill is one 128-token prompt through a 15M and a
// 110M model's three matrix shapes (dim², FFN up, FFN down: 288 and 768
// wide, where a 15M's 288-element rows leave the tiles' fixed cost the
// largest share) with
// the AVX2 F32, F16 and BF16 kernels, single-threaded. GFLOP/s is per
// second of the thread's CPU time (see threadCPU), 2·n·rows·cols per call;
// compare it with BenchmarkFMAPeakAVX2's in the same run.
func BenchmarkFloatAVX2Prefill(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("SKIP avx2 float tiles: CPU lacks AVX2+FMA+F16C")
	}
	const n = 128
	for _, fk := range tileFloatKinds {
		for _, shp := range [][2]int{{288, 288}, {768, 288}, {288, 768}, {768, 768}, {2048, 768}, {768, 2048}} {
			rows, cols := shp[0], shp[1]
			b.Run(fmt.Sprintf("%s/%dx%d/n=%d", fk.name, rows, cols, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
				w := make([]byte, rows*cols*fk.size)
				for j, v := range tileFloats(r, rows*cols, false) {
					fk.put(w[j*fk.size:], v)
				}
				x, dst := tileFloats(r, n*cols, false), make([]float32, n*rows)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				for b.Loop() {
					matFloatAVX2(fk.k, dst, w, x, n, rows, cols, 0, rows)
				}
				b.ReportMetric(2*n*float64(rows*cols)*float64(b.N)/(threadCPU()-t0).Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkFMAPeakAVX2 is the core's 256-bit FMA peak: 12 independent
// chains in registers, no loads, GFLOP/s per thread CPU second.
func BenchmarkFMAPeakAVX2(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("SKIP avx2: CPU lacks AVX2+FMA+F16C")
	}
	const iters = 1 << 16
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	for b.Loop() {
		fmaPeakAVX2(iters)
	}
	b.ReportMetric(12*16*iters*float64(b.N)/(threadCPU()-t0).Seconds()/1e9, "GFLOP/s")
}

// TestTileInputs checks that the input tiles cover n exactly, each 1..C,
// with no tile below C/2 inputs unless n itself is.
func TestTileInputs(t *testing.T) {
	for _, C := range []int{4, 6} {
		for n := 1; n <= 40; n++ {
			var got []int
			for i := 0; i < n; {
				c := tileInputs(n-i, C)
				if c < 1 || c > C || (n >= C && 2*c < C) {
					t.Fatalf("C=%d n=%d: tiles %v then %d", C, n, got, c)
				}
				got = append(got, c)
				i += c
			}
			if n == 8 && C == 6 && len(got) != 2 {
				t.Errorf("C=6 n=8: tiles %v, want 4 4", got)
			}
		}
	}
}

// TestFloatAVX2Widened checks the widened F16/BF16 path (n ≥ widenMinN:
// row blocks converted to float32, then the F32 tiles) bit for bit against
// the decode path on each input alone, over edge cols, special values,
// unaligned weights and inputs, row sub-ranges and row blocks small enough
// to cross several, with guards around [lo,hi).
func TestFloatAVX2Widened(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float tiles: CPU lacks AVX2+FMA+F16C")
	}
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	const guard = 0x7f8badf1
	for _, fk := range tileFloatKinds[1:] {
		for _, cols := range []int{8, 9, 17, 40, 63} {
			r := rand.New(rand.NewPCG(uint64(cols), 7))
			const rows = 14
			wf := tileFloats(r, rows*cols, true)
			wb := make([]byte, 1+len(wf)*fk.size)[1:]
			for j, v := range wf {
				fk.put(wb[j*fk.size:], v)
			}
			for _, n := range []int{widenMinN, 13, 19} {
				x := tileFloats(r, 1+n*cols, true)[1:]
				for _, blk := range []int{256 << 10, 4 * 4 * cols, 4 * cols} {
					rowBlockBytes = blk
					for _, span := range [][2]int{{0, rows}, {3, 11}, {5, 6}} {
						lo, hi := span[0], span[1]
						got := make([]float32, n*rows)
						for i := range got {
							got[i] = math.Float32frombits(guard)
						}
						matFloatAVX2(fk.k, got, wb, x, n, rows, cols, lo, hi)
						for i := range n {
							want := make([]float32, rows)
							matFloatAVX2(fk.k, want, wb, x[i*cols:(i+1)*cols], 1, rows, cols, lo, hi)
							for j := range rows {
								g := math.Float32bits(got[i*rows+j])
								if j < lo || j >= hi {
									if g != guard {
										t.Fatalf("%s cols=%d n=%d block=%d [%d,%d): wrote dst[%d] outside the rows", fk.name, cols, n, blk, lo, hi, i*rows+j)
									}
									continue
								}
								if g != math.Float32bits(want[j]) {
									t.Fatalf("%s cols=%d n=%d block=%d [%d,%d): row %d · input %d = %#08x, decode %#08x",
										fk.name, cols, n, blk, lo, hi, j, i, g, math.Float32bits(want[j]))
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestFloatAVX2Decode checks matFloatAVX2's decode (n = 1) row by row
// against the 2×1 tile alone, on shapes that reach each of its paths: the
// eight far-apart streams (FAR8, with its line loop, single steps and
// tail), the pair tile's leftovers (eight or more of them when farRows
// steps back from a multiple of 4 KiB: row sizes of 256 and 4096 bytes),
// and fewer than eight rows. Bits must match: the decode and
// batch paths run the same chain per output.
func TestFloatAVX2Decode(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float decode: CPU lacks AVX2+FMA+F16C")
	}
	for _, fk := range tileFloatKinds {
		sh := &avx2Shapes[fk.k]
		for _, shape := range [][2]int{{128, 256 / fk.size}, {131, 256 / fk.size}, {20, 4096 / fk.size}, {29, 4096 / fk.size}, {64, 9}, {7, 40}, {97, 33}} {
			rows, cols := shape[0], shape[1]
			r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			// No NaN or Inf: over rows this long nearly every output
			// would be NaN, and NaN matches NaN whatever the rows read
			// (TestFloatAVX2Tiles covers them per tile).
			wf := tileFloats(r, rows*cols, false)
			wb := make([]byte, rows*cols*fk.size+1)[1:] // unaligned
			for i, v := range wf {
				fk.put(wb[i*fk.size:], v)
			}
			x := tileFloats(r, cols, false)
			got := make([]float32, rows)
			matFloatAVX2(fk.k, got, wb, x, 1, rows, cols, 0, rows)
			for i := range rows {
				var want [1]float32
				p := unsafe.Pointer(&wb[i*cols*fk.size])
				sh.pair(&want[0], 4, p, p, p, &x[0], cols, 1)
				if math.Float32bits(got[i]) != math.Float32bits(want[0]) {
					t.Fatalf("%s %d×%d: row %d = %#08x, the 2×1 tile %#08x", fk.name, rows, cols, i, math.Float32bits(got[i]), math.Float32bits(want[0]))
				}
			}
		}
	}
}
