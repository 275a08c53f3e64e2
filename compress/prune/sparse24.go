package prune

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// DTypeSparse24 is the proposed GGUF type id of a tensor stored in Encode's
// row layout (9 bytes per 4 weights). Like package quant's ids it is above
// 1024: sluice-only, unreadable by llama.cpp.
const DTypeSparse24 tensor.DType = 1040

// Sparse24 is a 2:4-sparse row-major (Rows, Cols) matrix stored compressed:
// for each group of 4 columns of a row (G = ceil(Cols/4) groups per row, the
// last one short when Cols%4 != 0), the two kept weights and their positions.
//
//	Values: (Rows, 2G) float32, the kept weights of group g at [2g] and [2g+1], in column order
//	Index:  (Rows, G)  bytes, bits 0–1 = column offset of Values[2g], bits 2–3 = of Values[2g+1]
//
// Offsets within a group are strictly increasing (off0 < off1). A group with
// fewer than 2 nonzeros fills its spare slots with zero values at the lowest
// free offsets; in a short last group a slot whose column is past Cols always
// holds 0 and is never read. That is 9 bytes per 4 weights instead of 16.
type Sparse24 struct {
	Rows, Cols int
	Values     []float32
	Index      []byte
}

// Groups24 is the number of groups of 4 in a row of cols weights.
func Groups24(cols int) int { return (cols + 3) / 4 }

// RowBytes24 is the encoded size of one row (see Encode).
func RowBytes24(cols int) int { return 9 * Groups24(cols) }

// Compress24 compresses a row-major (rows, cols) matrix in which every group
// of 4 (per row, from column 0) has at most 2 nonzeros, as NM(w, rows, cols, 2, 4)
// leaves it. A denser group is an error naming its row and columns.
func Compress24(w []float32, rows, cols int) (*Sparse24, error) {
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("%w: (%d, %d) matrix needs %d weights, got %d", ErrShape, rows, cols, rows*cols, len(w))
	}
	G := Groups24(cols)
	s := &Sparse24{Rows: rows, Cols: cols, Values: make([]float32, rows*2*G), Index: make([]byte, rows*G)}
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		for g := range G {
			grp := row[4*g : min(4*g+4, cols)]
			var offs [2]int
			nz := 0
			for i, v := range grp {
				if v != 0 {
					if nz == 2 {
						return nil, fmt.Errorf("%w: row %d, columns %d–%d hold more than 2 nonzeros", ErrNotSparse24, r, 4*g, 4*g+len(grp)-1)
					}
					offs[nz] = i
					nz++
				}
			}
			// Spare slots take the lowest offsets not already used.
			for o := 0; nz < 2; o++ {
				if nz == 1 && offs[0] == o {
					continue
				}
				offs[nz] = o
				nz++
			}
			if offs[0] > offs[1] {
				offs[0], offs[1] = offs[1], offs[0]
			}
			vals := s.Values[(r*G+g)*2:]
			for j, o := range offs {
				vals[j] = 0
				if o < len(grp) {
					vals[j] = grp[o]
				}
			}
			s.Index[r*G+g] = byte(offs[0]) | byte(offs[1])<<2
		}
	}
	return s, nil
}

// Decompress writes the dense (Rows, Cols) matrix into dst (len Rows·Cols).
func (s *Sparse24) Decompress(dst []float32) {
	dst = dst[:s.Rows*s.Cols]
	clear(dst)
	G := Groups24(s.Cols)
	for r := range s.Rows {
		row := dst[r*s.Cols : (r+1)*s.Cols]
		for g := range G {
			b := s.Index[r*G+g]
			for j, o := range [2]int{int(b & 3), int(b >> 2 & 3)} {
				if c := 4*g + o; c < s.Cols {
					row[c] = s.Values[(r*G+g)*2+j]
				}
			}
		}
	}
}

// Bytes is the memory the compressed matrix takes (values and indices).
func (s *Sparse24) Bytes() int64 { return int64(len(s.Values))*4 + int64(len(s.Index)) }

