package model

import (
	"context"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/offload"
)

// What the decoder blocks of model/llama and model/gemma share: pinning a
// layer's weights for one Forward, Q/K norms and RoPE, and attention over the
// pass's runs of rows. Each block keeps its own order of operations around
// them (biases and adapters in llama, the Q pre-scale, post-norms and local
// windows in gemma).

// Pins gathers the weights one Forward acquires so they are released
// together. A fixed array keeps the decode loop free of allocations (an
// append-grown slice escaped to the heap); 16 covers every block sluice runs
// (llama: 2 norms, 7 matrices, 4 biases, 2 Q/K norms; gemma: 4 norms, 7
// matrices, 2 Q/K norms).
type Pins struct {
	p [16]offload.Pinned
	n int
}

// Add keeps pin for Release.
func (p *Pins) Add(pin offload.Pinned) {
	if p.n == len(p.p) {
		panic("model: more than 16 weights pinned in one Forward")
	}
	p.p[p.n] = pin
	p.n++
}

// Matrix pins a matrix (Matrix) and keeps its pin.
func (p *Pins) Matrix(ctx context.Context, w offload.Store, r offload.Ref) (kernels.Weight, error) {
	m, pin, err := Matrix(ctx, w, r)
	if err == nil {
		p.Add(pin)
	}
	return m, err
}

// Vector pins an optional 1-D tensor (Vector) and keeps its pin; a nil r
// gives nil. buf holds a decoded copy when the tensor is not F32.
func (p *Pins) Vector(ctx context.Context, w offload.Store, r *offload.Ref, buf *[]float32) ([]float32, error) {
	if r == nil {
		return nil, nil
	}
	v, pin, err := Vector(ctx, w, *r, buf)
	if err == nil {
		p.Add(pin)
	}
	return v, err
}

// Mark is the number of pins held, for ReleaseFrom.
func (p *Pins) Mark() int { return p.n }

// Release releases every pin.
func (p *Pins) Release() { p.ReleaseFrom(0) }

// ReleaseFrom releases the pins added since Mark returned mark, so a
// streamed store may refill their buffers while the block goes on computing.
func (p *Pins) ReleaseFrom(mark int) {
	for i := p.n - 1; i >= mark; i-- {
		p.p[i].Release()
		p.p[i] = nil
	}
	p.n = min(p.n, mark)
}

// QKRoPE is the positional part of attention: the per-head RMSNorm of Q and
// K (QNorm, KNorm; nil: none), then RoPE at each row's position, with
// per-frequency divisors when Factors is set.
type QKRoPE struct {
	Heads, KVHeads, HeadDim, RopeDim int
	Base                             float32
	Factors                          []float32 // rope_freqs; nil: plain RoPE
	Style                            kernels.RopeStyle
	QNorm, KNorm                     []float32
	Eps                              float32
}

// Apply normalises and rotates the n rows of q (Heads·HeadDim wide) and k
// (KVHeads·HeadDim wide) in place.
func (r QKRoPE) Apply(pool *kernels.Pool, q, k []float32, pos []int32, n int) {
	if r.QNorm != nil { // per-head RMSNorm: every head of every row is a row of HeadDim
		kernels.RMSNormRows(pool, q, q, n*r.Heads, r.QNorm, r.Eps)
	}
	if r.KNorm != nil {
		kernels.RMSNormRows(pool, k, k, n*r.KVHeads, r.KNorm, r.Eps)
	}
	pos = pos[:n]
	if r.Factors != nil {
		kernels.RoPEScaledRows(pool, q, pos, r.Heads, r.HeadDim, r.RopeDim, r.Base, r.Factors, r.Style)
		kernels.RoPEScaledRows(pool, k, pos, r.KVHeads, r.HeadDim, r.RopeDim, r.Base, r.Factors, r.Style)
		return
	}
	kernels.RoPERows(pool, q, pos, r.Heads, r.HeadDim, r.RopeDim, r.Base, r.Style)
	kernels.RoPERows(pool, k, pos, r.KVHeads, r.HeadDim, r.RopeDim, r.Base, r.Style)
}

// Outputs is the rows the last block computes past its KV writes: the
// batch's Outputs when last is set and they are not every row, else nil
// (every row). Only Head reads a block's output and Head reads only the
// Outputs rows, so the last block may skip the others once their keys and
// values are in the cache: a prompt chunk then runs the last block's
// attention, output projection and feed-forward network for one row, not
// for the whole chunk (llama.cpp's inp_out_ids does the same for the
// feed-forward part). A row's values do not depend on which other rows a
// kernel call holds, so this changes no bit of the logits; the rows left
// out hold undefined values afterwards.
func Outputs(st *State, last bool) []int32 {
	if !last || len(st.Batch.Outputs) == st.Batch.Len() {
		return nil
	}
	return st.Batch.Outputs
}

