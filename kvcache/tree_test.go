package kvcache

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/model/input"
)

// growTree grows a draft tree over three passes on sequence 0 of c, writing
// tag = slot·10 (history) or 100+slot (tree nodes) as each slot's K/V, and
// returns the masks (as visibility strings over slots 0..9) and Tree bits of
// passes 2 and 3:
//
//	pass 1: prompt slots 0, 1 and the root, slot 2
//	pass 2: a (slot 3) and b (slot 4), children of the root by ParentSlot 2;
//	        c (slot 5), child of a by Parent row 0
//	pass 3: d (slot 6) child of b and e (slot 7) child of c, by ParentSlot;
//	        f (slot 8) child of d by Parent row 0; g (slot 9) child of the root
//
//	root 2 ─┬─ a 3 ── c 5 ── e 7
//	        ├─ b 4 ── d 6 ── f 8
//	        └─ g 9
func growTree(t *testing.T, c *Cache) (masks [2][]string, bits [2][][]uint64) {
	t.Helper()
	ctx := t.Context()
	p, err := c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	putTags(t, c, p, []int{0, 10, 20})
	must(t, p.End())

	b := &input.Batch{}
	b.AddChild(3, 3, 0, -1, 2, true) // a: depth 1, position 3
	b.AddChild(4, 3, 0, -1, 2, true) // b
	b.AddChild(5, 4, 0, 0, -1, true) // c under a
	p, err = c.Begin(ctx, b)
	must(t, err)
	if diff := cmp.Diff([]int32{3, 4, 5}, p.Slots()); diff != "" {
		t.Fatalf("pass 2 slots (-want +got):\n%s", diff)
	}
	putTags(t, c, p, []int{103, 104, 105})
	masks[0], bits[0] = visibility(p.Mask(), 3, 10), slices.Clone(p.Mask().Tree)
	must(t, p.End())

	b.Reset()
	b.AddChild(6, 4, 0, -1, 4, true) // d under b
	b.AddChild(7, 5, 0, -1, 5, true) // e under c
	b.AddChild(8, 5, 0, 0, -1, true) // f under d
	b.AddChild(9, 3, 0, -1, 2, true) // g under the root
	p, err = c.Begin(ctx, b)
	must(t, err)
	if diff := cmp.Diff([]int32{6, 7, 8, 9}, p.Slots()); diff != "" {
		t.Fatalf("pass 3 slots (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{3, 3, 3, 3}, p.Mask().TreeBase); diff != "" {
		t.Errorf("pass 3 TreeBase (-want +got):\n%s", diff)
	}
	putTags(t, c, p, []int{106, 107, 108, 109})
	masks[1], bits[1] = visibility(p.Mask(), 4, 10), slices.Clone(p.Mask().Tree)
	must(t, p.End())
	checkInvariants(t, c)
	return masks, bits
}

func TestMaskTreeAcrossPasses(t *testing.T) {
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	masks, bits := growTree(t, c)
	// Slots:       0123456789
	want2 := []string{
		"xxxx......", // a: history, itself
		"xxx.x.....", // b: history, itself (not its sibling a)
		"xxxx.x....", // c: a, itself
	}
	if diff := cmp.Diff(want2, masks[0]); diff != "" {
		t.Errorf("pass 2 visibility (-want +got):\n%s", diff)
	}
	// Bits from TreeBase 3: bit j is slot 3+j.
	if diff := cmp.Diff([][]uint64{{0b001}, {0b010}, {0b101}}, bits[0]); diff != "" {
		t.Errorf("pass 2 Tree bits (-want +got):\n%s", diff)
	}
	want3 := []string{
		"xxx.x.x...", // d: b (pass 2), itself
		"xxxx.x.x..", // e: a, c (pass 2), itself
		"xxx.x.x.x.", // f: b (pass 2), d (this pass), itself
		"xxx......x", // g: only the history
	}
	if diff := cmp.Diff(want3, masks[1]); diff != "" {
		t.Errorf("pass 3 visibility (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]uint64{{0b0001010}, {0b0010101}, {0b0101010}, {0b1000000}}, bits[1]); diff != "" {
		t.Errorf("pass 3 Tree bits (-want +got):\n%s", diff)
	}
}

func TestMaskTreeAcrossPassesWindow(t *testing.T) {
	// Window 3 is measured along each node's chain: root 2 has position 2,
	// a, b, g position 3, c, d position 4, e, f position 5.
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64, Window: 3})
	masks, _ := growTree(t, c)
	// Slots:       0123456789
	want2 := []string{
		".xxx......", // a (3): 1, 2, itself
		".xx.x.....", // b (3): 1, 2, itself
		"..xx.x....", // c (4): 2, a, itself
	}
	if diff := cmp.Diff(want2, masks[0]); diff != "" {
		t.Errorf("pass 2 visibility (-want +got):\n%s", diff)
	}
	want3 := []string{
		"..x.x.x...", // d (4): root, b, itself
		"...x.x.x..", // e (5): a, c, itself; the root fell out
		"....x.x.x.", // f (5): b, d, itself
		".xx......x", // g (3): 1, root, itself
	}
	if diff := cmp.Diff(want3, masks[1]); diff != "" {
		t.Errorf("pass 3 visibility (-want +got):\n%s", diff)
	}
}

