package input

import (
	"slices"
	"testing"
)

func TestAddChild(t *testing.T) {
	var b Batch
	b.Add(7, 0, 0, false)
	b.Add(8, 1, 0, true)
	if b.ParentSlot != nil {
		t.Fatalf("plain rows allocated ParentSlot %v", b.ParentSlot)
	}
	b.AddChild(9, 2, 0, -1, 1, true) // child of slot 1 of an earlier pass
	b.AddChild(10, 3, 0, 2, -1, false)
	b.Add(11, 0, 1, false)
	want := Batch{
		Tokens:     []int32{7, 8, 9, 10, 11},
		Positions:  []int32{0, 1, 2, 3, 0},
		Seq:        []int32{0, 0, 0, 0, 1},
		Parent:     []int32{-1, -1, -1, 2, -1},
		ParentSlot: []int32{-1, -1, 1, -1, -1},
		Outputs:    []int32{1, 2},
	}
	for _, f := range []struct {
		name      string
		got, want []int32
	}{
		{"Tokens", b.Tokens, want.Tokens}, {"Positions", b.Positions, want.Positions}, {"Seq", b.Seq, want.Seq},
		{"Parent", b.Parent, want.Parent}, {"ParentSlot", b.ParentSlot, want.ParentSlot}, {"Outputs", b.Outputs, want.Outputs},
	} {
		if !slices.Equal(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	b.Reset()
	if b.Len() != 0 || len(b.ParentSlot) != 0 || b.ParentSlot == nil {
		t.Fatalf("Reset: %d rows, ParentSlot %v (want empty, capacity kept)", b.Len(), b.ParentSlot)
	}
	b.Add(1, 0, 0, false)
	if !slices.Equal(b.ParentSlot, []int32{-1}) {
		t.Errorf("Add after Reset: ParentSlot %v, want [-1]", b.ParentSlot)
	}
}
