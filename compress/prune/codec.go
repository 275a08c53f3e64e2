package prune

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// Sparse24Name is the dtype name of DTypeSparse24 ("sluice inspect" shows it).
const Sparse24Name = "sparse24"

// init makes DTypeSparse24 a tensor dtype (sized and decoded from Encode's row
// layout) with its own MatMul kernel, so a GGUF holding 2:4-compressed
// matrices loads and runs anywhere this package is imported (model
// blank-imports it).
func init() {
	err := tensor.RegisterCodec(DTypeSparse24, tensor.Codec{
		Name:          Sparse24Name,
		RowBytes:      func(cols int) int64 { return int64(RowBytes24(cols)) },
		DequantizeRow: decodeRow24,
	})
	if err == nil {
		err = kernels.RegisterMatKernel(DTypeSparse24, matSparse24)
	}
	if err != nil {
		panic(fmt.Sprintf("prune: registering %s: %v", Sparse24Name, err))
	}
}

// decodeRow24 writes the dense row of cols weights encoded in src (one row
// of Encode's layout). It trusts nothing: offsets are masked to 2 bits and
// columns past cols are skipped, so corrupt bytes decode to some row, never
// a panic (Decode24 is the validating parser).
func decodeRow24(dst []float32, src []byte, cols int) {
	dst = dst[:cols]
	clear(dst)
	G := Groups24(cols)
	src = src[:9*G]
	idx := src[8*G:]
	for g := range G {
		b := idx[g]
		for j, o := range [2]int{int(b & 3), int(b >> 2 & 3)} {
			if c := 4*g + o; c < cols {
				dst[c] = f32At(src, 2*g+j)
			}
		}
	}
}

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// matSparse24 is the kernels.ExtKernel of DTypeSparse24: two multiply-adds
// per group of 4 columns, reading 9 bytes instead of 16. Unlike
// Sparse24.MatVec it keeps each output's sum in column order (the two slots of
// a group are in increasing column order), so it equals the dense sequential
// dot that model/ref computes on the decoded row: the terms it skips are
// weights that are zero, which leave a float32 sum unchanged for finite x.
// Four rows go together, as four independent dependency chains.
func matSparse24(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	G := Groups24(cols)
	rb := 9 * G
	full := cols / 4
	r := lo
	for ; r+4 <= hi; r += 4 {
		r0, r1, r2, r3 := w[r*rb:(r+1)*rb], w[(r+1)*rb:(r+2)*rb], w[(r+2)*rb:(r+3)*rb], w[(r+3)*rb:(r+4)*rb]
		i0, i1, i2, i3 := r0[8*G:8*G+full], r1[8*G:8*G+full], r2[8*G:8*G+full], r3[8*G:8*G+full]
		for i := 0; i < n; i++ {
			xs := x[i*cols : (i+1)*cols]
			var a0, a1, a2, a3 float32
			for g := range full {
				xg := xs[4*g : 4*g+4]
				a0 = dot2(a0, r0[8*g:8*g+8], i0[g], xg)
				a1 = dot2(a1, r1[8*g:8*g+8], i1[g], xg)
				a2 = dot2(a2, r2[8*g:8*g+8], i2[g], xg)
				a3 = dot2(a3, r3[8*g:8*g+8], i3[g], xg)
			}
			if full < G {
				a0 = tail24(a0, r0, G, xs)
				a1 = tail24(a1, r1, G, xs)
				a2 = tail24(a2, r2, G, xs)
				a3 = tail24(a3, r3, G, xs)
			}
			o := dst[i*rows+r : i*rows+r+4]
			o[0], o[1], o[2], o[3] = a0, a1, a2, a3
		}
	}
	for ; r < hi; r++ {
		row := w[r*rb : (r+1)*rb]
		idx := row[8*G : 8*G+full]
		for i := 0; i < n; i++ {
			xs := x[i*cols : (i+1)*cols]
			var a float32
			for g := range full {
				a = dot2(a, row[8*g:8*g+8], idx[g], xs[4*g:4*g+4])
			}
			if full < G {
				a = tail24(a, row, G, xs)
			}
			dst[i*rows+r] = a
		}
	}
}

// dot2 adds one full group's two kept products to acc, in column order.
func dot2(acc float32, v []byte, b byte, xg []float32) float32 {
	v0 := math.Float32frombits(binary.LittleEndian.Uint32(v[0:4]))
	v1 := math.Float32frombits(binary.LittleEndian.Uint32(v[4:8]))
	acc += float32(v0 * xg[b&3])
	acc += float32(v1 * xg[b>>2&3])
	return acc
}

// tail24 adds the short last group (columns past len(xs) are skipped).
func tail24(acc float32, row []byte, G int, xs []float32) float32 {
	g := G - 1
	b := row[8*G+g]
	for j, o := range [2]int{int(b & 3), int(b >> 2 & 3)} {
		if c := 4*g + o; c < len(xs) {
			acc += float32(f32At(row, 2*g+j) * xs[c])
		}
	}
	return acc
}
