package kernels_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// visibility renders which of n slots each row sees, as in ollama's TestSWA:
// 1 visible, 0 hidden.
func visibility(m *kernels.Mask, rows, n int) [][]int {
	out := make([][]int, rows)
	for i := range out {
		out[i] = make([]int, n)
		for j := range out[i] {
			if m.Visible(i, int32(j)) {
				out[i][j] = 1
			}
		}
	}
	return out
}

func TestCausalMask(t *testing.T) {
	tests := []struct {
		name   string
		slots  []int32
		window int
		want   [][]int
	}{
		{"prefill 4", []int32{0, 1, 2, 3}, 0, [][]int{
			{1, 0, 0, 0, 0},
			{1, 1, 0, 0, 0},
			{1, 1, 1, 0, 0},
			{1, 1, 1, 1, 0},
		}},
		{"window 2", []int32{0, 1, 2, 3}, 2, [][]int{
			{1, 0, 0, 0, 0},
			{1, 1, 0, 0, 0},
			{0, 1, 1, 0, 0},
			{0, 0, 1, 1, 0},
		}},
		{"decode after 3 cached, window 3", []int32{3, 4}, 3, [][]int{
			{0, 1, 1, 1, 0},
			{0, 0, 1, 1, 1},
		}},
		{"window 1 sees itself only", []int32{2}, 1, [][]int{
			{0, 0, 1, 0, 0},
		}},
		{"window larger than history", []int32{1}, 100, [][]int{
			{1, 1, 0, 0, 0},
		}},
		{"no rows", nil, 0, [][]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &kernels.Mask{Tree: [][]uint64{{0}}, TreeBase: []int32{0}} // stale tree must be cleared
			kernels.CausalMask(m, tc.slots, tc.window)
			if d := cmp.Diff(tc.want, visibility(m, len(tc.slots), 5)); d != "" {
				t.Fatalf("visibility (-want +got):\n%s", d)
			}
			var rm kernels.Mask
			ref.CausalMask(&rm, tc.slots, tc.window)
			if d := cmp.Diff(rm.Lo, m.Lo); d != "" && len(tc.slots) > 0 {
				t.Errorf("Lo vs ref (-ref +got):\n%s", d)
			}
			if d := cmp.Diff(rm.Hi, m.Hi); d != "" && len(tc.slots) > 0 {
				t.Errorf("Hi vs ref (-ref +got):\n%s", d)
			}
		})
	}
}

func TestCausalMaskReuses(t *testing.T) {
	var m kernels.Mask
	slots := []int32{5, 6, 7, 8}
	kernels.CausalMask(&m, slots, 2)
	if a := testing.AllocsPerRun(10, func() { kernels.CausalMask(&m, slots[:3], 2) }); a != 0 {
		t.Fatalf("CausalMask allocates %v times with enough capacity", a)
	}
	if d := cmp.Diff([]int32{4, 5, 6}, m.Lo); d != "" {
		t.Fatalf("Lo (-want +got):\n%s", d)
	}
}
