// Package sample turns a row of logits into the next token.
//
// It has three parts that the decoding modes combine:
//
//   - transforms (repetition penalty, temperature, softmax, top-k, top-p, min-p)
//     that turn logits into a sparse distribution, [Sampler.Dist];
//   - an inverse-CDF draw from a distribution given a uniform number, [Sampler.Sample];
//   - a counter-based uniform generator, [Uniform], keyed by (seed, request,
//     position) so the same seed gives the same text in every decoding mode,
//     whatever order the draws happen in (DESIGN.md invariant 3).
//
// Speculative verification needs the distribution, not only the chosen token,
// which is why Dist and Sample are separate steps (ollama x/mlxrunner does the same).
//
// The package is a leaf: it imports nothing of ours.
package sample

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Errors returned by Options.Validate and Sampler.Dist. Wrapped errors carry the
// field or the logit index.
var (
	ErrOptions = errors.New("sample: invalid options")
	ErrEmpty   = errors.New("sample: empty logits")
	ErrLogits  = errors.New("sample: invalid logits")
	ErrHistory = errors.New("sample: history token out of vocabulary")
)

// defaultRepeatLastN is llama.cpp's default penalty window.
const defaultRepeatLastN = 64

// Options configure a Sampler. The zero value is greedy decoding with no penalty.
type Options struct {
	Temperature float32 // 0 = greedy (argmax, ties → lowest id)
	TopK        int     // 0 = off
	TopP, MinP  float32 // 0 (or TopP 1) = off
	// RepeatPenalty follows llama.cpp and CTRL: over the distinct ids among the
	// last RepeatLastN history tokens, a logit > 0 becomes logit/p and any other
	// logit becomes logit*p. 0 or 1 = off.
	RepeatPenalty float32
	RepeatLastN   int // 0 → 64
	Seed          uint64
}

// Validate reports the first out-of-range field by name.
func (o Options) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrOptions, field, v, want)
	}
	switch {
	case isNaN32(o.Temperature) || o.Temperature < 0 || math.IsInf(float64(o.Temperature), 1):
		return bad("Temperature", o.Temperature, "finite and >= 0")
	case o.TopK < 0:
		return bad("TopK", o.TopK, ">= 0")
	case isNaN32(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return bad("TopP", o.TopP, "in [0, 1]")
	case isNaN32(o.MinP) || o.MinP < 0 || o.MinP > 1:
		return bad("MinP", o.MinP, "in [0, 1]")
	case isNaN32(o.RepeatPenalty) || o.RepeatPenalty < 0 || math.IsInf(float64(o.RepeatPenalty), 0):
		return bad("RepeatPenalty", o.RepeatPenalty, "finite and >= 0")
	case o.RepeatLastN < 0:
		return bad("RepeatLastN", o.RepeatLastN, ">= 0")
	}
	return nil
}

func isNaN32(f float32) bool { return f != f }

// Token is one candidate: an id and a value that is a logit or a weight,
// depending on the stage of the pipeline.
type Token struct {
	ID int32
	V  float32
}

// Dist is a distribution over token ids. Dist returns it sparse: IDs[i] has
// probability Probs[i], sorted by probability descending (ties by lower id), and
// ids left out have probability 0. Dense (IDs == nil, Probs indexed by id) is
// accepted by Sample too.
type Dist struct {
	IDs   []int32
	Probs []float32
}

// Len is the number of entries.
func (d Dist) Len() int { return len(d.Probs) }

// Scratch holds the buffers of one decode loop so that, once warm, Dist and Next
// do not allocate. A Dist returned by Sampler.Dist points into its Scratch and
// is valid until the next call that uses the same Scratch. The zero value is
// ready to use; a Scratch must not be used by two goroutines at once.
type Scratch struct {
	toks  []Token // candidates (vocabulary-sized when no top-k)
	tmp   []Token // radix-sort buffer
	pen   []int32 // distinct penalised ids, ascending
	ids   []int32
	probs []float32
}

func (sc *Scratch) tokens(n int) []Token {
	if cap(sc.toks) < n {
		sc.toks = make([]Token, n)
	}
	return sc.toks[:n]
}

// Sampler applies one Options. It holds no mutable state, so one Sampler may be
// shared by goroutines that each bring their own Scratch.
type Sampler struct {
	o       Options
	lastN   int
	penalty bool
	topP    bool
	minP    bool
}

