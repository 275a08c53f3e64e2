package kernels

import (
	"encoding/binary"
	"unsafe"
)

// littleEndian is true on the machines whose memory layout matches GGUF's
// little-endian weights, where a weight's bytes can be read in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// f32View reinterprets b as float32s without copying, when that reads the
// same values binary.LittleEndian would: a little-endian machine and 4-byte
// aligned data (mmap'd GGUF tensors are 32-byte aligned; a misaligned
// pointer conversion would also trip -race's checkptr). ok is false otherwise
// and the caller decodes.
func f32View(b []byte) (v []float32, ok bool) {
	p := unsafe.SliceData(b)
	if !littleEndian || len(b) < 4 || uintptr(unsafe.Pointer(p))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), len(b)/4), true
}

// u16View is f32View for 16-bit elements (F16, BF16).
func u16View(b []byte) (v []uint16, ok bool) {
	p := unsafe.SliceData(b)
	if !littleEndian || len(b) < 2 || uintptr(unsafe.Pointer(p))%2 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(p)), len(b)/2), true
}
