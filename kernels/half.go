package kernels

import (
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// f16Table holds tensor.F16ToF32 for every binary16 bit pattern (256 KiB),
// built on first use: a load instead of a branchy conversion per weight.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return t
})
