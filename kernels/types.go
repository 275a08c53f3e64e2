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
// in page t/PageTokens at row t%PageTokens; each row is KVHeads*HeadDim values.
// K[p] and V[p] have PageTokens rows (the last page may be partly filled).
//
// The pages hold float32 values (K, V) or IEEE binary16 halves (K16, V16: an
// F16 KV cache); when K16 is non-nil the halves are the pages and K, V are
// ignored. Attention widens each half exactly (tensor.F16ToF32), so an F16
// KV gives the bits of the F32 KV holding the widened values.
type KV struct {
	K, V       [][]float32
	K16, V16   [][]uint16
	PageTokens int
	Len        int // slots in use
}

// F16 reports whether the pages are binary16 (K16, V16).
func (kv *KV) F16() bool { return kv.K16 != nil }

// pageCount is the number of K and V pages present in the KV's element type.
func (kv *KV) pageCount() (k, v int) {
	if kv.F16() {
		return len(kv.K16), len(kv.V16)
	}
	return len(kv.K), len(kv.V)
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
	// Softcap, when positive, caps every scaled score to
	// Softcap·tanh(score/Softcap) before the softmax (Gemma 2's
	// attn_logit_softcapping); 0 is none. Capped calls run the generic
	// kernel.
	Softcap float32
}
