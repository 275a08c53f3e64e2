package kernels

func attentionGeneric(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	qDim := s.Heads * d
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	for i := 0; i < rows; i++ {
		lo, hi := 0, kv.Len
		tree := false
		if mask != nil {
			lo = max(lo, int(mask.Lo[i]))
			hi = min(hi, int(mask.Hi[i]))
			tree = mask.Tree != nil
		}
		for h := 0; h < s.Heads; h++ {
			qh := q[i*qDim+h*d : i*qDim+(h+1)*d]
			out := dst[i*qDim+h*d : i*qDim+(h+1)*d]
			off := (h / group) * d
			n := 0
			for j := lo; j < hi; j++ {
				if tree && !mask.Visible(i, int32(j)) {
					continue
				}
				k := kv.K[j/pt][(j%pt)*kvDim+off : (j%pt)*kvDim+off+d]
				scratch[n] = dotGeneric(qh, k) * s.Scale
				n++
			}
			clear(out)
			if n == 0 {
				continue
			}
			att := scratch[:n]
			softmaxGeneric(att)
			n = 0
			for j := lo; j < hi; j++ {
				if tree && !mask.Visible(i, int32(j)) {
					continue
				}
				a := att[n]
				n++
				v := kv.V[j/pt][(j%pt)*kvDim+off : (j%pt)*kvDim+off+d]
				for t, vv := range v {
					out[t] += float32(a * vv)
				}
			}
		}
	}
}
