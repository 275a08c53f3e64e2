//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math/bits"

	"simd/archsimd"
)

// The archsimd attention computes every (row, head) item exactly as
// attentionGeneric orders it — scores of the visible slots in ascending order,
// softmax, then out += a_j·v_j over the visible slots in ascending order — with
// vector arithmetic:
//
//   - score j is the matrix kernels' dot (one W-lane FMA chain over the head
//     dimension, a zero-padded last chunk) whose lanes are summed by the fixed
//     halving tree of hsum16/hsum8, times Scale;
//   - the softmax is softmaxSIMD (a polynomial exp, see expF32x16);
//   - the value sum is one FMA per slot and output element, ascending j.
//
// For head dims of at least 32 the items run in tiles (attnTile): the tile
// walks the KV in blocks of 16 slots, loading each K and V row once for all
// its items (the query heads of a GQA group, or several rows of a prefill
// chunk), and sums the lanes of 16 slots' dot chains at once by a transpose
// (two-source permutes and adds) instead of one horizontal sum per slot. The
// transpose adds every slot's lanes in the same halving tree as hsum16/hsum8,
// and the value sum keeps each output element's FMA order, so an item's bits
// depend only on its own q, mask row and the KV: never on which items share
// its tile, on the other rows of the call, or on the thread split. (They are
// even those of the per-item kernel, attentionSIMDItems, which the tests
// check bit for bit.) Below head dim 32 the per-item kernel runs with scalar
// arithmetic: lane reductions cost more than they save on tiny heads
// (measured 1.4× slower on stories260K's d=8).
//
// On AVX-512 with a head dim that is a multiple of 16 the tile's inner loops
// run in assembly instead (attention_asm_amd64.go): the same operations.

func init() {
	addSelector(func(c isaLevel) {
		attentionImpl = attentionGeneric
		attnAsm = c >= isaAVX512 && archsimd.X86.AVX512() && archsimd.X86.FMA()
		if c >= isaAVX2 && archsimd.X86.AVX2() && archsimd.X86.FMA() {
			attentionImpl, archsimdRows = attentionSIMD, true
		}
	})
}

// vecWidth is the float32 lanes of the dot/axpy used for a head dimension d:
// 16 on AVX-512, else 8, for d ≥ 32; 1 (scalar) below.
func vecWidth(d int) int {
	switch {
	case d < 32:
		return 1
	case level == isaAVX512:
		return 16
	}
	return 8
}

// Score storage of a tile: the first item's scores go to the caller's
// scratch (it always fits: a row sees at most kv.Len slots), the others to a
// stack buffer. Two buffer sizes so that a small call (a short decode step)
// does not zero 64 KB of stack on every call.
const (
	attnBufSmall = 2 << 10
	attnBufLarge = 32 << 10
	// attnTileItems bounds the items of one tile.
	attnTileItems = 64
	// attnBlock is the slots a tile scores per pass.
	attnBlock = 16
)

func attentionSIMD(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	width := vecWidth(s.HeadDim)
	if width == 1 || hi <= lo {
		attentionSIMDItems(dst, q, kv, mask, s, scratch, lo, hi, width)
		return
	}
	if (hi-lo-1)*max(kv.Len, 0) <= attnBufSmall {
		attentionTilesSmall(dst, q, kv, mask, s, scratch, lo, hi, width)
	} else {
		attentionTilesLarge(dst, q, kv, mask, s, scratch, lo, hi, width)
	}
}

func attentionTilesSmall(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi, width int) {
	var buf [attnBufSmall]float32
	attentionTiles(dst, q, kv, mask, s, scratch, buf[:], lo, hi, width)
}

func attentionTilesLarge(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi, width int) {
	var buf [attnBufLarge]float32
	attentionTiles(dst, q, kv, mask, s, scratch, buf[:], lo, hi, width)
}

// attnItem is one (row, head) item of a tile.
type attnItem struct {
	it, row  int // item index (row*Heads + head) and query row
	off      int // the KV head's first float in a KV row
	jlo, jhi int // visible slot range
	tree     bool
	sc       []float32 // scores, then weights, of the visible slots (≤ jhi-jlo)
	n        int       // visible slots stored in sc so far
}

