//go:build !(goexperiment.simd && amd64) || purego

package kernels_test

import (
	"encoding/binary"
)

// streamSum adds b as little-endian 64-bit words (len(b) a multiple of 64).
func streamSum(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		s0 += binary.LittleEndian.Uint64(b[i:])
		s1 += binary.LittleEndian.Uint64(b[i+8:])
		s2 += binary.LittleEndian.Uint64(b[i+16:])
		s3 += binary.LittleEndian.Uint64(b[i+24:])
	}
	return s0 + s1 + s2 + s3
}