// New validates o and returns a Sampler.
func New(o Options) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{o: o, lastN: o.RepeatLastN}
	if s.lastN == 0 {
		s.lastN = defaultRepeatLastN
	}
	s.penalty = o.RepeatPenalty != 0 && o.RepeatPenalty != 1
	s.topP = o.TopP > 0 && o.TopP < 1
	s.minP = o.MinP > 0
	return s, nil
}

// Options returns the options s was built with.
func (s *Sampler) Options() Options { return s.o }

// Uniform is the counter-based draw for position t of request r under seed: a
// pure function of the three words, in [0, 1) with 53-bit resolution. Because it
// has no state, the draw for (seed, r, t) does not depend on how many draws were
// made before or in which order, which is what lets speculative decoding and
// plain decoding agree token for token.
//
// Construction: each word is folded into a 64-bit state through the splitmix64
// finaliser (Stafford's "Mix13" constants, as in Java's SplittableRandom):
//
//	z = mix(seed ^ K0); z = mix(z ^ mix(r ^ K1)); z = mix(z ^ mix(t ^ K2)); z = mix(z + K3)
//	u = (z >> 11) · 2⁻⁵³
//
// For a fixed (seed, r) the map t → z is a bijection, so distinct positions never
// collide before the 53-bit truncation. Integer-only until the last exact
// conversion, so every platform returns the same bits.
func Uniform(seed, r, t uint64) float64 {
	const (
		k0 = 0x9e3779b97f4a7c15 // golden ratio
		k1 = 0xd1b54a32d192ed03
		k2 = 0xaef17502108ef2d9
		k3 = 0x632be59bd9b4e019
	)
	z := mix64(seed ^ k0)
	z = mix64(z ^ mix64(r^k1))
	z = mix64(z ^ mix64(t^k2))
	z = mix64(z + k3)
	return float64(z>>11) * 0x1p-53
}

// mix64 is the splitmix64 finaliser, a bijection on uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Next picks the token for position t of request r: the argmax after the
// repetition penalty when Temperature is 0 (ties → lowest id), otherwise
// Sample(Dist(logits, history), Uniform(Seed, r, t)).
func (s *Sampler) Next(logits []float32, history []int32, r, t uint64, sc *Scratch) (int32, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	if s.o.Temperature == 0 {
		if len(logits) == 0 {
			return -1, ErrEmpty
		}
		if err := s.penalised(history, len(logits), sc); err != nil {
			return -1, err
		}
		return s.argmax(logits, sc.pen)
	}
	d, err := s.Dist(logits, history, sc)
	if err != nil {
		return -1, err
	}
	return s.Sample(d, Uniform(s.o.Seed, r, t)), nil
}

// Sample draws from d by inverse CDF in d's order: the first entry whose
// cumulative probability exceeds u·Σp. Entries with probability ≤ 0 (or NaN)
// are never chosen. It returns -1 when d has no positive entry.
func (s *Sampler) Sample(d Dist, u float64) int32 {
	return Draw(d, u)
}

// Draw is Sample without a Sampler, for verifiers that draw from
// distributions they built: weights need not sum to 1.
func Draw(d Dist, u float64) int32 {
	var total float64
	for _, p := range d.Probs {
		if p > 0 {
			total += float64(p)
		}
	}
	if total == 0 || math.IsInf(total, 0) {
		return -1
	}
	target := u * total
	var cum float64
	last := -1
	for i, p := range d.Probs {
		if !(p > 0) {
			continue
		}
		cum += float64(p)
		last = i
		if target < cum {
			break
		}
	}
	if d.IDs == nil {
		return int32(last)
	}
	return d.IDs[last]
}

// penalised fills sc.pen with the distinct ids of the last lastN history tokens,
// ascending, or empties it when the penalty is off.
func (s *Sampler) penalised(history []int32, vocab int, sc *Scratch) error {
	sc.pen = sc.pen[:0]
	if !s.penalty {
		return nil
	}
	if len(history) > s.lastN {
		history = history[len(history)-s.lastN:]
	}
	for _, id := range history {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("%w: token %d, vocabulary has %d", ErrHistory, id, vocab)
		}
	}
	sc.pen = append(sc.pen, history...)
	sortInt32(sc.pen)
	w := 0
	for i, id := range sc.pen {
		if i == 0 || id != sc.pen[w-1] {
			sc.pen[w] = id
			w++
		}
	}
	sc.pen = sc.pen[:w]
	return nil
}

