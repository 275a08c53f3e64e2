//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// The assembly panel layout writes exactly the Go loops' bytes, and
// nothing outside the panel.
func TestPanelizeAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("the CPU has no AVX2")
	}
	r := rand.New(rand.NewPCG(29, 3))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, nb := range []int{1, 2, 3, 7, 64, 176} {
			t.Run(fmt.Sprintf("%v/nb=%d", dt, nb), func(t *testing.T) {
				n := PanelRows * nb * dt.BlockBytes()
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				want := make([]byte, n)
				panelizeGo(dt, want, src, nb)
				const guard = 64
				got := make([]byte, n+2*guard)
				for i := range got {
					got[i] = 0xa5
				}
				panelizeAVX2(dt, got[guard:guard+n], src, nb)
				if !bytes.Equal(got[guard:guard+n], want) {
					i := 0
					for got[guard+i] == want[i] {
						i++
					}
					t.Fatalf("byte %d (block %d, offset %d in it): %#x, want %#x", i, i/(PanelRows*dt.BlockBytes()), i%(PanelRows*dt.BlockBytes()), got[guard+i], want[i])
				}
				for i := range guard {
					if got[i] != 0xa5 || got[guard+n+i] != 0xa5 {
						t.Fatalf("wrote outside the panel at %d", i)
					}
				}
			})
		}
	}
}
