package offload_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
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
	return promptLogits(t, l, ahead, 3, []string{"", "Lily and Tom", "The cat sat on the mat."})
}

// promptLogits is allLogits over the given prompts, in prefill chunks of
// chunk tokens.
func promptLogits(t *testing.T, l *model.Loaded, ahead, chunk int, prompts []string) (map[string][][]float32, map[string]string) {
	t.Helper()
	p := enginetest.Pipeline(t, 0, len(prompts), chunk, 12)
	s, _ := p.StageOfKind(pipelines.KindTransformerLayers)
	s.Params.(*pipelines.TransformerLayersParams).PrefetchAhead = ahead
	e := enginetest.Engine(t, l, p)
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

// streamedPanelsChild marks a run of TestStreamedPanels under one
// SLUICE_ISA cap (the kernels read the cap once, at start).
const streamedPanelsChild = "SLUICE_TEST_STREAMED_PANELS"

// The ssd tier's streamed layers reach the kernels in the panel layout
// in batches wherever the RAM tier's are in panels (the model asks for
// panels when the kernel set has a Q8_0 panel kernel), laid out by the
// store's packer, row-major in a lone sequence's one-row decode, and give
// the RAM tier's bits either way: Q8_0 and Q4_0, at 1 and 2 threads, with
// batches of 1 to about 50 rows, under every SLUICE_ISA cap (each in a
// child process of this test binary).
func TestStreamedPanels(t *testing.T) {
	if os.Getenv(streamedPanelsChild) == "" && !testing.Short() {
		for _, isa := range kernels.ISANames() {
			t.Run("SLUICE_ISA="+isa, func(t *testing.T) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestStreamedPanels$", "-test.v")
				cmd.Env = append(os.Environ(), streamedPanelsChild+"=1", "SLUICE_ISA="+isa)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("under SLUICE_ISA=%s: %v\n%s", isa, err, out)
				}
				if !strings.Contains(string(out), "--- PASS: TestStreamedPanels") {
					t.Fatalf("under SLUICE_ISA=%s the test did not run:\n%s", isa, out)
				}
			})
		}
	}
	long := strings.Repeat("Lily and Tom went to the park to play with a ball. ", 5)
	prompts := []string{"Lily and Tom", "The cat sat on the mat.", long}
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		path := sixLayers(t, dt)
		panels := kernels.Panels(tensor.Q8_0) && kernels.Repackable(dt, 32, 64) // model.Load's rule
		want := kernels.RowMajor
		if panels {
			want = kernels.PanelQ8_0
			if dt == tensor.Q4_0 {
				want = kernels.PanelQ4_0
			}
		}
		for _, threads := range []int{1, 2} {
			// Three sequences together (batches all along), then one
			// alone (its decode passes have one row).
			for _, prs := range [][]string{prompts, {long}} {
				t.Run(fmt.Sprintf("%v/threads=%d/sequences=%d", dt, threads, len(prs)), func(t *testing.T) {
					lo := model.LoadOptions{Path: path, Tier: offload.RAM, Threads: threads}
					wantLogits, wantTexts := promptLogits(t, enginetest.Load(t, lo), 1, 64, prs)
					lo.Tier = offload.SSD // no budget: every layer streams
					l := enginetest.Load(t, lo)
					ls := &layoutStore{Store: l.Store, seen: map[kernels.Layout]int{}}
					l.Store = ls
					got, texts := promptLogits(t, l, 1, 64, prs)
					sameLogits(t, wantLogits, got)
					for pr, w := range wantTexts {
						if texts[pr] != w {
							t.Errorf("prompt %q: %q, want %q", pr, texts[pr], w)
						}
					}
					st := ls.Stats()
					if st.StreamedLayers != 6 || st.Loads == 0 {
						t.Fatalf("not every layer streamed: %+v", st)
					}
					ls.mu.Lock()
					defer ls.mu.Unlock()
					if ls.seen[want] == 0 || len(ls.seen) > 2 || len(ls.seen) == 2 && ls.seen[kernels.RowMajor] == 0 {
						t.Errorf("the blocks acquired streamed matrices in the layouts %v, want %v", ls.seen, want)
					}
					if panels && len(prs) == 1 && ls.seen[kernels.RowMajor] == 0 {
						t.Errorf("a lone sequence's one-row decode acquired no row-major matrix: %v (its reads were packed)", ls.seen)
					}
					if panels != (st.Packed > 0) {
						t.Errorf("%d tensors laid out in panels after their read; panels: %v", st.Packed, panels)
					}
					t.Logf("%v: streamed matrices acquired %v; %d laid out after their read in %v", kernels.Impl(), ls.seen, st.Packed, st.PackTime)
				})
			}
		}
	}
}

// layoutStore counts the layouts of the layer matrices the blocks acquire.
type layoutStore struct {
	offload.Store
	mu   sync.Mutex
	seen map[kernels.Layout]int
}

// PassRows passes the model's hint on, so the ssd tier packs for batches.
func (s *layoutStore) PassRows(n int) { offload.HintRows(s.Store, n) }

func (s *layoutStore) Acquire(ctx context.Context, r offload.Ref) (offload.Pinned, error) {
	p, err := s.Store.Acquire(ctx, r)
	if err == nil && strings.HasPrefix(r.Name, "blk.") && len(r.Shape) == 2 {
		s.mu.Lock()
		s.seen[offload.LayoutOf(p)]++
		s.mu.Unlock()
	}
	return p, err
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
