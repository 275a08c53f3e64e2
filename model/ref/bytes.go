package ref

import "unsafe"

// f32bytes views float32s as bytes so kernels/ref can read them as an F32 Weight.
func f32bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}