// MatVec computes dst = W x, reading only the kept weights: two multiply-adds
// per group of 4 columns instead of four, and 9 bytes of weights instead of 16.
// len(x) must be Cols and len(dst) Rows. Per row it is
//
//	for g := range groups { acc += v[2g]·x[4g+off0] + v[2g+1]·x[4g+off1] }
//
// with four accumulators (group g goes to acc[g%4] in the unrolled body) summed
// as (a0+a1)+(a2+a3), so it can differ from a sequential dense dot in the last
// bits. Four index bytes are read as one little-endian uint32.
func (s *Sparse24) MatVec(dst, x []float32) {
	cols := s.Cols
	x = x[:cols]
	G := Groups24(cols)
	full := cols / 4
	for r := range dst[:s.Rows] {
		vals := s.Values[r*2*G : r*2*G+2*full]
		idx := s.Index[r*G : r*G+full]
		xs := x[:4*full]
		var a0, a1, a2, a3 float32
		// The length tests let the compiler drop every bounds check inside.
		for len(idx) >= 4 && len(vals) >= 8 && len(xs) >= 16 {
			b := binary.LittleEndian.Uint32(idx)
			a0 += vals[0]*xs[b&3] + vals[1]*xs[b>>2&3]
			a1 += vals[2]*xs[4+(b>>8&3)] + vals[3]*xs[4+(b>>10&3)]
			a2 += vals[4]*xs[8+(b>>16&3)] + vals[5]*xs[8+(b>>18&3)]
			a3 += vals[6]*xs[12+(b>>24&3)] + vals[7]*xs[12+(b>>26&3)]
			idx, vals, xs = idx[4:], vals[8:], xs[16:]
		}
		for len(idx) >= 1 && len(vals) >= 2 && len(xs) >= 4 {
			b := idx[0]
			a0 += vals[0]*xs[b&3] + vals[1]*xs[b>>2&3]
			idx, vals, xs = idx[1:], vals[2:], xs[4:]
		}
		if full < G { // short last group: a slot may point past Cols
			b := s.Index[r*G+full]
			for j, o := range [2]int{int(b & 3), int(b >> 2 & 3)} {
				if c := 4*full + o; c < cols {
					a1 += s.Values[(r*G+full)*2+j] * x[c]
				}
			}
		}
		dst[r] = (a0 + a1) + (a2 + a3)
	}
}

// Encode serialises the matrix row by row, each row RowBytes24(Cols) bytes:
// 2G little-endian float32 values, then G index bytes. Rows are independent
// byte ranges, like the quantized layouts, so a GGUF tensor can hold them.
func (s *Sparse24) Encode() []byte {
	G := Groups24(s.Cols)
	out := make([]byte, 0, s.Rows*RowBytes24(s.Cols))
	for r := range s.Rows {
		for _, v := range s.Values[r*2*G : (r+1)*2*G] {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
		out = append(out, s.Index[r*G:(r+1)*G]...)
	}
	return out
}

// Decode24 parses rows of Encode's layout, checking every index byte: two
// distinct 2-bit offsets in increasing order, the upper 4 bits clear, and a
// zero value in any slot that points past the end of a short last group.
func Decode24(data []byte, rows, cols int) (*Sparse24, error) {
	if rows < 0 || cols < 0 || int64(len(data)) != int64(rows)*int64(RowBytes24(cols)) {
		return nil, fmt.Errorf("%w: (%d, %d) 2:4 matrix needs %d bytes, got %d", ErrShape, rows, cols, int64(rows)*int64(RowBytes24(cols)), len(data))
	}
	G := Groups24(cols)
	s := &Sparse24{Rows: rows, Cols: cols, Values: make([]float32, rows*2*G), Index: make([]byte, rows*G)}
	rb := RowBytes24(cols)
	for r := range rows {
		row := data[r*rb : (r+1)*rb]
		for i := range 2 * G {
			s.Values[r*2*G+i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
		}
		for g, b := range row[8*G:] {
			off := int64(r*rb + 8*G + g)
			o0, o1 := int(b&3), int(b>>2&3)
			if b>>4 != 0 || o0 >= o1 {
				return nil, fmt.Errorf("%w: byte %d (row %d, group %d): index 0x%02x, want two increasing 2-bit offsets", ErrNotSparse24, off, r, g, b)
			}
			for j, o := range [2]int{o0, o1} {
				if 4*g+o >= cols && s.Values[(r*G+g)*2+j] != 0 {
					return nil, fmt.Errorf("%w: byte %d (row %d, group %d): nonzero value at column %d past the %d columns", ErrNotSparse24, off, r, g, 4*g+o, cols)
				}
			}
			s.Index[r*G+g] = b
		}
	}
	return s, nil
}
