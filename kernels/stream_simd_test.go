//go:build goexperiment.simd && amd64 && !purego

package kernels_test

import (
	"encoding/binary"
	"testing"

	"simd/archsimd"
)

// streamSum adds b as little-endian 64-bit words (len(b) a multiple of 64)
// with 512-bit loads on AVX-512 (256-bit on AVX2), two accumulators.
func streamSum(b []byte) uint64 {
	if !archsimd.X86.AVX512() {
		return streamSum256(b)
	}
	a0 := archsimd.BroadcastUint64x8(0)
	a1 := a0
	i := 0
	for ; i+128 <= len(b); i += 128 {
		a0 = a0.Add(archsimd.LoadUint8x64Slice(b[i : i+64]).AsUint64x8())
		a1 = a1.Add(archsimd.LoadUint8x64Slice(b[i+64 : i+128]).AsUint64x8())
	}
	var lanes [8]uint64
	a0.Add(a1).Store(&lanes)
	var s uint64
	for _, v := range lanes {
		s += v
	}
	for ; i+8 <= len(b); i += 8 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}

func streamSum256(b []byte) uint64 {
	a0 := archsimd.BroadcastUint64x4(0)
	a1 := a0
	i := 0
	for ; i+64 <= len(b); i += 64 {
		a0 = a0.Add(archsimd.LoadUint8x32Slice(b[i : i+32]).AsUint64x4())
		a1 = a1.Add(archsimd.LoadUint8x32Slice(b[i+32 : i+64]).AsUint64x4())
	}
	var lanes [4]uint64
	a0.Add(a1).Store(&lanes)
	var s uint64
	for _, v := range lanes {
		s += v
	}
	for ; i+8 <= len(b); i += 8 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}

// TestStreamSum: the vector sum equals the word-by-word sum.
func TestStreamSum(t *testing.T) {
	b := make([]byte, 4096+8)
	for i := range b {
		b[i] = byte(i*131 + 7)
	}
	var want uint64
	for i := 0; i+8 <= len(b); i += 8 {
		want += binary.LittleEndian.Uint64(b[i:])
	}
	if got := streamSum(b); got != want {
		t.Fatalf("streamSum = %d, want %d", got, want)
	}
	if got := streamSum256(b); got != want {
		t.Fatalf("streamSum256 = %d, want %d", got, want)
	}
}

// BenchmarkStreamReadThreads is BenchmarkStreamRead split across 2
// goroutines: whether a second core draws more memory bandwidth (the ceiling
// for a two-thread decode).
func BenchmarkStreamReadThreads(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	half := len(buf) / 2
	var sink [2]uint64
	for b.Loop() {
		done := make(chan struct{})
		go func() {
			sink[1] += streamSum(buf[half:])
			close(done)
		}()
		sink[0] += streamSum(buf[:half])
		<-done
	}
	if sink[0] == 1 {
		b.Log(sink)
	}
}
