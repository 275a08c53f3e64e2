package sample

import (
	"cmp"
	"math"
	"slices"
)

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

func heapUp(h []Token, i int)   { HeapUp(h, i, better) }
func heapDown(h []Token, i int) { HeapDown(h, i, better) }

// HeapUp and HeapDown keep a bounded "n best" heap: a min-heap under
// better (a strict total order: a ranks before b), so h[0] is the worst item
// kept and a newcomer need only beat it. HeapUp restores the heap after an
// append at i; HeapDown after h[i] was replaced. The sampler's top-k and beam
// search's candidates (package spec) keep their best this way.
func HeapUp[T any](h []T, i int, better func(a, b T) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !better(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// HeapDown: see HeapUp.
func HeapDown[T any](h []T, i int, better func(a, b T) bool) {
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
