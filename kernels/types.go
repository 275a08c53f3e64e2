package kernels

import "github.com/sluicehq/sluice/tensor"

// Weight is a matrix of Rows outputs by Cols inputs, stored in DType layout
// (GGUF blocks for quantized types; each row starts on a block boundary),
// row-major unless Layout says otherwise. Data is usually a slice of an
// mmap'd file: kernels never write to it (Repack, called by a store on bytes
// it owns, is the one function that does).
type Weight struct {
	DType      tensor.DType
	Data       []byte
	Rows, Cols int
	Layout     Layout // RowMajor (the zero value) or what Repack made
}

// RopeStyle is how a head's dimensions are paired for rotation.
type RopeStyle uint8

const (
	// RopeAdjacent rotates pairs (2i, 2i+1): llama2.c, GGUF llama (ggml "normal" rope).
	RopeAdjacent RopeStyle = iota
	// RopeHalf rotates pairs (i, i+d/2): HF checkpoints (ggml "neox" rope).
	RopeHalf
)

// KV is one sequence's keys and values for one layer, in pages. Token slot t lives
// in page t/PageTokens at row t%PageTokens; each row is KVHeads*HeadDim floats.
// K[p] and V[p] have PageTokens rows (the last page may be partly filled).
type KV struct {
	K, V       [][]float32
	PageTokens int
	Len        int // slots in use
}

// Mask says which KV slots each query row may attend to: row i sees slot j iff
// Lo[i] <= j < Hi[i] and, when Tree is non-nil and j >= TreeBase[i], bit
// j-TreeBase[i] of Tree[i] is set. Causal text is Lo=0, Hi=slot+1; a sliding
// window raises Lo; a draft tree sets Tree rows to the ancestor sets
// (row(parent) | self) over the slots from TreeBase on (the first tree slot of
// the row's sequence). Slots count per sequence; rows of different sequences
// in one batch each index their own sequence's KV.
type Mask struct {
	Lo, Hi   []int32
	Tree     [][]uint64 // nil for plain causal batches
	TreeBase []int32
}

// Visible reports whether row i may attend to slot j.
func (m *Mask) Visible(i int, j int32) bool {
	if j < m.Lo[i] || j >= m.Hi[i] {
		return false
	}
	if m.Tree == nil || j < m.TreeBase[i] {
		return true
	}
	k := j - m.TreeBase[i]
	return m.Tree[i][k/64]&(1<<(uint(k)%64)) != 0
}

// AttnShape describes the heads of one attention call.
type AttnShape struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // usually 1/sqrt(HeadDim)
}
