package quant_test

import (
	"fmt"

	"github.com/sluicehq/sluice/compress/quant"
)

func Example() {
	s, err := quant.ParseScheme("int4-g32")
	if err != nil {
		fmt.Println(err)
		return
	}
	w := []float32{0.4, -1.2, 0.05, 0.9} // the seed's group of 4
	row := make([]byte, s.RowBytes(len(w)))
	s.QuantizeRow(row, w)
	back := make([]float32, len(w))
	s.DequantizeRow(back, row)
	fmt.Printf("%v: %d bytes, back %.3f, dot with (2,0,0,1) %.3f\n", s, len(row), back, s.Dot(row, []float32{2, 0, 0, 1}))

	_, err = quant.ParseScheme("int3")
	fmt.Println(err)
	// Output:
	// int4-g32: 6 bytes, back [0.343 -1.200 0.000 0.857], dot with (2,0,0,1) 1.543
	// quant: unknown scheme "int3" (valid: int8-g32, int8-g64, int8-g128, int4-g32, int4-g64, int4-g128, nf4, q8_0, q4_0)
}
