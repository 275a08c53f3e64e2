package spec

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sample"
)

// The streams of sample.UniformAt that speculative decoding draws from. One
// position can need up to three independent draws (the draft model's sample,
// the acceptance test, the residual resample), so each purpose has its own
// stream; all are keyed by the absolute position of the token they decide.
const (
	// StreamSample is plain sampling (sample.Uniform). The bonus token and
	// every token of a tree verification are drawn from it, which is what
	// makes them agree with plain decoding.
	StreamSample uint64 = 0
	// StreamDraft is the draft model's own sampling of a proposal x_i. It
	// must differ from StreamAccept: a proposal and its acceptance test must
	// be independent for the output to follow p.
	StreamDraft uint64 = 1
	// StreamAccept is the acceptance test of proposal x_i.
	StreamAccept uint64 = 2
	// StreamResidual is the resample from norm(max(0, p−q)) after a rejection.
	StreamResidual uint64 = 3
)

// Errors of the verifiers and constructors. Wrapped errors say which input
// or option is wrong.
var (
	ErrInput   = errors.New("spec: invalid input")
	ErrOptions = errors.New("spec: invalid options")
)

// Uniforms returns the uniform in [0, 1) for draft index i (0 is the first
// proposal, γ the bonus position) and stream. VerifyChain calls it at most
// twice per index, so it may be a closure over sample.UniformAt or, in tests,
// anything else.
type Uniforms func(i int, stream uint64) float64

// KeyedUniforms is the engine's Uniforms: draft index i of request r decides
// the token at absolute position t0+i, so its draws are
// sample.UniformAt(seed, r, t0+i, stream). t0 is the position of the first
// proposal (the length of the history before it), as sample.Sampler.Next's t.
func KeyedUniforms(seed, r, t0 uint64) Uniforms {
	return func(i int, stream uint64) float64 {
		return sample.UniformAt(seed, r, t0+uint64(i), stream)
	}
}

// ChainScratch holds VerifyChain's buffers so that, once warm, it does not
// allocate. The zero value is ready; not for concurrent use.
type ChainScratch struct {
	dense []float32 // q by token id, zero outside q's support
	res   sample.Dist
}

// VerifyChain is speculative sampling over one chain of γ = len(draft)
// proposals. q[i] is the draft's distribution that x_{i+1} = draft[i] was
// sampled from (the engine draws it as Draw(q[i], u(i, StreamDraft)), not
// with Sampler.Next, whose stream 0 the bonus token uses) and p[i] the
// target's at the same prefix; p has γ+1 entries, the last after all
// proposals. Both must be the processed distributions
// (sample.Sampler.Dist after penalty, temperature, top-k, top-p, min-p), as
// Hugging Face assisted generation applies its logits processors to both
// models; sparse or dense Dists are both accepted.
//
// For i = 0, 1, …: accept draft[i] when u(i, StreamAccept) < p_i(x)/q_i(x)
// (with q_i(x) = 0 it is accepted iff p_i(x) > 0). At the first rejection,
// next is drawn from norm(max(0, p_i − q_i)), computed by token id over p_i's
// support, with u(i, StreamResidual); if that residual has no mass (p_i ≤ q_i
// everywhere, which only rounding allows) it falls back to p_i. If all γ are
// accepted, next is drawn from p_γ with u(γ, StreamSample), the same draw
// plain decoding makes at that position. Draws are by inverse CDF in the
// Dist's entry order, exactly as sample.Sampler.Sample.
//
// It returns how many proposals were accepted and the one token after them:
// the caller emits draft[:accepted] then next, and rewinds both caches to
// the accepted prefix. Under greedy (every Dist one-hot from Temperature 0)
// this accepts while draft[i] is the target's argmax and then emits the
// target's argmax: exactly plain greedy decoding.
//
// sc may be nil.
func VerifyChain(p, q []sample.Dist, draft []int32, u Uniforms, sc *ChainScratch) (accepted int, next int32, err error) {
	g := len(draft)
	if len(q) != g || len(p) != g+1 {
		return 0, -1, fmt.Errorf("%w: %d proposals need %d draft and %d target distributions, have %d and %d",
			ErrInput, g, g, g+1, len(q), len(p))
	}
	if u == nil {
		return 0, -1, fmt.Errorf("%w: nil Uniforms", ErrInput)
	}
	if sc == nil {
		sc = new(ChainScratch)
	}
	for i, x := range draft {
		px, qx := probOf(p[i], x), probOf(q[i], x)
		if accept(px, qx, u(i, StreamAccept)) {
			continue
		}
		d := sc.residual(p[i], q[i])
		if !hasMass(d) {
			d = p[i]
		}
		if next = Draw(d, u(i, StreamResidual)); next < 0 {
			return i, -1, fmt.Errorf("%w: target distribution %d has no positive entry", ErrInput, i)
		}
		return i, next, nil
	}
	if next = Draw(p[g], u(g, StreamSample)); next < 0 {
		return g, -1, fmt.Errorf("%w: target distribution %d has no positive entry", ErrInput, g)
	}
	return g, next, nil
}

