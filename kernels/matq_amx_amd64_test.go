//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// skipNoAMX skips t unless the AMX set can run here, saying why.
func skipNoAMX(t testing.TB) {
	t.Helper()
	switch {
	case !cpuAMX:
		t.Skip("SKIP avx512-amx kernels: CPU lacks AVX-512 VNNI + AMX-TILE + AMX-INT8")
	case !amxOK():
		t.Skip("SKIP avx512-amx kernels: the OS refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)")
	}
}

// TestAMXEncodings checks the hand-encoded AMX instructions of
// amx_amd64.h (LDTILECFG, TILEZERO, TILELOADD, TILESTORED, the four
// TDPB*D and TILERELEASE, with low and extended registers and 1- to
// 4-byte displacements) against the integer products in plain Go.
func TestAMXEncodings(t *testing.T) {
	skipNoAMX(t)
	var cfg [64]byte
	cfg[0] = 1
	for k := 5; k < 8; k++ {
		cfg[16+2*k], cfg[48+k] = 64, 16
	}
	r := rand.New(rand.NewPCG(31, 32))
	a, b := make([]byte, 1024), make([]byte, 1024)
	for i := range a {
		a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	a[0], b[0], a[1], b[1] = 0x80, 0x80, 0xff, 0x7f // the extremes
	for op, name := range []string{"TDPBSSD", "TDPBSUD", "TDPBUSD", "TDPBUUD"} {
		c := make([]int32, 256)
		amxProbe(&cfg[0], &a[0], &b[0], &c[0], op)
		for m := 0; m < 16; m++ {
			for n := 0; n < 16; n++ {
				var s int32
				for k := 0; k < 64; k++ {
					// B's element (k, n) is at row k/4, byte 4n + k%4.
					av, bv := int32(a[m*64+k]), int32(b[k/4*64+4*n+k%4])
					if op < 2 {
						av = int32(int8(av))
					}
					if op%2 == 0 {
						bv = int32(int8(bv))
					}
					s += av * bv
				}
				if c[m*16+n] != s {
					t.Fatalf("%s: C[%d][%d] = %d, want %d", name, m, n, c[m*16+n], s)
				}
			}
		}
	}
}

// TestMatQ8_0AMX holds the AMX Q8_0 panel kernel to canonQ8_0's bits on
// every shape, span, input count and row block that checkQ8_0Kernels
// runs, then n = 1…40 (every tile remainder: 16-input tiles, then the VNNI
// tiles of 8, 4 and 1) on two shapes.
func TestMatQ8_0AMX(t *testing.T) {
	skipNoAMX(t)
	defer setISA(isaCap)
	setISA(isaAMX) // activation groups of 16
	r := rand.New(rand.NewPCG(33, 34))
	checkQ8_0Kernels(t, r, matQ8_0AMX, matQ8_0AMXPanel)
	for _, s := range [][2]int{{48, 96}, {33, 768}} {
		rows, cols := s[0], s[1]
		w := randomQ8_0(r, rows, cols)
		pw, err := Repack(Weight{DType: tensor.Q8_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 40; n++ {
			if testing.Short() && n%3 != 0 && n != 40 {
				continue
			}
			checkSpans(t, canonQ8_0, matQ8_0AMX, matQ8_0AMXPanel, w, pw, PanelQ8_0, q8Acts(r, n, cols), n, rows, cols, 0)
		}
	}
}

// TestMatQ4_0AMX holds the AMX Q4_0 panel kernel to canonQ4_0's bits (the
// VNNI and AVX2 kernels') on every shape, span and row block of TestMatQ4_0AVX2's
// set with special scales, nibble patterns and activations, and n = 1…40.
func TestMatQ4_0AMX(t *testing.T) {
	skipNoAMX(t)
	defer setISA(isaCap)
	setISA(isaAMX) // Repackable(Q4_0) needs a set with the panel kernel
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	r := rand.New(rand.NewPCG(35, 36))
	colsList := []int{32, 64, 96, 160, 288, 768, 2048}
	ns := []int{1, 4, 9, 16, 17, 29, 32, 33}
	if testing.Short() {
		colsList, ns = []int{32, 96, 768}, []int{9, 16, 29}
	}
	for _, cols := range colsList {
		for _, rows := range []int{16, 17, 33, 48, 50} {
			special := (rows+cols/32)%2 == 0
			w := q4VNNIWeight(r, rows, cols, special, rows%3 == 2)
			pw, err := Repack(Weight{DType: tensor.Q4_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
			if err != nil {
				t.Fatal(err)
			}
			if pw.Layout != PanelQ4_0 {
				t.Fatalf("%d×%d: layout %v after Repack under %s", rows, cols, pw.Layout, Impl())
			}
			for _, blk := range []int{256 << 10, 3 * cols / tile * q4Blk} {
				rowBlockBytes = blk
				for _, n := range ns {
					if cols >= 768 && n > 17 && rows > 17 {
						continue
					}
					checkSpans(t, canonQ4_0, matQ4_0AMX, matQ4_0AMXPanel, w, pw, PanelQ4_0, q4MajorActs(r, n, cols, special), n, rows, cols, blk)
				}
			}
		}
	}
	rowBlockBytes = 256 << 10
	rows, cols := 48, 96
	w := q4VNNIWeight(r, rows, cols, true, false)
	pw, err := Repack(Weight{DType: tensor.Q4_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 40; n++ {
		checkSpans(t, canonQ4_0, matQ4_0AMX, matQ4_0AMXPanel, w, pw, PanelQ4_0, q4MajorActs(r, n, cols, true), n, rows, cols, 0)
	}
}

// TestAMXDispatch checks the AMX set is what an AMX machine selects, what
// it installs, and that SLUICE_ISA=avx512 caps it off to the VNNI set.
func TestAMXDispatch(t *testing.T) {
	skipNoAMX(t)
	defer setISA(isaCap)
	setISA(isaAMX)
	same := func(a, b actKernel) bool { return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b) }
	if implName != "avx512-amx" || level != isaAVX512 {
		t.Fatalf("under avx512-amx: Impl %q level %v", Impl(), level)
	}
	if !same(matQ8_0PanelImpl, matQ8_0AMXPanel) || !same(matQ4_0PanelImpl, matQ4_0AMXPanel) ||
		!same(matQ8_0ActImpl, matQ8_0AMX) || !same(matQ4_0ActImpl, matQ4_0AMX) || !q8Major || !q4Major {
		t.Error("the AMX set's kernels are not installed")
	}
	if !Panels(tensor.Q4_0) || !Repackable(tensor.Q4_0, 16, 32) {
		t.Error("the AMX set does not lay out Q4_0 in panels")
	}
	setISA(isaAVX512)
	if implName != "avx512-vnni" || !same(matQ8_0PanelImpl, matQ8_0VNNIPanel) {
		t.Errorf("SLUICE_ISA=avx512 on an AMX machine: Impl %q", Impl())
	}
}

// BenchmarkAMXPanels runs the Q8_0 and Q4_0 panel kernels one thread, AMX
// against the VNNI Q8_0 and Q4_0 ones, on the 110m shapes, in G
// multiply-adds per second of the thread's CPU time (threadCPU: the
// machine may be shared).
func BenchmarkAMXPanels(b *testing.B) {
	skipNoAMX(b)
	defer setISA(isaCap)
	setISA(isaAMX)
	r := rand.New(rand.NewPCG(37, 38))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, s := range [][2]int{{768, 768}, {2048, 768}} {
			rows, cols := s[0], s[1]
			var w []byte
			if dt == tensor.Q8_0 {
				w = randomQ8_0(r, rows, cols)
				for i := 0; i < len(w); i += q8Blk {
					w[i], w[i+1] = 0x00, 0x24
				}
			} else {
				w = q4VNNIWeight(r, rows, cols, false, false)
			}
			pw, err := Repack(Weight{DType: dt, Data: w, Rows: rows, Cols: cols})
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range []int{8, 16, 32, 128, 512} {
				var xq *actQ8
				amx, base := actKernel(matQ8_0AMXPanel), actKernel(matQ8_0VNNIPanel)
				if dt == tensor.Q8_0 {
					x := make([]float32, n*cols)
					for j := range x {
						x[j] = float32(r.NormFloat64())
					}
					xq = new(actQ8)
					xq.quantize(x, n, cols, tensor.Q8_0) // q8Major: the selected set's layout
				} else {
					xq = q4MajorActs(r, n, cols, false)
					amx, base = matQ4_0AMXPanel, matQ4_0VNNIPanel
				}
				dst := make([]float32, n*rows)
				for _, k := range []struct {
					name string
					f    actKernel
					min  int
				}{{"amx", amx, 1}, {"base", base, 1 << 30}} {
					b.Run(fmt.Sprintf("%v/%s/%dx%d/n=%d", dt, k.name, rows, cols, n), func(b *testing.B) {
						defer func(v int) { amxMinN = v }(amxMinN)
						amxMinN = k.min
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						t0 := threadCPU()
						for b.Loop() {
							k.f(dst, pw.Data, xq, n, rows, cols, 0, rows)
						}
						b.ReportMetric(float64(rows)*float64(cols)*float64(n)*float64(b.N)/(threadCPU()-t0).Seconds()/1e9, "GMAC/s")
					})
				}
			}
		}
	}
}

// TestAMXUnderSignals runs the AMX Q8_0 kernel on two goroutines while a
// third floods the process with SIGURG (the runtime's preemption signal,
// which it handles and ignores here): signals landing inside the tile code
// must leave every output bit as canonQ8_0 gives it (the OS saves and
// restores the tile state around each handler).
func TestAMXUnderSignals(t *testing.T) {
	skipNoAMX(t)
	defer setISA(isaCap)
	setISA(isaAMX)
	r := rand.New(rand.NewPCG(39, 40))
	rows, cols, n := 1024, 768, 64
	w := randomQ8_0(r, rows, cols)
	pw, err := Repack(Weight{DType: tensor.Q8_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	xq := q8Acts(r, n, cols)
	want := make([]float32, n*rows)
	canonQ8_0(want, w, xq, n, rows, cols, 0, rows)
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		k := 0
		for {
			select {
			case <-stop:
				sent <- k
				return
			default:
				syscall.Kill(os.Getpid(), syscall.SIGURG)
				k++
			}
		}
	}()
	iters := 100
	if testing.Short() {
		iters = 30
	}
	errs := make(chan error, 2)
	for g := 0; g < 2; g++ {
		go func() {
			got := make([]float32, n*rows)
			for it := 0; it < iters; it++ {
				matQ8_0AMXPanel(got, pw.Data, xq, n, rows, cols, 0, rows)
				for i := range want {
					if !sameQ8Bits(got[i], want[i]) {
						errs <- fmt.Errorf("iteration %d: out[%d] = %v, want %v", it, i, got[i], want[i])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 2; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if k := <-sent; k < 100 {
		t.Errorf("only %d signals sent while the kernels ran", k)
	} else {
		t.Logf("%d signals sent during %d calls on each of 2 goroutines", k, iters)
	}
}