func TestCommitPath(t *testing.T) {
	tests := []struct {
		name string
		path []int32
		want []int // history after the commit, tag per slot
	}{
		{"b d f", []int32{4, 6, 8}, []int{0, 10, 20, 104, 106, 108}},
		{"a c e", []int32{3, 5, 7}, []int{0, 10, 20, 103, 105, 107}},
		{"g", []int32{9}, []int{0, 10, 20, 109}},
		{"b", []int32{4}, []int{0, 10, 20, 104}},
		{"empty", nil, []int{0, 10, 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 32})
			growTree(t, c)
			must(t, c.CommitPath(0, tc.path))
			// seqTags checks every row of every layer is exactly the K and V
			// written for its tag.
			if diff := cmp.Diff(tc.want, seqTags(t, c, 0)); diff != "" {
				t.Fatalf("history (-want +got):\n%s", diff)
			}
			if n := int(c.Len(0)); n != len(tc.want) {
				t.Errorf("Len = %d, want %d", n, len(tc.want))
			}
			if st := c.Stats(); st.PagesInUse != (len(tc.want)+1)/2 {
				t.Errorf("%d tokens in 2-token pages: %+v", len(tc.want), st)
			}
			checkInvariants(t, c)
			if err := c.CommitPath(0, nil); !errors.Is(err, ErrCommit) {
				t.Errorf("second CommitPath = %v, want ErrCommit (the tree is closed)", err)
			}
			// The next row is plain causal text right after the path.
			p, err := c.Begin(t.Context(), linear(0, len(tc.want), 1))
			must(t, err)
			defer p.Abort()
			if p.Slots()[0] != int32(len(tc.want)) || p.Mask().Tree != nil {
				t.Errorf("next pass: slot %d, tree %v; want slot %d, no tree", p.Slots()[0], p.Mask().Tree, len(tc.want))
			}
		})
	}
}

// A committed path's K/V move while a fork holds the pages: the fork keeps
// the whole tree (its own copy of the tree state) and can commit another path.
func TestCommitPathFork(t *testing.T) {
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 64})
	growTree(t, c)
	must(t, c.Fork(0, 1, 10))
	must(t, c.CommitPath(0, []int32{4, 6, 8}))
	if diff := cmp.Diff([]int{0, 10, 20, 104, 106, 108}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 10, 20, 103, 104, 105, 106, 107, 108, 109}, seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)
	// The fork's tree is intact and independent.
	must(t, c.CommitPath(1, []int32{3, 5, 7}))
	if diff := cmp.Diff([]int{0, 10, 20, 103, 105, 107}, seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork committed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 10, 20, 104, 106, 108}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("source after the fork's commit (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)

	// A fork that ends inside the tree gets the tree below its length; one at
	// or below the tree's first slot gets none.
	c2 := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	growTree(t, c2)
	must(t, c2.Fork(0, 1, 6))
	must(t, c2.Fork(0, 2, 3))
	if err := c2.CommitPath(1, []int32{4, 6}); !errors.Is(err, ErrCommit) {
		t.Errorf("fork of 6 tokens: CommitPath through slot 6 = %v, want ErrCommit", err)
	}
	must(t, c2.CommitPath(1, []int32{3, 5}))
	if diff := cmp.Diff([]int{0, 10, 20, 103, 105}, seqTags(t, c2, 1)); diff != "" {
		t.Errorf("short fork committed (-want +got):\n%s", diff)
	}
	if err := c2.CommitPath(2, nil); !errors.Is(err, ErrCommit) {
		t.Errorf("fork below the tree: CommitPath = %v, want ErrCommit (no tree)", err)
	}
	checkInvariants(t, c2)
}

