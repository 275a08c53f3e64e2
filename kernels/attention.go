package kernels

import "fmt"

// attentionImpl computes, for each query row i and head h (KV head
// kvh = h / (Heads/KVHeads)):
//
//	for each visible slot j, ascending: score[j] = Dot(q_h, k_j[kvh]) * Scale
//	Softmax(scores of the visible slots)
//	out := 0; for each visible slot j, ascending: out[t] += float32(a_j * v_j[kvh][t])
//
// with the generic Dot and Softmax. A row with no visible slot gets zeros.
var attentionImpl = attentionGeneric

// Attention is scaled dot-product attention of rows query rows over one
// sequence's paged KV for one layer:
//
//	// q, dst: (rows, s.Heads*s.HeadDim); KV rows: (kv.Len, s.KVHeads*s.HeadDim)
//
// Row i attends to the slots j < kv.Len that mask.Visible(i, j) allows (all
// kv.Len slots when mask is nil). Scale multiplies the raw dot product: pass
// 1/sqrt(HeadDim) for standard attention (model/ref does, where llama2.c
// divides by sqrtf(head_size)). Heads must be a multiple of KVHeads (GQA: a
// group of Heads/KVHeads query heads shares one KV head). dst must not overlap
// q or the KV pages. scratch must hold AttentionScratch(kv, rows) floats. The
// result is bit-identical to kernels/ref.Attention, and row i's output does
// not depend on the other rows in the call. It does not allocate.
func Attention(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	if s.Heads <= 0 || s.KVHeads <= 0 || s.Heads%s.KVHeads != 0 || s.HeadDim < 0 || rows < 0 {
		panic(fmt.Sprintf("kernels: Attention: rows=%d Heads=%d KVHeads=%d HeadDim=%d: want rows ≥ 0 and Heads a positive multiple of KVHeads",
			rows, s.Heads, s.KVHeads, s.HeadDim))
	}
	if w := rows * s.Heads * s.HeadDim; len(q) < w || len(dst) < w {
		panic(fmt.Sprintf("kernels: Attention: rows=%d × %d heads × %d: len(q)=%d len(dst)=%d, want ≥%d",
			rows, s.Heads, s.HeadDim, len(q), len(dst), w))
	}
	if kv.Len < 0 || (kv.Len > 0 && (kv.PageTokens <= 0 ||
		len(kv.K) < (kv.Len+kv.PageTokens-1)/kv.PageTokens || len(kv.V) < (kv.Len+kv.PageTokens-1)/kv.PageTokens)) {
		panic(fmt.Sprintf("kernels: Attention: kv.Len=%d PageTokens=%d with %d K and %d V pages",
			kv.Len, kv.PageTokens, len(kv.K), len(kv.V)))
	}
	if mask != nil && (len(mask.Lo) < rows || len(mask.Hi) < rows ||
		(mask.Tree != nil && (len(mask.Tree) < rows || len(mask.TreeBase) < rows))) {
		panic(fmt.Sprintf("kernels: Attention: rows=%d but mask has %d Lo, %d Hi, %d Tree, %d TreeBase rows",
			rows, len(mask.Lo), len(mask.Hi), len(mask.Tree), len(mask.TreeBase)))
	}
	if need := AttentionScratch(kv, rows); len(scratch) < need {
		panic(fmt.Sprintf("kernels: Attention: len(scratch)=%d, want ≥%d", len(scratch), need))
	}
	attentionImpl(dst, q, rows, kv, mask, s, scratch)
}

// AttentionScratch is the number of floats Attention needs in scratch: one
// score per KV slot (reused for every row and head), so rows does not change it.
func AttentionScratch(kv KV, rows int) int {
	return max(kv.Len, 0)
}