// GatherRows moves rows rows[j] of x (width floats each; rows ascending) to
// row j, in place.
func GatherRows(x []float32, width int, rows []int32) {
	for j, r := range rows {
		if int(r) != j {
			copy(x[j*width:(j+1)*width], x[int(r)*width:(int(r)+1)*width])
		}
	}
}

// ScatterRows undoes GatherRows: row j of x goes back to row rows[j]
// (last first, so no row is overwritten before it has moved).
func ScatterRows(x []float32, width int, rows []int32) {
	for j := len(rows) - 1; j >= 0; j-- {
		if r := int(rows[j]); r != j {
			copy(x[r*width:(r+1)*width], x[j*width:(j+1)*width])
		}
	}
}

// AttendRows is Attend for the batch rows listed in rows (ascending; nil:
// every row, which is Attend): row j of q and att is batch row rows[j].
// Each run of consecutive listed rows of one sequence is one
// kernels.AttentionPool call over those rows of the pass's mask.
func AttendRows(pool *kernels.Pool, st *State, layer *kvcache.Layer, att, q []float32, shape kernels.AttnShape,
	rowMask func(lo, hi int) *kernels.Mask, scoreSlot int, rows []int32) {
	if rows == nil {
		Attend(pool, st, layer, att, q, shape, rowMask, scoreSlot)
		return
	}
	qd := shape.Heads * shape.HeadDim
	j := 0 // rows[j] is the first listed row not yet attended
	for _, run := range st.Pass.Runs() {
		lo, hi := run.Start, run.Start+run.Rows
		for j < len(rows) && int(rows[j]) < lo {
			j++
		}
		if j == len(rows) || int(rows[j]) >= hi {
			continue
		}
		kv := layer.View(run.Seq)
		for j < len(rows) && int(rows[j]) < hi {
			// rows[j:e] are consecutive batch rows [a, a+e-j) of this run.
			e := j + 1
			for e < len(rows) && int(rows[e]) < hi && rows[e] == rows[e-1]+1 {
				e++
			}
			a := int(rows[j])
			var mask *kernels.Mask
			if rowMask != nil {
				mask = rowMask(a, a+e-j)
			} else {
				mask = subMask(&st.sub, run.Mask, a-lo, a-lo+e-j)
			}
			scores := st.Scratch(scoreSlot, kernels.AttentionPoolScratch(pool, kv, e-j))
			kernels.AttentionPool(pool, att[j*qd:e*qd], q[j*qd:e*qd], e-j, kv, mask, shape, scores)
			j = e
		}
	}
}

// subMask sets s to rows [a, b) of m (slices of it, no copy) and returns
// it; s is the State's, so that a pass does not allocate one per call.
func subMask(s, m *kernels.Mask, a, b int) *kernels.Mask {
	if m == nil {
		return nil
	}
	*s = kernels.Mask{Lo: m.Lo[a:b], Hi: m.Hi[a:b]}
	if m.Tree != nil {
		s.Tree, s.TreeBase = m.Tree[a:b], m.TreeBase[a:b]
	}
	return s
}

// Attend writes into att the attention of each row of q over layer's keys
// and values, one run of consecutive rows of one sequence at a time (the
// unit of one kernels.AttentionPool call). rowMask, when set, gives the
// mask of rows [lo, hi) in place of the run's own (gemma's local window);
// scoreSlot is the st.Scratch buffer the scores use.
func Attend(pool *kernels.Pool, st *State, layer *kvcache.Layer, att, q []float32, shape kernels.AttnShape,
	rowMask func(lo, hi int) *kernels.Mask, scoreSlot int) {
	qd := shape.Heads * shape.HeadDim
	for _, run := range st.Pass.Runs() {
		kv := layer.View(run.Seq)
		lo, hi := run.Start, run.Start+run.Rows
		mask := run.Mask
		if rowMask != nil {
			mask = rowMask(lo, hi)
		}
		scores := st.Scratch(scoreSlot, kernels.AttentionPoolScratch(pool, kv, run.Rows))
		kernels.AttentionPool(pool, att[lo*qd:hi*qd], q[lo*qd:hi*qd], run.Rows, kv, mask, shape, scores)
	}
}
