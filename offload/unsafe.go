package offload

import "unsafe"

func unsafeBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// addr is the address of b's first byte (b non-empty).
func addr(b []byte) int64 { return int64(uintptr(unsafe.Pointer(&b[0]))) }