// penalise applies the CTRL rule to one logit.
func (s *Sampler) penalise(v float32) float32 {
	if v > 0 {
		return v / s.o.RepeatPenalty
	}
	return v * s.o.RepeatPenalty
}

// checkLogit rejects values softmax cannot handle.
func checkLogit(i int, v float32) error {
	if v != v {
		return fmt.Errorf("%w: logit %d is NaN", ErrLogits, i)
	}
	if math.IsInf(float64(v), 1) {
		return fmt.Errorf("%w: logit %d is +Inf", ErrLogits, i)
	}
	return nil
}

// argmax returns the index of the largest penalised logit, the lowest on ties.
// pen is the ascending list of penalised ids. The vocabulary is scanned in
// runs between penalised ids so the inner loop has no per-element penalty test.
func (s *Sampler) argmax(logits []float32, pen []int32) (int32, error) {
	best, bestV, bad := -1, float32(math.Inf(-1)), -1
	lo := 0
	for _, id := range pen {
		if best, bestV, bad = argmaxRange(logits, lo, int(id), best, bestV); bad >= 0 {
			return -1, checkLogit(bad, logits[bad])
		}
		if v := s.penalise(logits[id]); !(v <= bestV) {
			if err := checkLogit(int(id), v); err != nil {
				return -1, err
			}
			best, bestV = int(id), v
		}
		lo = int(id) + 1
	}
	if best, _, bad = argmaxRange(logits, lo, len(logits), best, bestV); bad >= 0 {
		return -1, checkLogit(bad, logits[bad])
	}
	if best < 0 {
		// A NaN or +Inf fails the comparison and is reported above, so
		// nothing beat -Inf only when every logit is -Inf.
		return -1, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, len(logits))
	}
	return int32(best), nil
}

// argmaxRange folds x[lo:hi] into (best, bestV), keeping the first maximum. It
// stops at the first NaN or +Inf and returns its index as bad (else -1).
func argmaxRange(x []float32, lo, hi, best int, bestV float32) (int, float32, int) {
	for i := lo; i < hi; i++ {
		if v := x[i]; !(v <= bestV) {
			if v != v || v > math.MaxFloat32 {
				return best, bestV, i
			}
			best, bestV = i, v
		}
	}
	return best, bestV, -1
}

