package kernels

import "math"

// attentionGeneric is attentionImpl's contract in plain Go, for F32 and
// F16 pages alike (an F16 element is widened by the exact table lookup as
// it is read, so the two give the same bits for the same widened values).
func attentionGeneric(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	d := s.HeadDim
	f16 := kv.F16()
	var tab *[1 << 16]float32
	if f16 {
		tab = f16Table()
	}
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	inv := float32(0)
	if s.Softcap > 0 {
		inv = 1 / s.Softcap
	}
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		n := 0
		// pg, slot walk the pages alongside j (no division per slot).
		pg, slot := jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				var sc float32
				if f16 {
					sc = dotF16Generic(tab, qh, kv.K16[pg][slot*kvDim+off:slot*kvDim+off+d]) * s.Scale
				} else {
					sc = dotGeneric(qh, kv.K[pg][slot*kvDim+off:slot*kvDim+off+d]) * s.Scale
				}
				if s.Softcap > 0 {
					sc = float32(math.Tanh(float64(sc*inv))) * s.Softcap
				}
				scratch[n] = sc
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
		softmaxGeneric(att)
		n = 0
		pg, slot = jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				a := att[n]
				n++
				if f16 {
					v := kv.V16[pg][slot*kvDim+off : slot*kvDim+off+d]
					for t, vv := range v {
						out[t] += float32(a * tab[vv])
					}
				} else {
					v := kv.V[pg][slot*kvDim+off : slot*kvDim+off+d]
					for t, vv := range v {
						out[t] += float32(a * vv)
					}
				}
			}
			if slot++; slot == pt {
				pg, slot = pg+1, 0
			}
		}
	}
}

// visibleRange is query row i's slot range [lo, hi) and whether its tree mask
// must be consulted slot by slot.
func visibleRange(kv KV, mask *Mask, i int) (lo, hi int, tree bool) {
	lo, hi = 0, kv.Len
	if mask != nil {
		lo = max(lo, int(mask.Lo[i]))
		hi = min(hi, int(mask.Hi[i]))
		tree = mask.Tree != nil
	}
	return lo, hi, tree
}

// dotF16Generic is dotGeneric of a and the widened halves b.
func dotF16Generic(tab *[1 << 16]float32, a []float32, b []uint16) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += float32(v * tab[b[i]])
	}
	return s
}