// attnTile is one tile's shared state: the call's arguments and the items.
type attnTile struct {
	dst, q []float32
	kv     KV
	mask   *Mask
	s      AttnShape
	kvDim  int
	width  int
	items  [attnTileItems]attnItem
	nItems int
	lo, hi int // union of the items' slot ranges
	acc    [attnBlock][16]float32
	scores [attnBlock]float32
}

// attentionTiles runs the items [lo, hi) in tiles ordered KV head first (so
// the heads of a GQA group, and the rows of a prefill chunk that use one KV
// head, share the K and V rows they read), each tile as many items as their
// scores fit in scratch plus buf.
func attentionTiles(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch, buf []float32, lo, hi, width int) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	// A value, not &attnTile{}: storing the items (which point into buf)
	// through a pointer would move buf to the heap.
	var t attnTile
	t.dst, t.q, t.kv, t.mask, t.s, t.kvDim, t.width = dst, q, kv, mask, s, s.KVHeads*d, width
	usedScratch, usedBuf := 0, 0
	for kvh := 0; kvh < s.KVHeads; kvh++ {
		for i := lo / s.Heads; i*s.Heads < hi; i++ {
			for h := kvh * group; h < (kvh+1)*group; h++ {
				it := i*s.Heads + h
				if it < lo || it >= hi {
					continue
				}
				jlo, jhi, tree := visibleRange(kv, mask, i)
				if jhi <= jlo {
					clear(dst[it*d : (it+1)*d])
					continue
				}
				m := jhi - jlo
				if t.nItems == attnTileItems || (usedScratch+m > len(scratch) && usedBuf+m > len(buf)) {
					t.run()
					usedScratch, usedBuf = 0, 0
				}
				var sc []float32
				if usedScratch+m <= len(scratch) {
					sc = scratch[usedScratch : usedScratch+m]
					usedScratch += m
				} else {
					sc = buf[usedBuf : usedBuf+m]
					usedBuf += m
				}
				t.items[t.nItems] = attnItem{it: it, row: i, off: kvh * d, jlo: jlo, jhi: jhi, tree: tree, sc: sc}
				t.nItems++
			}
		}
	}
	t.run()
}

// run computes the tile's items and empties it.
func (t *attnTile) run() {
	items := t.items[:t.nItems]
	if len(items) == 0 {
		return
	}
	t.lo, t.hi = items[0].jlo, items[0].jhi
	for k := range items {
		t.lo, t.hi = min(t.lo, items[k].jlo), max(t.hi, items[k].jhi)
	}
	if t.useAsm() {
		t.runAsm(items)
		t.nItems = 0
		return
	}
	d := t.s.HeadDim
	// The block's rows are (page, offset) integers: slices stored in an
	// array would cost a write barrier each.
	var rows attnRows
	// Scores, block by block.
	for j0 := t.lo; j0 < t.hi; j0 += attnBlock {
		nb := t.gather(&rows, j0)
		for k := range items {
			it := &items[k]
			a, b := max(it.jlo, j0)-j0, min(it.jhi, j0+nb)-j0
			if a >= b {
				continue
			}
			vis := t.visible(it, j0, a, b)
			if vis == 0 {
				continue
			}
			qh := t.q[it.it*d : (it.it+1)*d]
			if t.width == 16 {
				t.score16(t.kv.K, &rows, qh, it.off, vis)
			} else {
				t.score8(t.kv.K, &rows, qh, it.off, vis)
			}
			if vis == 1<<nb-1 && nb == attnBlock {
				copy(it.sc[it.n:it.n+attnBlock], t.scores[:])
				it.n += attnBlock
				continue
			}
			for v := vis; v != 0; v &= v - 1 {
				it.sc[it.n] = t.scores[bits.TrailingZeros32(v)]
				it.n++
			}
		}
	}
	for k := range items {
		it := &items[k]
		clear(t.dst[it.it*d : (it.it+1)*d])
		if it.n > 0 {
			softmaxSIMD(it.sc[:it.n])
		}
		it.n = 0 // now the read position in the weights
	}
	// Weighted values, block by block.
	for j0 := t.lo; j0 < t.hi; j0 += attnBlock {
		nb := t.gather(&rows, j0)
		for k := range items {
			it := &items[k]
			a, b := max(it.jlo, j0)-j0, min(it.jhi, j0+nb)-j0
			if a >= b {
				continue
			}
			vis := t.visible(it, j0, a, b)
			if vis == 0 {
				continue
			}
			cnt := bits.OnesCount32(vis)
			out := t.dst[it.it*d : (it.it+1)*d]
			w := it.sc[it.n : it.n+cnt]
			it.n += cnt
			if t.width == 16 {
				axpyRows16(out, w, t.kv.V, &rows, vis, it.off)
			} else {
				axpyRows8(out, w, t.kv.V, &rows, vis, it.off)
			}
		}
	}
	t.nItems = 0
}

