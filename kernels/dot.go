package kernels

import "fmt"

// dotImpl is
//
//	var s float32
//	for i := range a { s += float32(a[i] * b[i]) }
//	return s
var dotImpl = dotGeneric

// Dot returns Σ a[i]*b[i], accumulated in float32 from i=0 upward. It panics
// if the lengths differ.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("kernels: Dot: len(a)=%d != len(b)=%d", len(a), len(b)))
	}
	return dotImpl(a, b)
}
