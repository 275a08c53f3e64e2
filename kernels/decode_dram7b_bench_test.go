//go:build linux

package kernels_test

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// BenchmarkDecodeStream7B is decode's weight stream at Llama-2-7B's shapes
// (4096×4096 ×4, 11008×4096 ×2, 4096×11008 per layer, repeated to fill 1
// GiB of anonymous memory advised MADV_HUGEPAGE, as the ram tier holds it,
// Q4_0 and Q8_0 repacked into panels where the set has them) with 1 and 2
// threads sharing each matrix through a Pool, as a decode step does: so
// it counts the pool's per-matrix hand-off and the split of rows between
// the threads, which BenchmarkDecodeStream's one thread does not. MB/s is
// weight bytes per wall-clock second, to set against sum/tT, the same
// bytes read by T goroutines with eight accumulators each (bench's
// _streamread); cpuMB/s is per second of the process's CPU time (on a
// shared machine the steadier figure; a helper's spin between matrices
// counts in it).
func BenchmarkDecodeStream7B(b *testing.B) {
	const size = 1 << 30
	shapes := [][2]int{{4096, 4096}, {4096, 4096}, {4096, 4096}, {4096, 4096}, {11008, 4096}, {11008, 4096}, {4096, 11008}}
	buf, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Munmap(buf)
	_ = syscall.Madvise(buf, 14) // MADV_HUGEPAGE
	for _, dt := range []tensor.DType{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K} {
		var ws []kernels.Weight
		var total int64
		build := func() { ws, total = fillWeights(b, buf, dt, shapes) }
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/t%d", dt, threads), func(b *testing.B) {
				if ws == nil {
					build()
				}
				pool := kernels.NewPool(threads)
				defer pool.Close()
				r := newRand(b)
				x, dst := vec(r, 11008, normal), make([]float32, 11008)
				b.SetBytes(total)
				c0 := processCPU()
				for b.Loop() {
					for _, w := range ws {
						kernels.MatVec(pool, dst[:w.Rows], w, x[:w.Cols])
					}
				}
				b.ReportMetric(float64(total)*float64(b.N)/(processCPU()-c0).Seconds()/1e6, "cpuMB/s")
			})
		}
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("sum/t%d", threads), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			sinks := make([]uint64, threads)
			c0 := processCPU()
			for b.Loop() {
				var wg sync.WaitGroup
				part := len(buf) / threads
				for k := range threads {
					wg.Go(func() { sinks[k] += sum8(buf[k*part : (k+1)*part]) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(len(buf))*float64(b.N)/(processCPU()-c0).Seconds()/1e6, "cpuMB/s")
			if sinks[0] == 1 {
				b.Log(sinks)
			}
		})
	}
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
