package kernels

import "testing"

// TestAttnJobBalance: a causal prompt's rows are cut where the parts' visible
// slots (plus attnRowCost a row) are about equal, at whole rows, in order,
// covering every item; too few rows keep the equal item split.
func TestAttnJobBalance(t *testing.T) {
	const heads = 12
	for _, c := range []struct{ rows, past, parts int }{{512, 0, 2}, {512, 0, 3}, {64, 448, 2}, {9, 0, 4}, {7, 0, 4}} {
		slots := make([]int32, c.rows)
		for i := range slots {
			slots[i] = int32(c.past + i)
		}
		m := &Mask{}
		CausalMask(m, slots, 0)
		j := &attnJob{kv: KV{Len: c.past + c.rows}, mask: m, s: AttnShape{Heads: heads}, items: c.rows * heads, parts: c.parts}
		j.balance(c.rows)
		if c.rows < 2*c.parts {
			if len(j.cuts) != 0 {
				t.Fatalf("%+v: cuts %v, want none (the equal split)", c, j.cuts)
			}
			continue
		}
		if len(j.cuts) != c.parts+1 || j.cuts[0] != 0 || j.cuts[c.parts] != j.items {
			t.Fatalf("%+v: cuts %v, want %d bounds from 0 to %d", c, j.cuts, c.parts+1, j.items)
		}
		work := func(a, b int) int { // visible slots + row cost of rows [a, b)
			w := 0
			for i := a; i < b; i++ {
				w += c.past + i + 1 + attnRowCost
			}
			return w
		}
		total := work(0, c.rows)
		for k := range c.parts {
			if j.cuts[k]%heads != 0 || j.cuts[k+1] < j.cuts[k] {
				t.Fatalf("%+v: cuts %v: not whole rows in order", c, j.cuts)
			}
			w := work(j.cuts[k]/heads, j.cuts[k+1]/heads)
			// Within one row's work of an equal share.
			if d := w*c.parts - total; d > (c.past+c.rows+attnRowCost)*c.parts || -d > (c.past+c.rows+attnRowCost)*c.parts {
				t.Fatalf("%+v: part %d has %d of %d (cuts %v), want about %d", c, k, w, total, j.cuts, total/c.parts)
			}
		}
	}
}