// attnRows locates a block's KV rows: slot k's row starts at float base[k]
// of page pg[k] (of K and of V alike).
type attnRows struct {
	pg, base [attnBlock]int
}

// row is block slot k's head at off, d floats, in pages.
func (r *attnRows) row(pages [][]float32, k, off, d int) []float32 {
	b := r.base[k] + off
	return pages[r.pg[k]][b : b+d]
}

// gather locates the KV rows of slots j0.. of the tile's range, at most
// attnBlock of them, and returns how many.
func (t *attnTile) gather(rows *attnRows, j0 int) int {
	nb := min(attnBlock, t.hi-j0)
	pt := t.kv.PageTokens
	pg, slot := j0/pt, j0%pt
	for k := 0; k < nb; k++ {
		rows.pg[k], rows.base[k] = pg, slot*t.kvDim
		if slot++; slot == pt {
			pg, slot = pg+1, 0
		}
	}
	return nb
}

// visible is the bit set of block slots a ≤ k < b (slot j0+k) that it sees.
func (t *attnTile) visible(it *attnItem, j0, a, b int) uint32 {
	vis := uint32(1)<<b - uint32(1)<<a
	if !it.tree {
		return vis
	}
	for k := a; k < b; k++ {
		if !t.mask.Visible(it.row, int32(j0+k)) {
			vis &^= 1 << k
		}
	}
	return vis
}

// score16 sets t.scores[k] = Scale·(qh · K_k[off:]) for the block slots k in vis
// (the others hold garbage), AVX-512.
func (t *attnTile) score16(pages [][]float32, rows *attnRows, qh []float32, off int, vis uint32) {
	d := len(qh)
	if d == 64 {
		t.score16x64(pages, rows, qh, off, vis)
		return
	}
	full := d &^ 15
	var qt archsimd.Float32x16
	if full < d {
		qt = loadPart16(qh[full:])
	}
	for v := vis; v != 0; v &= v - 1 {
		k := bits.TrailingZeros32(v)
		kr := rows.row(pages, k, off, d)
		acc := archsimd.BroadcastFloat32x16(0)
		for c := 0; c < full; c += 16 {
			acc = archsimd.LoadFloat32x16Slice(qh[c:c+16]).MulAdd(archsimd.LoadFloat32x16Slice(kr[c:c+16]), acc)
		}
		if full < d {
			acc = qt.MulAdd(loadPart16(kr[full:]), acc)
		}
		acc.Store(&t.acc[k])
	}
	sum16x16(&t.acc).Mul(archsimd.BroadcastFloat32x16(t.s.Scale)).Store(&t.scores)
}