func TestCommitPathErrFullAtomic(t *testing.T) {
	// 7 pages of 2 tokens: the tree's sequence holds 5, a fork shares them
	// all, another sequence holds 1, and the commit must copy the shared
	// destination pages 1 and 2 (slots 3..5): 2 > 1 free.
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 14})
	growTree(t, c)
	must(t, c.Fork(0, 1, 10))
	p, err := c.Begin(t.Context(), linear(2, 0, 1))
	must(t, err)
	must(t, p.End())
	before := c.Stats()
	if err := c.CommitPath(0, []int32{4, 6, 8}); !errors.Is(err, ErrFull) {
		t.Fatalf("CommitPath = %v, want ErrFull", err)
	}
	if got := c.Stats(); got != before {
		t.Errorf("failed CommitPath changed Stats %+v → %+v", before, got)
	}
	if diff := cmp.Diff([]int{0, 10, 20, 103, 104, 105, 106, 107, 108, 109}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("failed CommitPath changed the history (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)
	c.Free(2)
	must(t, c.CommitPath(0, []int32{4, 6, 8}))
	if diff := cmp.Diff([]int{0, 10, 20, 104, 106, 108}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("after freeing a page (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)
}

func TestTruncateTree(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	growTree(t, c)
	must(t, c.Truncate(0, 7)) // keeps a, b, c, d
	if err := c.CommitPath(0, []int32{3, 5, 7}); !errors.Is(err, ErrCommit) {
		t.Errorf("CommitPath through a truncated slot = %v, want ErrCommit", err)
	}
	// The trimmed tree grows on: e' under c again lands in slot 7.
	b := &input.Batch{}
	b.AddChild(7, 5, 0, -1, 5, true)
	p, err := c.Begin(t.Context(), b)
	must(t, err)
	if diff := cmp.Diff([]string{"xxxx.x.x"}, visibility(p.Mask(), 1, 8)); diff != "" {
		t.Errorf("after Truncate (-want +got):\n%s", diff)
	}
	putTags(t, c, p, []int{207})
	must(t, p.End())
	must(t, c.CommitPath(0, []int32{3, 5, 7}))
	if diff := cmp.Diff([]int{0, 10, 20, 103, 105, 207}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}

	// Truncating to the tree's first slot closes it: plain rows work again.
	growTreeAgain := func() {
		must(t, c.Truncate(0, 3))
		b.Reset()
		b.AddChild(3, 3, 0, -1, 2, true)
		p, err := c.Begin(t.Context(), b)
		must(t, err)
		putTags(t, c, p, []int{103})
		must(t, p.End())
	}
	growTreeAgain()
	if _, err := c.Begin(t.Context(), linear(0, 4, 1)); !errors.Is(err, ErrBatch) {
		t.Fatalf("plain row in an open tree = %v, want ErrBatch", err)
	}
	must(t, c.Truncate(0, 3))
	p, err = c.Begin(t.Context(), linear(0, 3, 1))
	must(t, err)
	if p.Mask().Tree != nil {
		t.Errorf("plain row after closing the tree has Tree rows")
	}
	p.Abort()
	checkInvariants(t, c)
}

func TestTreeErrors(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	growTree(t, c) // sequence 0: history 0..2, tree slots 3..9
	p, err := c.Begin(ctx, linear(1, 0, 3))
	must(t, err)
	must(t, p.End()) // sequence 1: 3 plain slots, no tree

	child := func(seq, parentRow, parentSlot int32) *input.Batch {
		b := &input.Batch{}
		b.AddChild(1, 0, seq, parentRow, parentSlot, false)
		return b
	}
	tests := []struct {
		name string
		b    *input.Batch
		msg  []string // substrings the error must contain
	}{
		{"slot at Len", child(0, -1, 10), []string{"row 0", "ParentSlot 10", "want 2..9"}},
		{"slot below the root", child(0, -1, 1), []string{"row 0", "ParentSlot 1", "want 2..9"}},
		{"no tree: not the tail", child(1, -1, 1), []string{"row 0", "ParentSlot 1", "want 2", "no open draft tree"}},
		{"no tree: past the tail", child(1, -1, 3), []string{"ParentSlot 3", "want 2"}},
		{"empty sequence", child(5, -1, 0), []string{"row 0", "ParentSlot 0", "no slots"}},
		{"below -1", child(0, -1, -2), []string{"row 0", "ParentSlot -2"}},
		{"plain row in an open tree", linear(0, 10, 1), []string{"row 0", "slot 10", "no parent", "from 3"}},
		{"plain row after a branch", func() *input.Batch {
			b := linear(1, 3, 2) // slots 3, 4
			b.AddChild(1, 4, 1, 0, -1, false)
			return b // row 2 (slot 5) branches from row 0: the tree starts at 4, row 1 has no parent
		}(), []string{"row 1", "slot 4", "no parent", "from 4"}},
		{"plain row before a parent slot", func() *input.Batch {
			b := linear(1, 3, 1)
			b.AddChild(1, 3, 1, -1, 2, false)
			return b
		}(), []string{"row 0", "slot 3", "no parent", "from 3"}},
		{"both parents", func() *input.Batch {
			b := child(0, -1, 4)
			b.AddChild(1, 0, 0, 0, 4, false)
			return b
		}(), []string{"row 1", "both"}},
		{"short ParentSlot", func() *input.Batch {
			b := child(0, -1, 4)
			b.Add(1, 0, 0, false)
			b.ParentSlot = b.ParentSlot[:1]
			return b
		}(), []string{"2 rows", "1 in ParentSlot"}},
		{"short Positions", func() *input.Batch {
			b := linear(1, 3, 2)
			b.Positions = b.Positions[:1]
			return b
		}(), []string{"2 rows", "1 in Positions"}},
	}
	before := c.Stats()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Begin(ctx, tc.b)
			if !errors.Is(err, ErrBatch) {
				t.Fatalf("Begin = %v, want ErrBatch", err)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if got := c.Stats(); got != before {
				t.Errorf("failed Begin changed Stats %+v → %+v", before, got)
			}
		})
	}

	paths := []struct {
		name string
		seq  int32
		path []int32
		msg  []string
	}{
		{"unknown sequence", 7, nil, []string{"sequence 7", "no state"}},
		{"no tree", 1, nil, []string{"sequence 1", "no open draft tree"}},
		{"history slot", 0, []int32{2}, []string{"path[0] = slot 2", "tree slots 3..9"}},
		{"past Len", 0, []int32{4, 10}, []string{"path[1] = slot 10", "tree slots 3..9"}},
		{"not a root child", 0, []int32{6}, []string{"path[0] = slot 6", "parent slot 4", "root, slot 2"}},
		{"broken chain", 0, []int32{4, 5}, []string{"path[1] = slot 5", "parent slot 3", "path[0] = slot 4"}},
		{"out of order", 0, []int32{6, 4}, []string{"path[0] = slot 6"}},
		{"repeated", 0, []int32{4, 4}, []string{"path[1] = slot 4", "parent slot 2"}},
	}
	for _, tc := range paths {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CommitPath(tc.seq, tc.path)
			if !errors.Is(err, ErrCommit) {
				t.Fatalf("CommitPath = %v, want ErrCommit", err)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if got := c.Stats(); got != before {
				t.Errorf("failed CommitPath changed Stats %+v → %+v", before, got)
			}
		})
	}
	// Commit of the last pass's rows cannot keep a tree begun earlier.
	if err := c.Commit(0, []int32{0}); !errors.Is(err, ErrCommit) || !strings.Contains(err.Error(), "CommitPath") {
		t.Errorf("Commit of a multi-pass tree = %v, want ErrCommit pointing at CommitPath", err)
	}
	// A sequence with a pass in flight is busy.
	b := child(0, -1, 9)
	p, err = c.Begin(ctx, b)
	must(t, err)
	if err := c.CommitPath(0, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("CommitPath during a pass = %v, want ErrBusy", err)
	}
	p.Abort()
	checkInvariants(t, c)
}
