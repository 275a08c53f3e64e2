package kernels

import (
	"fmt"
	"sync"
)

// attentionImpl computes the (row, head) items [lo, hi) of a call, item
// it = i*s.Heads + h being query row i, head h (KV head kvh = h /
// (Heads/KVHeads)):
//
//	for each visible slot j, ascending: score[j] = Dot(q_h, k_j[kvh]) * Scale
//	  (capped when Softcap > 0: score[j] = float32(tanh(score[j] * (1/Softcap))) * Softcap)
//	Softmax(scores of the visible slots)
//	out := 0; for each visible slot j, ascending: out[t] += float32(a_j * v_j[kvh][t])
//
// with the generic Dot and Softmax, using scratch (≥ kv.Len floats) for the
// scores. An item with no visible slot gets zeros. Each item is computed alone,
// in a fixed order, so how the items are split across threads never changes
// the result.
var attentionImpl = attentionGeneric

// attentionF16Impl is attentionImpl for a KV of binary16 pages (KV.K16):
// the same operations in the same order as the F32 kernel of its set, each
// K and V element widened exactly as it is loaded.
var attentionF16Impl = attentionGeneric

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
// q or the KV pages. scratch must hold kv.Len floats at least;
// AttentionScratch(kv, rows) is the size to give it. The
// result is bit-identical to kernels/ref.Attention, and row i's output does
// not depend on the other rows in the call. It does not allocate.
func Attention(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	AttentionPool(nil, dst, q, rows, kv, mask, s, scratch)
}

// AttentionPool is Attention with the rows×heads (query row, head) items split
// across p's threads (nil p: the caller's goroutine). Every item is computed
// by the same code in the same order whichever thread runs it, so the result
// is bit-identical to Attention for any thread count. scratch is split into
// one score buffer per thread and must hold threads × kv.Len floats at
// least; AttentionPoolScratch(p, kv, rows) is the size to give it. It does
// not allocate.
func AttentionPool(p *Pool, dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	if s.Heads <= 0 || s.KVHeads <= 0 || s.Heads%s.KVHeads != 0 || s.HeadDim < 0 || rows < 0 {
		panic(fmt.Sprintf("kernels: Attention: rows=%d Heads=%d KVHeads=%d HeadDim=%d: want rows ≥ 0 and Heads a positive multiple of KVHeads",
			rows, s.Heads, s.KVHeads, s.HeadDim))
	}
	if w := rows * s.Heads * s.HeadDim; len(q) < w || len(dst) < w {
		panic(fmt.Sprintf("kernels: Attention: rows=%d × %d heads × %d: len(q)=%d len(dst)=%d, want ≥%d",
			rows, s.Heads, s.HeadDim, len(q), len(dst), w))
	}
	if nk, nv := kv.pageCount(); kv.Len < 0 || (kv.Len > 0 && (kv.PageTokens <= 0 ||
		nk < (kv.Len+kv.PageTokens-1)/kv.PageTokens || nv < (kv.Len+kv.PageTokens-1)/kv.PageTokens)) {
		panic(fmt.Sprintf("kernels: Attention: kv.Len=%d PageTokens=%d with %d K and %d V pages (f16 %v)",
			kv.Len, kv.PageTokens, nk, nv, kv.F16()))
	}
	if mask != nil && (len(mask.Lo) < rows || len(mask.Hi) < rows ||
		(mask.Tree != nil && (len(mask.Tree) < rows || len(mask.TreeBase) < rows))) {
		panic(fmt.Sprintf("kernels: Attention: rows=%d but mask has %d Lo, %d Hi, %d Tree, %d TreeBase rows",
			rows, len(mask.Lo), len(mask.Hi), len(mask.Tree), len(mask.TreeBase)))
	}
	if need := p.Threads() * max(kv.Len, 0); len(scratch) < need {
		panic(fmt.Sprintf("kernels: Attention: len(scratch)=%d, want ≥%d (%d threads × %d slots; AttentionPoolScratch gives the best size)",
			len(scratch), need, p.Threads(), kv.Len))
	}
	items := rows * s.Heads
	// Threads only pay for their wake-up (a few µs) on enough work: about
	// 2·HeadDim flops per visible slot each for the scores and the values.
	parts := min(p.Threads(), items, 1+items*max(kv.Len, 0)*max(s.HeadDim, 1)/attnMinWork)
	impl := attentionImpl
	if kv.F16() {
		impl = attentionF16Impl
	}
	if s.Softcap > 0 { // the vector kernels do not cap scores
		impl = attentionGeneric
	}
	if parts <= 1 {
		impl(dst, q, kv, mask, s, scratch, 0, items)
		return
	}
	per := len(scratch) / parts // ≥ kv.Len: parts ≤ threads
	j := getAttnJob()
	*j = attnJob{dst: dst, q: q, kv: kv, mask: mask, s: s, scratch: scratch, per: per, items: items, parts: parts, impl: impl, fn: j.fn, cuts: j.cuts}
	j.balance(rows)
	// One index per part: For gives each thread one part (or, on a closed
	// pool, runs them all inline), and part k owns scratch chunk k.
	p.For(parts, j.fn)
	putAttnJob(j)
}