// score16x64 is score16 for d = 64 with q held in registers: the same FMA
// chain per slot.
func (t *attnTile) score16x64(pages [][]float32, rows *attnRows, qh []float32, off int, vis uint32) {
	qh = qh[:64]
	q0 := archsimd.LoadFloat32x16Slice(qh[0:16])
	q1 := archsimd.LoadFloat32x16Slice(qh[16:32])
	q2 := archsimd.LoadFloat32x16Slice(qh[32:48])
	q3 := archsimd.LoadFloat32x16Slice(qh[48:64])
	zero := archsimd.BroadcastFloat32x16(0)
	for v := vis; v != 0; v &= v - 1 {
		k := bits.TrailingZeros32(v)
		kr := rows.row(pages, k, off, 64)
		acc := q0.MulAdd(archsimd.LoadFloat32x16Slice(kr[0:16]), zero)
		acc = q1.MulAdd(archsimd.LoadFloat32x16Slice(kr[16:32]), acc)
		acc = q2.MulAdd(archsimd.LoadFloat32x16Slice(kr[32:48]), acc)
		acc = q3.MulAdd(archsimd.LoadFloat32x16Slice(kr[48:64]), acc)
		acc.Store(&t.acc[k])
	}
	sum16x16(&t.acc).Mul(archsimd.BroadcastFloat32x16(t.s.Scale)).Store(&t.scores)
}

// score8 is score16 on 8 lanes (AVX2): two transposes of 8 slots.
func (t *attnTile) score8(pages [][]float32, rows *attnRows, qh []float32, off int, vis uint32) {
	d := len(qh)
	full := d &^ 7
	var qt archsimd.Float32x8
	if full < d {
		qt = loadPart8(qh[full:])
	}
	for v := vis; v != 0; v &= v - 1 {
		k := bits.TrailingZeros32(v)
		kr := rows.row(pages, k, off, d)
		acc := archsimd.BroadcastFloat32x8(0)
		for c := 0; c < full; c += 8 {
			acc = archsimd.LoadFloat32x8Slice(qh[c:c+8]).MulAdd(archsimd.LoadFloat32x8Slice(kr[c:c+8]), acc)
		}
		if full < d {
			acc = qt.MulAdd(loadPart8(kr[full:]), acc)
		}
		acc.Store((*[8]float32)(t.acc[k][:8]))
	}
	sc := archsimd.BroadcastFloat32x8(t.s.Scale)
	sum8x8(&t.acc, 0).Mul(sc).Store((*[8]float32)(t.scores[:8]))
	if vis>>8 != 0 {
		sum8x8(&t.acc, 8).Mul(sc).Store((*[8]float32)(t.scores[8:]))
	}
}

