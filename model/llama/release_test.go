package llama_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// recorder logs every Acquire and Release of the store it wraps.
type recorder struct {
	offload.Store
	mu  sync.Mutex
	log []string
}

type recPin struct {
	offload.Pinned
	r    *recorder
	name string
}

func (p *recPin) Release() {
	p.r.mu.Lock()
	p.r.log = append(p.r.log, "release "+p.name)
	p.r.mu.Unlock()
	p.Pinned.Release()
}

func (r *recorder) Acquire(ctx context.Context, ref offload.Ref) (offload.Pinned, error) {
	p, err := r.Store.Acquire(ctx, ref)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.log = append(r.log, "acquire "+ref.Name)
	r.mu.Unlock()
	return &recPin{Pinned: p, r: r, name: ref.Name}, nil
}

// A block acquires its weights in the order Weights lists them (the order
// a store streaming tensor by tensor reads them), releases gate and up
// before it acquires down (so their buffers can be refilled while down
// computes), and releases everything it acquired; the logits are those of
// the plain store.
func TestBlockAcquireOrder(t *testing.T) {
	p := synth.Preset{Name: "tiny", Dim: 64, Hidden: 176, Layers: 2, Heads: 4, KVHeads: 2, Context: 64, Vocab: 512}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteFile(path, synth.Options{Preset: p, DType: tensor.Q8_0, Seed: 3, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := l.Model.Arch()
	newKV := func() *kvcache.Cache {
		kv, err := kvcache.New(kvcache.Options{Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
			PageTokens: 4, MaxTokens: 64, MaxSeqLen: a.Context})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	tokens := []int32{1, 17, 300, 42, 7}
	want := (&treeRunner{t: t, l: l, kv: newKV()}).linear(0, tokens)

	rec := &recorder{Store: l.Store}
	lr := *l
	lr.Store = rec
	got := (&treeRunner{t: t, l: &lr, kv: newKV()}).linear(0, tokens)
	if i := sameBits(want, got); i >= 0 {
		t.Fatalf("logit %d differs through the recording store", i)
	}
	held := map[string]int{}
	for _, e := range rec.log {
		var verb, name string
		fmt.Sscan(e, &verb, &name)
		if verb == "acquire" {
			held[name]++
		} else {
			held[name]--
		}
	}
	for name, n := range held {
		if n != 0 {
			t.Errorf("%s: %d pins not released", name, n)
		}
	}
	for i, b := range l.Model.Blocks() {
		var acquired []string
		at := map[string]int{}
		for j, e := range rec.log {
			at[e] = j
			var verb, name string
			fmt.Sscan(e, &verb, &name)
			if verb == "acquire" && slices.ContainsFunc(b.Weights(), func(r offload.Ref) bool { return r.Name == name }) {
				acquired = append(acquired, name)
			}
		}
		var listed []string
		for _, r := range b.Weights() {
			listed = append(listed, r.Name)
		}
		if !slices.Equal(acquired, listed) {
			t.Errorf("block %d acquires %v, Weights lists %v", i, acquired, listed)
		}
		down := at[fmt.Sprintf("acquire blk.%d.ffn_down.weight", i)]
		for _, w := range []string{"ffn_gate", "ffn_up"} {
			rel, ok := at[fmt.Sprintf("release blk.%d.%s.weight", i, w)]
			if !ok || rel > down {
				t.Errorf("block %d releases %s at event %d (found %v), after acquiring ffn_down at %d", i, w, rel, ok, down)
			}
		}
	}
}
