package kernels_test

import (
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// BenchmarkRepack: laying out a 5632×2048 matrix (a 1B model's FFN) in
// panels in place, as the ssd tier's packer does after each read; bytes/s
// against the disk's read rate says whether the packer keeps up.
func BenchmarkRepack(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		b.Run(dt.String(), func(b *testing.B) {
			const rows, cols = 5632, 2048
			if !kernels.Repackable(dt, rows, cols) {
				b.Skipf("%v: no panel layout under this kernel set", dt)
			}
			rb, _ := dt.RowBytes(cols)
			data := make([]byte, rows*rb)
			for i := range data {
				data[i] = byte(i*13 + i/7)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := kernels.Repack(kernels.Weight{DType: dt, Data: data, Rows: rows, Cols: cols}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