// attnMinWork is the items×slots×HeadDim of work below which AttentionPool
// stays on one thread (about 8 µs of attention); a var so tests can split
// tiny calls.
var attnMinWork = 1 << 15

// attnJob is one AttentionPool call's arguments, reached by the pool's
// threads through a func value made once per job (a closure per call would
// allocate).
type attnJob struct {
	dst, q            []float32
	kv                KV
	mask              *Mask
	s                 AttnShape
	scratch           []float32
	per, items, parts int
	impl              func(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int)
	fn                func(lo, hi int)
	// cuts, when not empty, are the parts' item bounds (parts+1 of them):
	// whole rows, balanced by the rows' visible slots (balance).
	cuts []int
}

func (j *attnJob) run(lo, hi int) {
	for k := lo; k < hi; k++ {
		a, b := chunkBounds(j.items, j.parts, k)
		if len(j.cuts) > 0 {
			a, b = j.cuts[k], j.cuts[k+1]
		}
		j.impl(j.dst, j.q, j.kv, j.mask, j.s, j.scratch[k*j.per:(k+1)*j.per], a, b)
	}
}

// attnRowCost is the per-row work balance counts besides a row's visible
// slots: the row's share of the calls, softmaxes and output clears.
const attnRowCost = 16

// balance sets j.cuts to whole-row bounds that give each part about the
// same number of visible slots (plus attnRowCost a row), when there are at
// least two rows per part; otherwise it leaves the equal item split. A
// causal prompt chunk's row i sees i slots more than its first row: split
// into equal halves of rows, the second thread had three times the first's
// work, and the first spun (or yielded) until it was done. Which thread
// computes an item never changes its bits.
func (j *attnJob) balance(rows int) {
	j.cuts = j.cuts[:0]
	if rows < 2*j.parts {
		return
	}
	total := 0
	for i := range rows {
		lo, hi, _ := visibleRange(j.kv, j.mask, i)
		total += max(hi-lo, 0) + attnRowCost
	}
	j.cuts = append(j.cuts, 0)
	acc, k := 0, 1
	for i := range rows {
		lo, hi, _ := visibleRange(j.kv, j.mask, i)
		acc += max(hi-lo, 0) + attnRowCost
		// Cut after row i once the parts so far have their share.
		for k < j.parts && acc*j.parts >= total*k {
			j.cuts = append(j.cuts, (i+1)*j.s.Heads)
			k++
		}
	}
	for len(j.cuts) <= j.parts {
		j.cuts = append(j.cuts, rows*j.s.Heads)
	}
	j.cuts[j.parts] = j.items
}

// attnJobs is a free list of jobs: AttentionPool calls on different Pools may
// run at once, so one package-level job would not do, and sync.Pool may drop
// its items (an allocation) at any GC.
var attnJobs struct {
	sync.Mutex
	free []*attnJob
}

func getAttnJob() *attnJob {
	attnJobs.Lock()
	defer attnJobs.Unlock()
	if n := len(attnJobs.free); n > 0 {
		j := attnJobs.free[n-1]
		attnJobs.free = attnJobs.free[:n-1]
		return j
	}
	j := &attnJob{}
	j.fn = j.run
	return j
}

func putAttnJob(j *attnJob) {
	*j = attnJob{fn: j.fn, cuts: j.cuts[:0]} // drop the references to the caller's slices
	attnJobs.Lock()
	attnJobs.free = append(attnJobs.free, j)
	attnJobs.Unlock()
}

// AttentionScratch is the number of floats to give Attention in scratch:
// attnScoreBufs scores per KV slot (reused for every row and head) for each
// of up to attnRowBlock rows. Attention needs only one score per slot (kv.Len
// floats); with fewer than AttentionScratch the AVX2 kernel takes fewer
// rows or heads of a row per call (same result, slower). The slot count is rounded
// up to a multiple of attnScratchSlots, so that a buffer grown to this size
// (model.State.Scratch) is reallocated every attnScratchSlots tokens of a
// decode, not at every step.
func AttentionScratch(kv KV, rows int) int {
	return attnScoreBufs * min(max(rows, 1), attnRowBlock) * ((max(kv.Len, 0) + attnScratchSlots - 1) / attnScratchSlots * attnScratchSlots)
}

// attnScratchSlots is AttentionScratch's rounding: at stories260K's 256
// tokens the decode step reallocated its 16 score buffers (and cleared
// them, and collected the old ones) 9% of the time.
const attnScratchSlots = 256

// attnScoreBufs is how many items' scores a kernel may hold at once: the
// AVX2 kernel scores and weighs up to that many heads of a row per call.
const attnScoreBufs = 16

// attnRowBlock is the most query rows the AVX2 kernel takes through each KV
// page together (attnRowBlockAVX2); AttentionScratch gives a call of that
// many rows or more attnRowBlock times attnScoreBufs score buffers.
const attnRowBlock = 8

// AttentionPoolScratch is the number of floats AttentionPool needs in scratch
// on p: AttentionScratch per thread (each thread scores its items alone).
func AttentionPoolScratch(p *Pool, kv KV, rows int) int {
	return p.Threads() * AttentionScratch(kv, rows)
}
