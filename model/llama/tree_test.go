package llama_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
	_ "github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// treeRunner drives a model's Embed, Blocks and Head over a KV cache directly.
type treeRunner struct {
	t  *testing.T
	l  *model.Loaded
	kv *kvcache.Cache
}

// forward runs b as one pass and returns the slot and the logits of every
// row (every row of b must be an output).
func (r *treeRunner) forward(b *input.Batch) (slots []int32, logits [][]float32) {
	r.t.Helper()
	ctx := r.t.Context()
	if len(b.Outputs) != b.Len() {
		r.t.Fatalf("forward: %d outputs for %d rows", len(b.Outputs), b.Len())
	}
	pass, err := r.kv.Begin(ctx, b)
	if err != nil {
		r.t.Fatal(err)
	}
	st := &model.State{Batch: b, Pass: pass, Mask: pass.Mask()}
	m := r.l.Model
	err = m.Embed(ctx, st, r.l.Store)
	for _, blk := range m.Blocks() {
		if err == nil {
			err = blk.Forward(ctx, st, r.l.Store)
		}
	}
	if err == nil {
		err = m.Head(ctx, st, r.l.Store)
	}
	if err != nil {
		pass.Abort()
		r.t.Fatal(err)
	}
	slots = slices.Clone(pass.Slots())
	if err := pass.End(); err != nil {
		r.t.Fatal(err)
	}
	vocab := m.Arch().Vocab
	for i := range b.Len() {
		logits = append(logits, slices.Clone(st.Logits[i*vocab:(i+1)*vocab]))
	}
	return slots, logits
}

// linear runs tokens as one plain prefill of a fresh sequence and returns the
// logits of its last token.
func (r *treeRunner) linear(seq int32, tokens []int32) []float32 {
	r.t.Helper()
	b := &input.Batch{}
	for i, tok := range tokens {
		b.Add(tok, int32(i), seq, true)
	}
	_, lg := r.forward(b)
	r.kv.Free(seq)
	return lg[len(lg)-1]
}

// sameBits reports the first element where a and b differ in bits, or -1.
func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// A draft tree grown over three passes gives every node the logits, bit for
// bit, of its root-to-node path run alone as plain text, and committing one
// path leaves a cache in which the next token's logits are those of the
// plain run too. Batch invariance (DESIGN.md §2.2) for trees across passes.
func TestTreeAcrossPassesBitIdentical(t *testing.T) {
	presets := []synth.Preset{
		// head dim 16: the scalar attention path
		{Name: "tiny", Dim: 64, Hidden: 176, Layers: 2, Heads: 4, KVHeads: 2, Context: 64, Vocab: 512},
		// head dim 64: the tiled (and, on AVX-512, assembly) attention
		{Name: "d64", Dim: 128, Hidden: 256, Layers: 2, Heads: 2, KVHeads: 1, Context: 64, Vocab: 512},
	}
	for _, p := range presets {
		for _, dt := range []tensor.DType{tensor.F32, tensor.Q8_0} {
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%v/threads=%d", p.Name, dt, threads), func(t *testing.T) {
					testTreeAcrossPasses(t, p, dt, threads)
				})
			}
		}
	}
}

