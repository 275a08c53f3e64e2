package kernels

import (
	"encoding/binary"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// The generic matrix kernels decode one tile of a weight row (a quant block,
// or up to 32 plain values) into a stack buffer with exactly
// tensor.DequantizeRow's arithmetic (aligned F32 rows are read in place), then
// continue each input row's running
// sum over that tile. The running sum lives in dst between tiles (a float32
// store and load are exact), so every output is the plain sequential float32
// dot product of kernels/ref, while a tile is decoded once for all n inputs.
//
// Four weight rows are processed together: their four sums are independent
// dependency chains, which is where the speed of a strictly sequential
// reduction comes from (one chain is bound by float add latency).

const (
	tile  = 32 // == tensor.QK8_0 == tensor.QK4_0
	group = 4  // weight rows per pass
)

// tileOf returns elements [c, c+m) of one weight row as float32: a view of
// the row itself for aligned F32 data on a little-endian machine, else decoded
// into buf. c is a multiple of tile. A switch rather than a func value: an
// indirect call would make the stack tile buffer escape to the heap.
func tileOf(t tensor.DType, buf *[tile]float32, row []byte, c, m int) []float32 {
	switch t {
	case tensor.F32:
		if v, ok := f32View(row); ok {
			return v[c : c+m]
		}
		decodeF32(buf[:m], row, c)
	case tensor.F16:
		decodeF16(buf[:m], row, c)
	case tensor.BF16:
		decodeBF16(buf[:m], row, c)
	case tensor.Q8_0:
		decodeQ8_0(buf[:m], row, c)
	case tensor.Q4_0:
		decodeQ4_0(buf[:m], row, c)
	default:
		panic("kernels: MatMul: unsupported dtype " + t.String())
	}
	return buf[:m]
}

func matF32Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matGeneric(tensor.F32, 4*cols, dst, w, x, n, rows, cols, lo, hi)
}

func matF16Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matGeneric(tensor.F16, 2*cols, dst, w, x, n, rows, cols, lo, hi)
}

func matBF16Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matGeneric(tensor.BF16, 2*cols, dst, w, x, n, rows, cols, lo, hi)
}

func matQ8_0Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matGeneric(tensor.Q8_0, cols/tensor.QK8_0*tensor.Q8_0BlockLen, dst, w, x, n, rows, cols, lo, hi)
}

func matQ4_0Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matGeneric(tensor.Q4_0, cols/tensor.QK4_0*tensor.Q4_0BlockLen, dst, w, x, n, rows, cols, lo, hi)
}

// matGeneric computes output rows [lo,hi) for all n inputs; rb is the byte
// length of one weight row.
func matGeneric(t tensor.DType, rb int, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	var buf [group][tile]float32
	r := lo
	for ; r+group <= hi; r += group {
		for i := 0; i < n; i++ {
			clear(dst[i*rows+r : i*rows+r+group])
		}
		for c := 0; c < cols; c += tile {
			m := min(tile, cols-c)
			w0 := tileOf(t, &buf[0], w[(r+0)*rb:(r+1)*rb], c, m)
			w1 := tileOf(t, &buf[1], w[(r+1)*rb:(r+2)*rb], c, m)
			w2 := tileOf(t, &buf[2], w[(r+2)*rb:(r+3)*rb], c, m)
			w3 := tileOf(t, &buf[3], w[(r+3)*rb:(r+4)*rb], c, m)
			accumulate4(dst, w0, w1, w2, w3, x, n, rows, cols, r, c)
		}
	}
	for ; r < hi; r++ {
		for i := 0; i < n; i++ {
			dst[i*rows+r] = 0
		}
		for c := 0; c < cols; c += tile {
			m := min(tile, cols-c)
			accumulate1(dst, tileOf(t, &buf[0], w[r*rb:(r+1)*rb], c, m), x, n, rows, cols, r, c)
		}
	}
}

// accumulate4 continues dst[i*rows+r+k] += Σ_j wk[j]*x[i*cols+c+j] for the
// four weight tiles w0..w3 (rows r..r+3) and every input i, each sum strictly
// in j order.
func accumulate4(dst, w0, w1, w2, w3, x []float32, n, rows, cols, r, c int) {
	m := len(w0)
	w1, w2, w3 = w1[:m], w2[:m], w3[:m]
	for i := 0; i < n; i++ {
		xs := x[i*cols+c : i*cols+c+m]
		o := dst[i*rows+r : i*rows+r+group]
		s0, s1, s2, s3 := o[0], o[1], o[2], o[3]
		for j, xv := range xs {
			s0 += float32(w0[j] * xv)
			s1 += float32(w1[j] * xv)
			s2 += float32(w2[j] * xv)
			s3 += float32(w3[j] * xv)
		}
		o[0], o[1], o[2], o[3] = s0, s1, s2, s3
	}
}

// accumulate1 is accumulate4 for one weight row wt.
func accumulate1(dst, wt, x []float32, n, rows, cols, r, c int) {
	for i := 0; i < n; i++ {
		xs := x[i*cols+c : i*cols+c+len(wt)]
		s := dst[i*rows+r]
		for j, v := range wt {
			s += float32(v * xs[j])
		}
		dst[i*rows+r] = s
	}
}

func decodeF32(dst []float32, row []byte, c int) {
	src := row[4*c : 4*(c+len(dst))]
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
	}
}

func decodeF16(dst []float32, row []byte, c int) {
	tab := f16Table()
	if v, ok := u16View(row); ok {
		for j, h := range v[c : c+len(dst)] {
			dst[j] = tab[h]
		}
		return
	}
	src := row[2*c : 2*(c+len(dst))]
	for j := range dst {
		dst[j] = tab[binary.LittleEndian.Uint16(src[2*j:])]
	}
}

func decodeBF16(dst []float32, row []byte, c int) {
	if v, ok := u16View(row); ok {
		for j, h := range v[c : c+len(dst)] {
			dst[j] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	src := row[2*c : 2*(c+len(dst))]
	for j := range dst {
		dst[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*j:])) << 16)
	}
}

// decodeQ8_0 decodes block c/32: w = d * q, as tensor.DequantizeRow.
func decodeQ8_0(dst []float32, row []byte, c int) {
	b := c / tensor.QK8_0
	blk := row[b*tensor.Q8_0BlockLen : (b+1)*tensor.Q8_0BlockLen]
	d := f16Table()[binary.LittleEndian.Uint16(blk)]
	qs := blk[2 : 2+tensor.QK8_0]
	dst = dst[:tensor.QK8_0]
	for j, q := range qs {
		dst[j] = d * float32(int8(q))
	}
}

// decodeQ4_0 decodes block c/32: byte j holds weights j (low nibble) and j+16
// (high nibble), w = d * (nibble - 8), as tensor.DequantizeRow.
func decodeQ4_0(dst []float32, row []byte, c int) {
	const half = tensor.QK4_0 / 2
	b := c / tensor.QK4_0
	blk := row[b*tensor.Q4_0BlockLen : (b+1)*tensor.Q4_0BlockLen]
	d := f16Table()[binary.LittleEndian.Uint16(blk)]
	qs := blk[2 : 2+half]
	dst = dst[:tensor.QK4_0]
	for j, q := range qs {
		dst[j] = d * float32(int32(q&0x0f)-8)
		dst[j+half] = d * float32(int32(q>>4)-8)
	}
}