// accept is the test u < min(1, p/q).
func accept(px, qx float64, u float64) bool {
	if qx <= 0 {
		return px > 0
	}
	return u < px/qx
}

// residual returns norm-less max(0, p−q) over p's support, in p's entry order
// (Draw normalises). It lives in sc until the next call.
func (sc *ChainScratch) residual(p, q sample.Dist) sample.Dist {
	lookup := sc.indexQ(q)
	sc.res.IDs, sc.res.Probs = sc.res.IDs[:0], sc.res.Probs[:0]
	for j, pj := range p.Probs {
		id := int32(j)
		if p.IDs != nil {
			id = p.IDs[j]
		}
		var qj float32
		if int(id) < len(lookup) && id >= 0 {
			qj = lookup[id]
		}
		if r := float64(pj) - float64(qj); r > 0 {
			sc.res.IDs = append(sc.res.IDs, id)
			sc.res.Probs = append(sc.res.Probs, float32(r))
		}
	}
	sc.clearQ(q)
	return sc.res
}

// indexQ returns q indexed by token id: q itself when dense, else sc.dense
// filled from q's entries (clearQ zeroes them again).
func (sc *ChainScratch) indexQ(q sample.Dist) []float32 {
	if q.IDs == nil {
		return q.Probs
	}
	n := 0
	for _, id := range q.IDs {
		n = max(n, int(id)+1)
	}
	if len(sc.dense) < n {
		sc.dense = append(sc.dense, make([]float32, n-len(sc.dense))...)
	}
	for j, id := range q.IDs {
		if id >= 0 {
			sc.dense[id] += q.Probs[j]
		}
	}
	return sc.dense
}

func (sc *ChainScratch) clearQ(q sample.Dist) {
	if q.IDs == nil {
		return
	}
	for _, id := range q.IDs {
		if id >= 0 {
			sc.dense[id] = 0
		}
	}
}

// probOf is d's probability of id (0 when absent), in float64.
func probOf(d sample.Dist, id int32) float64 {
	if d.IDs == nil {
		if id < 0 || int(id) >= len(d.Probs) {
			return 0
		}
		return float64(max(d.Probs[id], 0))
	}
	var s float64
	for j, x := range d.IDs {
		if x == id && d.Probs[j] > 0 {
			s += float64(d.Probs[j])
		}
	}
	return s
}

func hasMass(d sample.Dist) bool {
	for _, p := range d.Probs {
		if p > 0 {
			return true
		}
	}
	return false
}

// Draw is sample.Draw (Sampler.Sample's inverse CDF), named here because the
// verifiers and their tests use it with spec's uniform streams.
func Draw(d sample.Dist, u float64) int32 { return sample.Draw(d, u) }