func testTreeAcrossPasses(t *testing.T, p synth.Preset, dt tensor.DType, threads int) {
	path := filepath.Join(t.TempDir(), p.Name+".gguf")
	if err := synth.WriteFile(path, synth.Options{Preset: p, DType: dt, Seed: 3, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := l.Model.Arch()
	// Pages of 4 tokens, so tree slots and their ancestors straddle pages.
	kv, err := kvcache.New(kvcache.Options{Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
		PageTokens: 4, MaxTokens: 512, MaxSeqLen: a.Context, Window: a.SlidingWindow})
	if err != nil {
		t.Fatal(err)
	}
	r := &treeRunner{t: t, l: l, kv: kv}

	// node is a tree node: its token, its parent node (-1: the root) and, once
	// run, its slot and logits.
	type node struct {
		tok    int32
		parent int
		slot   int32
		logits []float32
	}
	var nodes []node
	prompt := []int32{1, 45, 300, 17, 222} // the root is the last prompt token
	pathOf := func(k int) []int32 {        // tokens from BOS to node k
		var chain []int32
		for ; k >= 0; k = nodes[k].parent {
			chain = append(chain, nodes[k].tok)
		}
		slices.Reverse(chain)
		return append(slices.Clone(prompt), chain...)
	}
	depth := func(k int) int32 { return int32(len(pathOf(k)) - len(prompt)) }
	rootPos := int32(len(prompt) - 1)
	const seq = 0

	// Pass 1: the prompt, its last token the root.
	b := &input.Batch{}
	for i, tok := range prompt {
		b.Add(tok, int32(i), seq, true)
	}
	_, lg := r.forward(b)
	rootLogits := lg[len(lg)-1]

	// runPass runs the new nodes ks as one pass: a node whose parent is in the
	// pass is an in-batch child (Parent row), one whose parent ran in an
	// earlier pass is a ParentSlot child, and a child of the root names the
	// root's slot.
	runPass := func(ks []int) {
		b := &input.Batch{}
		row := map[int]int32{}
		for _, k := range ks {
			n := nodes[k]
			pos := rootPos + depth(k)
			switch pr, inPass := row[n.parent]; {
			case n.parent < 0:
				b.AddChild(n.tok, pos, seq, -1, rootPos, true) // the root's slot is its position
			case inPass:
				b.AddChild(n.tok, pos, seq, pr, -1, true)
			default:
				b.AddChild(n.tok, pos, seq, -1, nodes[n.parent].slot, true)
			}
			row[k] = int32(b.Len() - 1)
		}
		slots, lg := r.forward(b)
		for i, k := range ks {
			nodes[k].slot, nodes[k].logits = slots[i], lg[i]
		}
	}
	add := func(tok int32, parent int) int {
		nodes = append(nodes, node{tok: tok, parent: parent, slot: -1})
		return len(nodes) - 1
	}
	// Pass 2: three children of the root.
	c1, c2, c3 := add(5, -1), add(77, -1), add(400, -1) // c3 stays a leaf
	runPass([]int{c1, c2, c3})
	// Pass 3: grandchildren under c1 and c2 (parent slots of pass 2), their
	// own children in the batch, and one more child of the root, interleaved.
	g1 := add(9, c1)
	g2 := add(310, c2)
	h1 := add(60, g1)
	g3 := add(11, c1)
	h2 := add(128, g2)
	c4 := add(250, -1)
	h3 := add(61, g1)
	i2 := add(99, h2)
	runPass([]int{g1, g2, h1, g3, h2, c4, h3, i2})

	// Every node against its path run alone in a fresh sequence.
	if d := sameBits(rootLogits, r.linear(1, prompt)); d >= 0 {
		t.Errorf("root: logits differ from the plain run at %d", d)
	}
	for k, n := range nodes {
		want := r.linear(1, pathOf(k))
		if d := sameBits(n.logits, want); d >= 0 {
			t.Errorf("node %d (slot %d, path %v): logit %d = %v, plain run %v", k, n.slot, pathOf(k), d, n.logits[d], want[d])
		}
	}
	// The comparison is not vacuous: siblings see different histories.
	if sameBits(nodes[g1].logits, nodes[g3].logits) < 0 || sameBits(nodes[h1].logits, nodes[h3].logits) < 0 {
		t.Fatalf("sibling nodes have identical logits: the test cannot tell masks apart")
	}

	// Keep root → c2 → g2 → h2 → i2 and decode one more token after it.
	keep := []int32{nodes[c2].slot, nodes[g2].slot, nodes[h2].slot, nodes[i2].slot}
	if err := kv.CommitPath(seq, keep); err != nil {
		t.Fatal(err)
	}
	full := pathOf(i2)
	if got := kv.Len(seq); int(got) != len(full) {
		t.Fatalf("Len after CommitPath = %d, want %d", got, len(full))
	}
	next := int32(33)
	b = &input.Batch{}
	b.Add(next, int32(len(full)), seq, true)
	slots, lg := r.forward(b)
	if slots[0] != int32(len(full)) {
		t.Errorf("next token in slot %d, want %d", slots[0], len(full))
	}
	want := r.linear(1, append(full, next))
	if d := sameBits(lg[0], want); d >= 0 {
		t.Errorf("token after the committed path: logit %d = %v, plain run %v", d, lg[0][d], want[d])
	}
	if st := kv.Stats(); st.Tokens != len(full)+1 || st.PagesInUse != (len(full)+1+3)/4 {
		t.Errorf("after commit and one step: %+v, want %d tokens in %d pages", st, len(full)+1, (len(full)+1+3)/4)
	}
}
