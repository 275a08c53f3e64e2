package offload_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// sixLayers writes a small synthetic llama with six layers and an output
// head of its own (so the embedding is read by rows under the ssd tier), in
// Q8_0 unless a dtype is given.
func sixLayers(t *testing.T, dt ...tensor.DType) string {
	t.Helper()
	d := tensor.Q8_0
	if len(dt) > 0 {
		d = dt[0]
	}
	pr := synth.Preset{Name: "six", Dim: 64, Hidden: 192, Layers: 6, Heads: 4, KVHeads: 2, Context: 128, Vocab: 512}
	return synthfile.Path(t, synthfile.Options{Custom: &pr, DType: d, Seed: 5})
}

// allLogits runs three prompts together (prefill chunks of 3) and returns
// every position's logits by prompt, and the texts.
func allLogits(t *testing.T, l *model.Loaded, ahead int) (map[string][][]float32, map[string]string) {
	t.Helper()
	p := enginetest.Pipeline(t, 0, 3, 3, 12)
	s, _ := p.StageOfKind(pipelines.KindTransformerLayers)
	s.Params.(*pipelines.TransformerLayersParams).PrefetchAhead = ahead
	e := enginetest.Engine(t, l, p)
	prompts := []string{"", "Lily and Tom", "The cat sat on the mat."}
	var mu sync.Mutex
	logits := map[string][][]float32{}
	texts := map[string]string{}
	var wg sync.WaitGroup
	for i, pr := range prompts {
		wg.Add(1)
		req := sluice.Request{ID: pr, Index: uint64(i), Prompt: pr, AllLogits: true,
			OnLogits: func(pos int32, lg []float32) {
				mu.Lock()
				defer mu.Unlock()
				for len(logits[pr]) <= int(pos) {
					logits[pr] = append(logits[pr], nil)
				}
				logits[pr][pos] = slices.Clone(lg)
			}}
		if err := e.Submit(t.Context(), req, func(r sluice.Result) {
			if r.Err != nil {
				t.Errorf("prompt %q: %v", pr, r.Err)
			}
			mu.Lock()
			texts[pr] = r.Text
			mu.Unlock()
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	return logits, texts
}

func sameLogits(t *testing.T, want, got map[string][][]float32) {
	t.Helper()
	for pr, w := range want {
		g := got[pr]
		if len(g) != len(w) {
			t.Fatalf("prompt %q: %d positions, want %d", pr, len(g), len(w))
		}
		for pos := range w {
			for i := range w[pos] {
				if math.Float32bits(w[pos][i]) != math.Float32bits(g[pos][i]) {
					t.Fatalf("prompt %q position %d logit %d: %v, want %v (bit-identical)", pr, pos, i, g[pos][i], w[pos][i])
				}
			}
		}
	}
}

// Buffered equals naive: every position's logits are bit-identical under
// ram, mmap and ssd, at budgets from one layer's worth of pins to all of
// it, with prefetch off, one and three layers ahead; the ssd tier never
// goes over its budget.
func TestTiersBitIdentical(t *testing.T) {
	check := func(t *testing.T, lo model.LoadOptions) {
		lo.Threads = 2
		lo.Tier = offload.RAM
		want, _ := allLogits(t, enginetest.Load(t, lo), 1)
		lo.Tier = offload.Mmap
		got, _ := allLogits(t, enginetest.Load(t, lo), 1)
		sameLogits(t, want, got)

		lo.Tier = offload.SSD
		probe := enginetest.Load(t, lo).Store.Stats() // no budget: the minimum
		layer := probe.RingBytes / 2
		minimum := probe.Resident()
		cached := false
		// minimum + layer/2 and + 5·layer/2 leave the chunk cache half a
		// layer beside the pins and the ring.
		for _, budget := range []int64{minimum, minimum + layer/2, minimum + layer, minimum + 5*layer/2, minimum + 3*layer, 1 << 40} {
			for _, ahead := range []int{0, 1, 3} {
				t.Run(fmt.Sprintf("ssd/%s/ahead=%d", offload.FormatBytes(budget), ahead), func(t *testing.T) {
					lo.Budget = budget
					l := enginetest.Load(t, lo)
					got, _ := allLogits(t, l, ahead)
					sameLogits(t, want, got)
					st := l.Store.Stats()
					if st.Resident() > budget {
						t.Errorf("resident %d > budget %d", st.Resident(), budget)
					}
					if budget == minimum && (st.StreamedLayers == 0 || st.Loads == 0) {
						t.Errorf("at the minimum nothing streamed: %+v", st)
					}
					if st.ChunkHits > 0 {
						cached = true
					}
				})
			}
		}
		if !cached {
			t.Error("no budget had the chunk cache serve a chunk")
		}
		// Below two whole layers the tier streams tensor by tensor; below
		// that it refuses, saying the minimum.
		lo.Budget = 4096
		if _, err := model.Load(context.Background(), lo); err == nil || !strings.Contains(err.Error(), "below the minimum") {
			t.Errorf("budget of 4 KiB: %v", err)
		}
	}
	t.Run("synthetic", func(t *testing.T) { check(t, model.LoadOptions{Path: sixLayers(t)}) })
	// Q4_0: panels under the ram tier where the kernel set has a Q4_0 panel
	// kernel (every amd64 fast set), row-major under mmap.
	t.Run("synthetic-q4_0", func(t *testing.T) { check(t, model.LoadOptions{Path: sixLayers(t, tensor.Q4_0)}) })
	t.Run("stories260K", func(t *testing.T) {
		dir := testutil.Models(t)
		check(t, model.LoadOptions{Path: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")})
	})
}

// poisonStore hands out copies of the weights and overwrites each with NaN
// bytes on Release: a read of released memory changes the logits.
type poisonStore struct {
	offload.Store
	released atomic.Int64
}

type poisoned struct {
	b      []byte
	s      *poisonStore
	done   bool
	layout kernels.Layout // the store's (the bytes are a copy of its)
}

func (p *poisoned) Bytes() []byte          { return p.b }
func (p *poisoned) Layout() kernels.Layout { return p.layout }
func (p *poisoned) Release() {
	if !p.done {
		p.done = true
		for i := range p.b {
			p.b[i] = 0xff
		}
		p.s.released.Add(1)
	}
}

func (s *poisonStore) Acquire(ctx context.Context, r offload.Ref) (offload.Pinned, error) {
	in, err := s.Store.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	b := append(make([]byte, 0, len(in.Bytes())+8), in.Bytes()...)
	l := offload.LayoutOf(in)
	in.Release()
	return &poisoned{b: b, s: s, layout: l}, nil
}

func TestNoReadAfterRelease(t *testing.T) {
	path := sixLayers(t)
	want, _ := allLogits(t, enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.RAM, Threads: 2}), 1)
	probe := enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.SSD, Threads: 2}).Store.Stats()
	for _, tc := range []struct {
		tier   offload.Tier
		budget int64 // a chunk cache of half a layer
	}{{offload.RAM, 0}, {offload.SSD, 0}, {offload.SSD, probe.Resident() + probe.RingBytes/4}} {
		t.Run(fmt.Sprintf("%s/%d", tc.tier, tc.budget), func(t *testing.T) {
			l := enginetest.Load(t, model.LoadOptions{Path: path, Tier: tc.tier, Threads: 2, Budget: tc.budget})
			ps := &poisonStore{Store: l.Store}
			l.Store = ps
			got, _ := allLogits(t, l, 1)
			sameLogits(t, want, got)
			if ps.released.Load() == 0 {
				t.Fatal("nothing was released")
			}
			if st := l.Store.Stats(); tc.budget > 0 && st.ChunkHits == 0 {
				t.Errorf("the chunk cache served nothing: %+v", st)
			}
		})
	}
}

// Injected read errors fail the requests of the passes that needed the
// layer, naming the file, the tensor and the offset; later requests run.
// A file truncated under the running engine does the same, with no crash.
func TestReadFaultsFailRequests(t *testing.T) {
	path := sixLayers(t)
	ref := enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.RAM, Threads: 2})
	_, wantTexts := allLogits(t, ref, 1)
	bad, _ := ref.Store.Lookup("blk.3.ffn_up.weight")
	var armed atomic.Bool
	hook := func(p string, b []byte, off int64) (int, error) {
		if armed.Load() && bad.Offset+bad.Size/2 >= off && bad.Offset+bad.Size/2 < off+int64(len(b)) {
			return 0, syscall.EIO
		}
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return f.ReadAt(b, off)
	}
	l := enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.SSD, Threads: 2, ReadAt: hook})
	e := enginetest.Engine(t, l, enginetest.Pipeline(t, 0, 3, 3, 12))
	armed.Store(true)
	r, err := e.Complete(t.Context(), sluice.Request{ID: "a", Prompt: "Lily and Tom"})
	if err == nil {
		err = r.Err
	}
	if err == nil {
		t.Fatal("a failing read did not fail the request")
	}
	for _, w := range []string{path, bad.Name, fmt.Sprintf("at offset %d", bad.Offset), "input/output error"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not name %q", err, w)
		}
	}
	armed.Store(false)
	r, err = e.Complete(t.Context(), sluice.Request{ID: "b", Prompt: "Lily and Tom"})
	if err != nil || r.Err != nil {
		t.Fatalf("the request after the fault: %v %v", err, r.Err)
	}
	if r.Text != wantTexts["Lily and Tom"] {
		t.Errorf("after the fault: %q, want %q", r.Text, wantTexts["Lily and Tom"])
	}

	// Truncate the file under the engine: the next requests fail clearly.
	if err := os.Truncate(path, bad.Offset+bad.Size/2); err != nil {
		t.Fatal(err)
	}
	r, err = e.Complete(t.Context(), sluice.Request{ID: "c", Prompt: "The cat"})
	if err == nil {
		err = r.Err
	}
	if err == nil || !strings.Contains(err.Error(), "short read") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "blk.") {
		t.Fatalf("truncated file: %v", err)
	}
	t.Log(err)
}
