//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestKQPanelizeSM16: the AMX path's panelization with the scales unpacked
// in assembly writes kqPanelize's bytes (the Go unpacking), for random
// block bytes (every bit pattern of the packed 6-bit scales and mins),
// Q4_K and Q5_K, one to three super-blocks, rows further apart than a
// row's blocks.
func TestKQPanelizeSM16(t *testing.T) {
	if !cpuVNNI || !cpuHasVBMI() {
		t.Skip("SKIP kqScalesSM16: CPU lacks AVX-512 VNNI or VBMI")
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K} {
		for _, nb := range []int{1, 2, 3} {
			for _, pad := range []int{0, 7, 300} {
				bb := dt.BlockBytes()
				rb := nb*bb + pad
				src := make([]byte, PanelRows*rb)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				want := make([]byte, nb*kqpSM)
				got := make([]byte, nb*kqpSM+1)
				got[nb*kqpSM] = 0xa5
				kqPanelize(dt, want, src, nb, rb, false)
				kqPanelizeSM16(dt, got, src, nb, rb)
				what := fmt.Sprintf("%v nb=%d rb=%d", dt, nb, rb)
				if !bytes.Equal(got[:nb*kqpSM], want) {
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s: byte %d (super-block %d, offset %d) = %#x, kqPanelize %#x", what, i, i/kqpSM, i%kqpSM, got[i], want[i])
						}
					}
				}
				if got[nb*kqpSM] != 0xa5 {
					t.Fatalf("%s: wrote past the panel", what)
				}
			}
		}
	}
}
