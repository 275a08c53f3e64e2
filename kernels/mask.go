package kernels

// CausalMask fills m for a causal batch in which row i is the token at KV slot
// slots[i] of its sequence: row i sees slots [Lo, Hi) with Hi = slots[i]+1 and
// Lo = max(0, slots[i]-window+1) when window > 0 (a sliding window of window
// slots including its own), else Lo = 0. It reuses m's Lo, Hi and TreeBase
// storage (no allocation once they are large enough) and clears Tree, so a
// tree builder sets Tree and TreeBase after calling it.
func CausalMask(m *Mask, slots []int32, window int) {
	m.Lo = resize(m.Lo, len(slots))
	m.Hi = resize(m.Hi, len(slots))
	m.Tree = nil
	m.TreeBase = m.TreeBase[:0]
	for i, s := range slots {
		m.Hi[i] = s + 1
		m.Lo[i] = 0
		if window > 0 && int64(s)-int64(window)+1 > 0 {
			m.Lo[i] = s - int32(window) + 1
		}
	}
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
