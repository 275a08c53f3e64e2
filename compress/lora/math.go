package lora

import "fmt"

// Merge adds the adapter to a base weight in place: W' = W + scale·B·A for a
// linear layer (w row-major (Out, In)), or W' = W + scale·(B·A)ᵀ for an
// embedding table (w row-major (vocab, dim)). (rows, cols) must equal
// BaseShape; otherwise the error names both shapes. Like PEFT, the update
// ΔW = B·A is formed first (summing over r in order) and then scaled and added.
func (m *Module) Merge(w []float32, rows, cols int) error {
	if err := m.checkBase("Merge", len(w), rows, cols); err != nil {
		return err
	}
	delta := make([]float32, cols)
	for i := range rows {
		m.deltaRow(delta, i)
		row := w[i*cols : (i+1)*cols]
		for j, d := range delta {
			row[j] += m.Scale * d
		}
	}
	return nil
}

// MergeTransposed is Merge for a base weight stored transposed, (cols, rows)
// row-major with (rows, cols) = BaseShape: a Hugging Face Conv1D weight
// (fan_in_fan_out) that no converter has transposed yet.
func (m *Module) MergeTransposed(w []float32, rows, cols int) error {
	if err := m.checkBase("MergeTransposed", len(w), rows, cols); err != nil {
		return err
	}
	delta := make([]float32, cols)
	for i := range rows {
		m.deltaRow(delta, i)
		for j, d := range delta {
			w[j*rows+i] += m.Scale * d
		}
	}
	return nil
}

func (m *Module) checkBase(op string, n, rows, cols int) error {
	br, bc := m.BaseShape()
	if rows != br || cols != bc || n != rows*cols {
		return fmt.Errorf("%w: %s module %s: B·A is [%d %d] but the base weight is [%d %d] (%d values)", ErrShape, op, m.Name, br, bc, rows, cols, n)
	}
	return nil
}

// deltaRow writes row i of ΔW/scale (BaseShape orientation) into dst.
func (m *Module) deltaRow(dst []float32, i int) {
	clear(dst)
	r := m.R
	if !m.Embedding {
		// ΔW[i][j] = Σ_k B[i][k]·A[k][j]
		for k := range r {
			b := m.B[i*r+k]
			for j, a := range m.A[k*m.In : (k+1)*m.In] {
				dst[j] += b * a
			}
		}
		return
	}
	// Embedding: ΔW[t][d] = Σ_k B[d][k]·A[k][t] for token t = i.
	for d := range dst {
		var acc float32
		for k := range r {
			acc += m.B[d*r+k] * m.A[k*m.In+i]
		}
		dst[d] = acc
	}
}

// Apply adds the unmerged adapter output for n input rows of a linear layer:
//
//	dst (n, Out) += scale · (x Aᵀ) Bᵀ,  x (n, In)
//
// i.e. per row y += scale·B(A x). It panics, like a kernel, when the slices do
// not match n and the module's shape, or when called on an embedding module.
func (m *Module) Apply(dst, x []float32, n int) {
	if m.Embedding || len(x) != n*m.In || len(dst) != n*m.Out {
		panic(fmt.Sprintf("lora: Apply %s (embedding %v): x has %d values, want %d×%d; dst %d, want %d×%d",
			m.Name, m.Embedding, len(x), n, m.In, len(dst), n, m.Out))
	}
	u := make([]float32, m.R)
	for row := range n {
		xr := x[row*m.In : (row+1)*m.In]
		for k := range u { // u = A x
			var acc float32
			for j, a := range m.A[k*m.In : (k+1)*m.In] {
				acc += a * xr[j]
			}
			u[k] = acc
		}
		yr := dst[row*m.Out : (row+1)*m.Out]
		for i := range yr { // y += scale·B u
			var acc float32
			for k, b := range m.B[i*m.R : (i+1)*m.R] {
				acc += b * u[k]
			}
			yr[i] += m.Scale * acc
		}
	}
}

// ApplyEmbedding adds the unmerged adapter to embedding rows: for each token t,
// dst row (dim = Out) += scale·B·A[:, t]. It panics on a token outside
// [0, In) or a dst of the wrong size.
func (m *Module) ApplyEmbedding(dst []float32, tokens []int32) {
	if !m.Embedding || len(dst) != len(tokens)*m.Out {
		panic(fmt.Sprintf("lora: ApplyEmbedding %s (embedding %v): dst has %d values, want %d×%d", m.Name, m.Embedding, len(dst), len(tokens), m.Out))
	}
	for row, t := range tokens {
		if t < 0 || int(t) >= m.In {
			panic(fmt.Sprintf("lora: ApplyEmbedding %s: token %d outside the vocabulary of %d", m.Name, t, m.In))
		}
		yr := dst[row*m.Out : (row+1)*m.Out]
		for d := range yr {
			var acc float32
			for k := range m.R {
				acc += m.B[d*m.R+k] * m.A[k*m.In+int(t)]
			}
			yr[d] += m.Scale * acc
		}
	}
}

// PermuteRows reorders the rows of a row-major (rows, cols) matrix in place as
// llama.cpp's converter permutes Q and K for GGUF llama models:
// reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2), i.e. within each head of
// d = rows/heads rows, row j·d/2 + i moves to 2i + j.
func PermuteRows(w []float32, rows, cols, heads int) error {
	if heads <= 0 || rows%(2*heads) != 0 || len(w) != rows*cols {
		return fmt.Errorf("%w: cannot permute %d rows of %d values (%d values) for %d heads: want rows a multiple of 2·heads", ErrShape, rows, cols, len(w), heads)
	}
	d := rows / heads
	src := append([]float32(nil), w...)
	for h := range heads {
		for j := range 2 {
			for i := range d / 2 {
				from := h*d + j*(d/2) + i
				to := h*d + 2*i + j
				copy(w[to*cols:(to+1)*cols], src[from*cols:(from+1)*cols])
			}
		}
	}
	return nil
}