// Dist turns logits into the sampling distribution. In order: repetition
// penalty, temperature (logits/T), softmax (max-subtracted, float64 sums), top-k,
// top-p with Hugging Face semantics (sort descending, keep the smallest prefix
// whose mass reaches TopP, at least one token; mass measured after top-k),
// min-p (keep p ≥ MinP·p_max), renormalise. Tokens whose probability underflows
// to 0 are left out. With Temperature 0 the result is the argmax alone.
//
// logits is not modified. The result lives in sc (see Scratch). Errors: empty
// logits, a NaN or +Inf logit, all logits -Inf, a history id outside the
// vocabulary.
func (s *Sampler) Dist(logits []float32, history []int32, sc *Scratch) (Dist, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	n := len(logits)
	if n == 0 {
		return Dist{}, ErrEmpty
	}
	if err := s.penalised(history, n, sc); err != nil {
		return Dist{}, err
	}
	if s.o.Temperature == 0 {
		id, err := s.argmax(logits, sc.pen)
		if err != nil {
			return Dist{}, err
		}
		sc.ids = append(sc.ids[:0], id)
		sc.probs = append(sc.probs[:0], 1)
		return Dist{IDs: sc.ids, Probs: sc.probs}, nil
	}

	var cand []Token
	sorted := false
	if k := s.o.TopK; k > 0 && k < n {
		var err error
		if cand, err = s.topKLogits(logits, sc); err != nil {
			return Dist{}, err
		}
		sorted = true
	} else {
		cand = sc.tokens(n)
		for i, v := range logits {
			if v != v || v > math.MaxFloat32 {
				return Dist{}, checkLogit(i, v)
			}
			cand[i] = Token{ID: int32(i), V: v}
		}
		for _, id := range sc.pen {
			cand[id].V = s.penalise(cand[id].V)
		}
	}

	// Temperature and softmax: w = exp((v - max)/T), in float64, stored back as
	// float32 weights (the max has weight exactly 1).
	vmax := float32(math.Inf(-1))
	if sorted {
		vmax = cand[0].V
	} else {
		for _, t := range cand {
			vmax = max(vmax, t.V)
		}
	}
	if math.IsInf(float64(vmax), -1) {
		return Dist{}, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, n)
	}
	invT := 1 / float64(s.o.Temperature)
	m := float64(vmax)
	var total float64
	for i := range cand {
		w := float32(math.Exp((float64(cand[i].V) - m) * invT))
		cand[i].V = w
		total += float64(w)
	}
	if sorted {
		// Distinct logits can round to equal weights; restore the documented
		// order (probability descending, then id). Already almost sorted.
		insertionSort(cand)
	}

	switch {
	case s.topP:
		// Grow a sorted prefix until it holds TopP of the mass: usually a few
		// hundred tokens, so selection beats sorting the whole vocabulary.
		target := float64(s.o.TopP) * total
		done := 0 // cand[:done] is sorted and holds the largest weights
		if sorted {
			done = len(cand)
		}
		var cum float64
		i, keep := 0, 0
		for keep == 0 {
			for ; i < done; i++ {
				cum += float64(cand[i].V)
				if cum >= target {
					keep = i + 1
					break
				}
			}
			switch {
			case keep > 0:
			case done == len(cand):
				keep = len(cand) // rounding kept the sum just short of target
			default:
				done += selectTop(cand[done:], max(64, 3*done))
			}
		}
		cand = cand[:keep]
		sorted = true
		if s.minP {
			cand = cutMinP(cand, s.o.MinP)
		}
	case s.minP:
		if sorted {
			cand = cutMinP(cand, s.o.MinP)
		} else {
			// min-p does not depend on the order, so filter before sorting.
			thr := float64(s.o.MinP) // p_max has weight 1
			w := 0
			for _, t := range cand {
				if float64(t.V) >= thr {
					cand[w] = t
					w++
				}
			}
			cand = cand[:w]
		}
	}
	if !sorted {
		// Zero weights can never be drawn: drop them before sorting.
		w := 0
		for _, t := range cand {
			if t.V > 0 {
				cand[w] = t
				w++
			}
		}
		cand = cand[:w]
		sortByWeight(cand, sc)
	}
	for len(cand) > 1 && cand[len(cand)-1].V == 0 {
		cand = cand[:len(cand)-1]
	}

	var sum float64
	for _, t := range cand {
		sum += float64(t.V)
	}
	sc.ids = sc.ids[:0]
	sc.probs = sc.probs[:0]
	for _, t := range cand {
		sc.ids = append(sc.ids, t.ID)
		sc.probs = append(sc.probs, float32(float64(t.V)/sum))
	}
	// A subnormal weight can still round to probability 0 once divided by
	// the sum; it could never be drawn, so it leaves the distribution too.
	k := len(sc.probs)
	for k > 1 && sc.probs[k-1] == 0 {
		k--
	}
	return Dist{IDs: sc.ids[:k], Probs: sc.probs[:k]}, nil
}

// cutMinP keeps the prefix of the sorted candidates with weight ≥ minP·w_max.
func cutMinP(cand []Token, minP float32) []Token {
	thr := float64(minP) * float64(cand[0].V)
	for i := 1; i < len(cand); i++ {
		if float64(cand[i].V) < thr {
			return cand[:i]
		}
	}
	return cand
}

// topKLogits selects the TopK largest penalised logits with a bounded min-heap in
// one pass over logits, then sorts them descending. Once the heap is full most
// values fail a single comparison against its minimum, so the cost is O(n)
// typically and O(n·log k) at worst; no vocabulary-sized buffer is touched.
// Runs between penalised ids are scanned without a per-element penalty test.
func (s *Sampler) topKLogits(logits []float32, sc *Scratch) ([]Token, error) {
	k := s.o.TopK
	h := sc.tokens(k)[:0]
	lo, bad := 0, -1
	for _, id := range sc.pen {
		if h, bad = topRange(h, k, logits, lo, int(id)); bad >= 0 {
			return nil, checkLogit(bad, logits[bad])
		}
		v := s.penalise(logits[id])
		if err := checkLogit(int(id), v); err != nil {
			return nil, err
		}
		h = pushTop(h, k, Token{ID: id, V: v})
		lo = int(id) + 1
	}
	if h, bad = topRange(h, k, logits, lo, len(logits)); bad >= 0 {
		return nil, checkLogit(bad, logits[bad])
	}
	heapSortDesc(h)
	return h, nil
}

