//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// kqWeight is rows×cols of t quantized from N(0,1) values.
func kqWeight(tb testing.TB, r *rand.Rand, t tensor.DType, rows, cols int) []byte {
	rb := cols / tensor.QK_K * t.BlockBytes()
	w := make([]byte, rows*rb)
	v := make([]float32, cols)
	for row := range rows {
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		if err := tensor.QuantizeRow(w[row*rb:(row+1)*rb], v, t); err != nil {
			tb.Fatal(err)
		}
	}
	return w
}

// kqActs is n Q8_K activation rows of cols N(0,1) values.
func kqActs(r *rand.Rand, n, cols int) []byte {
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	xq := make([]byte, n*cols/tensor.QK_K*q8kBlk)
	quantizeRowQ8K(xq, x)
	return xq
}

// BenchmarkKQuantAMX runs a 768×2048 K-quant product (the 110m model's
// feed-forward shape) one thread through matQK by the AVX2 and VNNI row
// tiles ("avx2-rows", "vnni-rows"), their panel tiles ("avx2", "vnni")
// and the AMX tiles ("amx"), in G multiply-adds per second of the
// thread's CPU time (threadCPU: the machine may be shared), to place
// kqpMinInputs, kqpMinInputsVNNI and kqaMinInputs and to measure prefill's kernels.
func BenchmarkKQuantAMX(b *testing.B) {
	skipNoAMX(b)
	r := rand.New(rand.NewPCG(41, 42))
	const rows, cols = 768, 2048
	type kern struct {
		dot qkDot
		til qkTile
	}
	vnni := map[tensor.DType]kern{tensor.Q4_K: {q4kDotVNNI, q4kTile4VNNI}, tensor.Q5_K: {q5kDotVNNI, q5kTile4VNNI}, tensor.Q6_K: {q6kDotVNNI, q6kTile4VNNI}}
	avx2 := map[tensor.DType]kern{tensor.Q4_K: {q4kDotAVX2, q4kTile4AVX2}, tensor.Q5_K: {q5kDotAVX2, q5kTile4AVX2}, tensor.Q6_K: {q6kDotAVX2, q6kTile4AVX2}}
	paths := []struct {
		name string
		pt   *kqPanels
		k    map[tensor.DType]kern
	}{
		{"avx2-rows", nil, avx2}, {"avx2", kqPanelsAVX2, avx2},
		{"vnni-rows", nil, vnni}, {"vnni", kqPanelsVNNI, vnni}, {"amx", kqPanelsAMX, vnni},
	}
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		w := kqWeight(b, r, dt, rows, cols)
		for _, n := range []int{8, 16, 32, 64, 128, 512} {
			xq := kqActs(r, n, cols)
			dst := make([]float32, n*rows)
			for _, path := range paths {
				b.Run(fmt.Sprintf("%v/n=%d/%s", dt, n, path.name), func(b *testing.B) {
					defer func(p, v, a int) { kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs = p, v, a }(kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs)
					kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs = 1, 1, 1
					k := path.k[dt]
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0 := threadCPU()
					for b.Loop() {
						matQK(dt, path.pt, k.dot, k.til, dst, w, xq, n, rows, cols, 0, rows)
					}
					b.ReportMetric(float64(rows)*float64(cols)*float64(n)*float64(b.N)/(threadCPU()-t0).Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// TestKQuantAMXUnderSignals runs the AMX Q4_K and Q6_K tiles on two
// goroutines while a third floods the process with SIGURG: signals
// landing inside the tile code must leave every output with the bits of
// the VNNI row kernel (the OS saves and restores the tile state around
// each handler).
func TestKQuantAMXUnderSignals(t *testing.T) {
	skipNoAMX(t)
	r := rand.New(rand.NewPCG(43, 44))
	rows, cols, n := 256, 1024, 80 // n ≥ kqaMinInputs, a partial last group
	nb := cols / tensor.QK_K
	xq := kqActs(r, n, cols)
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
				syscall.Kill(syscall.Getpid(), syscall.SIGURG)
				k++
			}
		}
	}()
	errs := make(chan error, 2)
	for g, dt := range []tensor.DType{tensor.Q4_K, tensor.Q6_K} {
		w := kqWeight(t, rand.New(rand.NewPCG(45, uint64(g))), dt, rows, cols)
		rb, xb := nb*dt.BlockBytes(), nb*q8kBlk
		dot, k := q4kDotVNNI, matQ4_KAMX
		if dt == tensor.Q6_K {
			dot, k = q6kDotVNNI, matQ6_KAMX
		}
		go func() {
			dst := make([]float32, n*rows)
			for range 20 {
				k(dst, w, xq, n, rows, cols, 0, rows)
				for i := range n {
					for row := range rows {
						want := dot(&w[row*rb], &xq[i*xb], nb)
						if got := dst[i*rows+row]; math.Float32bits(got) != math.Float32bits(want) {
							errs <- fmt.Errorf("%v output (%d, %d) = %v under signals, row kernel %v", dt, i, row, got, want)
							return
						}
					}
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	t.Logf("%d signals sent", <-sent)
}