// Permutation indices of sum16x16's transpose: level L pairs the vectors x, y
// (x's lanes are 0–15, y's 16–31), taking the lower halves of each slot's
// partial sums into one vector and the upper halves into the other.
var (
	tr1Lo = [16]uint32{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}
	tr1Hi = [16]uint32{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}
	tr2Lo = [16]uint32{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}
	tr2Hi = [16]uint32{4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}
	tr3Lo = [16]uint32{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29}
	tr3Hi = [16]uint32{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31}
	tr4Lo = [16]uint32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
	tr4Hi = [16]uint32{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
)

// sum16x16 returns the vector whose lane k is the sum of acc[k]'s 16 lanes,
// added in hsum16's tree: p_i = l_i + l_{i+8}, q_i = p_i + p_{i+4}, then
// (q_0 + q_2) + (q_1 + q_3). Level L of the transpose holds 2^L partial sums
// of each of 16/2^(L-1)… slots per vector; a slot's lanes never mix with
// another slot's, so garbage in unused rows of acc stays in their lanes.
func sum16x16(acc *[attnBlock][16]float32) archsimd.Float32x16 {
	pair := func(x, y archsimd.Float32x16, lo, hi *[16]uint32) archsimd.Float32x16 {
		return x.ConcatPermute(y, archsimd.LoadUint32x16(lo)).Add(x.ConcatPermute(y, archsimd.LoadUint32x16(hi)))
	}
	var l1 [8]archsimd.Float32x16
	for p := range l1 {
		l1[p] = pair(archsimd.LoadFloat32x16(&acc[2*p]), archsimd.LoadFloat32x16(&acc[2*p+1]), &tr1Lo, &tr1Hi)
	}
	l2a := pair(l1[0], l1[1], &tr2Lo, &tr2Hi)
	l2b := pair(l1[2], l1[3], &tr2Lo, &tr2Hi)
	l2c := pair(l1[4], l1[5], &tr2Lo, &tr2Hi)
	l2d := pair(l1[6], l1[7], &tr2Lo, &tr2Hi)
	l3a := pair(l2a, l2b, &tr3Lo, &tr3Hi)
	l3b := pair(l2c, l2d, &tr3Lo, &tr3Hi)
	return pair(l3a, l3b, &tr4Lo, &tr4Hi)
}

// tr8Order undoes sum8x8's slot order (0, 2, 4, 6 | 1, 3, 5, 7).
var tr8Order = [8]uint32{0, 4, 1, 5, 2, 6, 3, 7}

// sum8x8 returns the vector whose lane k is the sum of the first 8 lanes of
// acc[base+k], added in hsum8's tree: p_i = l_i + l_{i+4}, then
// (p_0 + p_2) + (p_1 + p_3).
func sum8x8(acc *[attnBlock][16]float32, base int) archsimd.Float32x8 {
	ld := func(k int) archsimd.Float32x8 { return archsimd.LoadFloat32x8((*[8]float32)(acc[base+k][:8])) }
	// Level 1: [x.lo, y.lo] + [x.hi, y.hi]: slot x's p in the low 128 bits.
	pair := func(x, y archsimd.Float32x8) archsimd.Float32x8 {
		return x.Select128FromPair(0, 2, y).Add(x.Select128FromPair(1, 3, y))
	}
	a, b, c, e := pair(ld(0), ld(1)), pair(ld(2), ld(3)), pair(ld(4), ld(5)), pair(ld(6), ld(7))
	// Level 2, per 128-bit half: (p0, p1 | of x and y) + (p2, p3 | …).
	ab := a.SelectFromPairGrouped(0, 1, 4, 5, b).Add(a.SelectFromPairGrouped(2, 3, 6, 7, b))
	ce := c.SelectFromPairGrouped(0, 1, 4, 5, e).Add(c.SelectFromPairGrouped(2, 3, 6, 7, e))
	// Level 3: (p0+p2) + (p1+p3); lanes then hold slots 0, 2, 4, 6 | 1, 3, 5, 7.
	s := ab.SelectFromPairGrouped(0, 2, 4, 6, ce).Add(ab.SelectFromPairGrouped(1, 3, 5, 7, ce))
	return s.Permute(archsimd.LoadUint32x8(&tr8Order))
}

// axpyRows16 is: for the n-th block slot k in vis (ascending), out[t] +=
// w[n]·V_k[off+t] for every t, one FMA per element, each output vector
// loaded and stored once (AVX-512).
func axpyRows16(out, w []float32, pages [][]float32, rows *attnRows, vis uint32, off int) {
	d := len(out)
	if d == 64 {
		// The output in registers across the rows: the same FMA per element.
		out = out[:64]
		o0 := archsimd.LoadFloat32x16Slice(out[0:16])
		o1 := archsimd.LoadFloat32x16Slice(out[16:32])
		o2 := archsimd.LoadFloat32x16Slice(out[32:48])
		o3 := archsimd.LoadFloat32x16Slice(out[48:64])
		n := 0
		for v := vis; v != 0; v &= v - 1 {
			r := rows.row(pages, bits.TrailingZeros32(v), off, 64)
			wv := archsimd.BroadcastFloat32x16(w[n])
			n++
			o0 = wv.MulAdd(archsimd.LoadFloat32x16Slice(r[0:16]), o0)
			o1 = wv.MulAdd(archsimd.LoadFloat32x16Slice(r[16:32]), o1)
			o2 = wv.MulAdd(archsimd.LoadFloat32x16Slice(r[32:48]), o2)
			o3 = wv.MulAdd(archsimd.LoadFloat32x16Slice(r[48:64]), o3)
		}
		o0.StoreSlice(out[0:16])
		o1.StoreSlice(out[16:32])
		o2.StoreSlice(out[32:48])
		o3.StoreSlice(out[48:64])
		return
	}
	c := 0
	for ; c+16 <= d; c += 16 {
		o := archsimd.LoadFloat32x16Slice(out[c : c+16])
		n := 0
		for v := vis; v != 0; v &= v - 1 {
			r := rows.row(pages, bits.TrailingZeros32(v), off, d)
			o = archsimd.BroadcastFloat32x16(w[n]).MulAdd(archsimd.LoadFloat32x16Slice(r[c:c+16]), o)
			n++
		}
		o.StoreSlice(out[c : c+16])
	}
	if c < d {
		o := loadPart16(out[c:])
		n := 0
		for v := vis; v != 0; v &= v - 1 {
			r := rows.row(pages, bits.TrailingZeros32(v), off, d)
			o = archsimd.BroadcastFloat32x16(w[n]).MulAdd(loadPart16(r[c:d]), o)
			n++
		}
		storePart16(o, out[c:])
	}
}

// axpyRows8 is axpyRows16 on 8 lanes (AVX2).
func axpyRows8(out, w []float32, pages [][]float32, rows *attnRows, vis uint32, off int) {
	d := len(out)
	c := 0
	for ; c+8 <= d; c += 8 {
		o := archsimd.LoadFloat32x8Slice(out[c : c+8])
		n := 0
		for v := vis; v != 0; v &= v - 1 {
			r := rows.row(pages, bits.TrailingZeros32(v), off, d)
			o = archsimd.BroadcastFloat32x8(w[n]).MulAdd(archsimd.LoadFloat32x8Slice(r[c:c+8]), o)
			n++
		}
		o.StoreSlice(out[c : c+8])
	}
	if c < d {
		o := loadPart8(out[c:])
		n := 0
		for v := vis; v != 0; v &= v - 1 {
			r := rows.row(pages, bits.TrailingZeros32(v), off, d)
			o = archsimd.BroadcastFloat32x8(w[n]).MulAdd(loadPart8(r[c:d]), o)
			n++
		}
		storePart8(o, out[c:])
	}
}

func dotF32SIMD(width int, a, b []float32) float32 {
	switch width {
	case 16:
		return dotF32x16(a, b)
	case 8:
		return dotF32x8(a, b)
	}
	return dotGeneric(a, b)
}

// axpyF32SIMD is: for t, v := range x { y[t] += a * v } (fused multiply-add
// for width > 1).
func axpyF32SIMD(width int, y []float32, a float32, x []float32) {
	y = y[:len(x)]
	j := 0
	if width == 1 {
		for t, v := range x {
			y[t] += float32(a * v)
		}
		return
	}
	if width == 16 {
		av := archsimd.BroadcastFloat32x16(a)
		for ; j+16 <= len(x); j += 16 {
			av.MulAdd(archsimd.LoadFloat32x16Slice(x[j:j+16]), archsimd.LoadFloat32x16Slice(y[j:j+16])).StoreSlice(y[j : j+16])
		}
		if j < len(x) {
			storePart16(av.MulAdd(loadPart16(x[j:]), loadPart16(y[j:])), y[j:])
		}
		return
	}
	av := archsimd.BroadcastFloat32x8(a)
	for ; j+8 <= len(x); j += 8 {
		av.MulAdd(archsimd.LoadFloat32x8Slice(x[j:j+8]), archsimd.LoadFloat32x8Slice(y[j:j+8])).StoreSlice(y[j : j+8])
	}
	if j < len(x) {
		storePart8(av.MulAdd(loadPart8(x[j:]), loadPart8(y[j:])), y[j:])
	}
}

// attentionSIMDItems is the per-item kernel: attentionGeneric with the dot
// and the value sum of the given width, one item after another. It runs head
// dims below 32 (width 1) and is the tiled kernel's bit-for-bit reference in
// the tests.
func attentionSIMDItems(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi, width int) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		n := 0
		pg, slot := jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				scratch[n] = dotF32SIMD(width, qh, kv.K[pg][slot*kvDim+off:slot*kvDim+off+d]) * s.Scale
				n++
			}
			if slot++; slot == pt {
				pg, slot = pg+1, 0
			}
		}
		clear(out)
		if n == 0 {
			continue
		}
		att := scratch[:n]
		softmaxSIMD(att)
		n = 0
		pg, slot = jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				axpyF32SIMD(width, out, att[n], kv.V[pg][slot*kvDim+off:slot*kvDim+off+d])
				n++
			}
			if slot++; slot == pt {
				pg, slot = pg+1, 0
			}
		}
	}
}