// pushTop offers t to the heap of the k best. Candidates arrive in ascending id
// order, so an equal value never displaces a kept one (lower id wins ties).
func pushTop(h []Token, k int, t Token) []Token {
	if len(h) < k {
		h = append(h, t)
		heapUp(h, len(h)-1)
	} else if t.V > h[0].V {
		h[0] = t
		heapDown(h, 0)
	}
	return h
}

// topRange offers x[lo:hi] to the heap of the k best. It stops at the first
// NaN or +Inf and returns its index as bad (else -1).
func topRange(h []Token, k int, x []float32, lo, hi int) ([]Token, int) {
	i := lo
	for ; i < hi && len(h) < k; i++ {
		v := x[i]
		if v != v || v > math.MaxFloat32 {
			return h, i
		}
		h = append(h, Token{ID: int32(i), V: v})
		heapUp(h, len(h)-1)
	}
	if len(h) == 0 {
		return h, -1
	}
	thr := h[0].V
	for ; i < hi; i++ {
		if v := x[i]; v > thr {
			if v > math.MaxFloat32 {
				return h, i
			}
			h[0] = Token{ID: int32(i), V: v}
			heapDown(h, 0)
			thr = h[0].V
		} else if v != v {
			return h, i
		}
	}
	return h, -1
}

// better is the total order of candidates: larger value first, then lower id.
func better(a, b Token) bool {
	return a.V > b.V || (a.V == b.V && a.ID < b.ID)
}

// selectTop moves the k best of c (by better) to c[:k], sorted, and returns how
// many it moved (min(k, len(c))). It keeps a min-heap of the best so far in
// c[:k] and swaps better candidates in, so it needs no extra memory.
func selectTop(c []Token, k int) int {
	if k >= len(c) {
		sortTokens(c)
		return len(c)
	}
	h := c[:k]
	for i := k / 2; i >= 0; i-- {
		heapDown(h, i)
	}
	for i := k; i < len(c); i++ {
		if better(c[i], h[0]) {
			h[0], c[i] = c[i], h[0]
			heapDown(h, 0)
		}
	}
	heapSortDesc(h)
	return k
}

// The heap below is a min-heap under better: h[0] is the worst kept candidate.

func heapUp(h []Token, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !better(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown(h []Token, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && better(h[l], h[r]) {
			w = r
		}
		if !better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// heapSortDesc turns a min-heap into a slice sorted best first.
func heapSortDesc(h []Token) {
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		heapDown(h[:end], 0)
	}
	// Popping the worst to the end leaves the slice sorted best first.
}

// sortTokens sorts best first (by better: value descending, then id ascending).
func sortTokens(c []Token) { slices.SortFunc(c, compareTokens) }

func compareTokens(a, b Token) int {
	if c := cmp.Compare(b.V, a.V); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func sortInt32(x []int32) { slices.Sort(x) }

// insertionSort sorts best first; linear on almost sorted input.
func insertionSort(c []Token) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && better(c[j], c[j-1]); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// sortByWeight sorts candidates that are in ascending id order and have
// positive weights into the documented order (weight descending, then id).
// Large inputs use a stable LSD radix sort on the weight's bits: for positive
// floats the bit pattern orders like the value, and stability keeps equal
// weights in id order. Four byte-wide passes replace an O(n log n) comparison
// sort, which matters for a 128k vocabulary with no top-k.
func sortByWeight(c []Token, sc *Scratch) {
	if len(c) < 512 {
		sortTokens(c)
		return
	}
	if cap(sc.tmp) < len(c) {
		sc.tmp = make([]Token, len(c))
	}
	src, dst := c, sc.tmp[:len(c)]
	for shift := uint(0); shift < 32; shift += 8 {
		var count [257]int
		for _, t := range src {
			count[1+int(byte(^math.Float32bits(t.V)>>shift))]++
		}
		if count[1+int(byte(^math.Float32bits(src[0].V)>>shift))] == len(src) {
			continue // every key has this byte: the pass would not move anything
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for _, t := range src {
			b := byte(^math.Float32bits(t.V) >> shift)
			dst[count[b]] = t
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &c[0] {
		copy(c, src)
	}
}
