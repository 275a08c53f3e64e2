//go:build linux

package kernels_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// BenchmarkDecodeStream is decode's weight stream as the ram tier holds it:
// a 110M model's matrices (768×768 ×4, 2048×768 ×2, 768×2048) packed back
// to back in anonymous memory advised MADV_HUGEPAGE (as offload's ram tier
// and bench/_streamread allocate), Q8_0 and Q4_0 repacked into panels
// where the kernel set has them, each MatVec'd once per pass on one
// thread, for Q4_0, Q8_0, Q4_K, Q5_K, Q6_K (the K-quant mixes' types, row-major as
// every tier keeps them), F16 and F32: MB/s is weight bytes per second,
// against "sum", a plain eight-accumulator read of the same bytes. Three
// sizes: 1 MiB (L2), 64 MiB, about a 110M Q4_0 model's layer weights
// (which a large L3 may hold), and 1 GiB, far beyond any L3 (DRAM).
func BenchmarkDecodeStream(b *testing.B) {
	shapes := [][2]int{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}}
	for _, mib := range []int{1, 64, 1024} {
		buf, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		_ = syscall.Madvise(buf, 14) // MADV_HUGEPAGE
		for _, dt := range []tensor.DType{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.F16, tensor.F32} {
			var ws []kernels.Weight
			var total int64
			var built bool
			build := func() {
				built = true
				ws, total = fillWeights(b, buf, dt, shapes)
			}
			b.Run(fmt.Sprintf("%dMiB/%v", mib, dt), func(b *testing.B) {
				if !built {
					build()
				}
				r := newRand(b)
				x, dst := vec(r, 2048, normal), make([]float32, 2048)
				b.SetBytes(total)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := streamThreadCPU()
				for b.Loop() {
					for _, w := range ws {
						kernels.MatVec(nil, dst[:w.Rows], w, x[:w.Cols])
					}
				}
				b.ReportMetric(float64(total)*float64(b.N)/(streamThreadCPU()-t0).Seconds()/1e6, "cpuMB/s")
			})
		}
		b.Run(fmt.Sprintf("%dMiB/sum", mib), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			var sink uint64
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := streamThreadCPU()
			for b.Loop() {
				sink += sum8(buf)
			}
			b.ReportMetric(float64(len(buf))*float64(b.N)/(streamThreadCPU()-t0).Seconds()/1e6, "cpuMB/s")
			if sink == 1 {
				b.Log(sink)
			}
		})
		if err := syscall.Munmap(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// streamThreadCPU is the calling thread's CPU time. cpuMB/s (weight bytes
// per second of it) is the figure to read on a shared machine, where the
// wall-clock MB/s counts the time the thread waited for a core; a stream
// slowed by others' memory traffic still shows in both.
func streamThreadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// sum8 adds the 64-bit words of b with eight accumulators (len(b) a
// multiple of 64), bench/_streamread's loop.
func sum8(b []byte) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	le := binary.LittleEndian
	for i := 0; i+64 <= len(b); i += 64 {
		v := b[i : i+64 : i+64]
		a0 += le.Uint64(v[0:])
		a1 += le.Uint64(v[8:])
		a2 += le.Uint64(v[16:])
		a3 += le.Uint64(v[24:])
		a4 += le.Uint64(v[32:])
		a5 += le.Uint64(v[40:])
		a6 += le.Uint64(v[48:])
		a7 += le.Uint64(v[56:])
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// fillWeights fills buf with weights of type dt in shapes, round after round
// until the next would not fit, each laid out as the ram tier lays it out
// (Repack), and returns them and their bytes: a decode benchmark's stream,
// the same random rows repeated (one makeWeight per shape).
func fillWeights(b *testing.B, buf []byte, dt tensor.DType, shapes [][2]int) (ws []kernels.Weight, total int64) {
	r := newRand(b)
	src := map[[2]int]kernels.Weight{}
	off := 0
	for {
		for _, sh := range shapes {
			w, ok := src[sh]
			if !ok {
				w = makeWeight(r, dt, sh[0], sh[1], 0, encoded)
				src[sh] = w
			}
			if off+len(w.Data) > len(buf) {
				return ws, total
			}
			c := w
			c.Data = buf[off : off+len(w.Data) : off+len(w.Data)]
			copy(c.Data, w.Data)
			c, err := kernels.Repack(c)
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, c)
			off += len(w.Data)
			total += int64(len(w.Data))
		}
	}
}
