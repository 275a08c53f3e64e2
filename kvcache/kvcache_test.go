package kvcache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/tensor"
)

func TestNewOptions(t *testing.T) {
	ok := Options{Layers: 2, KVHeads: 2, HeadDim: 4, MaxTokens: 64}
	tests := []struct {
		name  string
		edit  func(*Options)
		field string // "" = valid
	}{
		{"valid", func(*Options) {}, ""},
		{"layers", func(o *Options) { o.Layers = 0 }, "Layers"},
		{"kv heads", func(o *Options) { o.KVHeads = -1 }, "KVHeads"},
		{"head dim", func(o *Options) { o.HeadDim = 0 }, "HeadDim"},
		{"page tokens", func(o *Options) { o.PageTokens = -4 }, "PageTokens"},
		{"max tokens", func(o *Options) { o.MaxTokens = 0 }, "MaxTokens"},
		{"max seq len", func(o *Options) { o.MaxSeqLen = -1 }, "MaxSeqLen"},
		{"window", func(o *Options) { o.Window = -2 }, "Window"},
		{"f16", func(o *Options) { o.DType = tensor.F16 }, ""},
		{"q8_0 pages", func(o *Options) { o.DType = tensor.Q8_0 }, "DType"},
		{"huge", func(o *Options) { o.MaxTokens = math.MaxInt32 }, "MaxTokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			_, err := New(o)
			if tc.field == "" {
				must(t, err)
				return
			}
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("New = %v, want ErrOptions", err)
			}
			if got := err.Error(); !containsField(got, tc.field) {
				t.Errorf("error %q does not name %s", got, tc.field)
			}
		})
	}
	c := mustNew(t, ok)
	if got := c.Options(); got.PageTokens != 16 || got.MaxSeqLen != 64 {
		t.Errorf("defaults: PageTokens %d MaxSeqLen %d, want 16 and 64", got.PageTokens, got.MaxSeqLen)
	}
	if got, want := c.Stats(), (Stats{Pages: 4, PagesFree: 4}); got != want {
		t.Errorf("Stats of a new cache = %+v, want %+v", got, want)
	}
}

func containsField(s, f string) bool {
	for i := 0; i+len(f) <= len(s); i++ {
		if s[i:i+len(f)] == f {
			return true
		}
	}
	return false
}

func TestBytes(t *testing.T) {
	const KiB, GiB = 1 << 10, 1 << 30
	tests := []struct {
		name                string
		l, g, d, tok, bytes int
		want                int64
	}{
		// The seed's example: 32 layers, 32 KV heads of 128, BF16.
		{"per token", 32, 32, 128, 1, 2, 524_288},
		{"per token in KiB", 32, 32, 128, 1, 2, 512 * KiB},
		{"8192 tokens", 32, 32, 128, 8192, 2, 4 * GiB},
		{"GQA 8 KV heads", 32, 8, 128, 8192, 2, 1 * GiB},
		{"f32", 1, 1, 2, 3, 4, 48},
		{"empty", 32, 8, 128, 0, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bytes(tc.l, tc.g, tc.d, tc.tok, tc.bytes); got != tc.want {
				t.Errorf("Bytes = %d, want %d", got, tc.want)
			}
		})
	}
	c := mustNew(t, Options{Layers: 32, KVHeads: 8, HeadDim: 128, MaxTokens: 16})
	if got := c.BytesPerToken(); got != 2*32*8*128*4 {
		t.Errorf("BytesPerToken = %d, want %d (f32 storage)", got, 2*32*8*128*4)
	}
}

// attendLocal is the plainest attention: for batch row i of the call, softmax of
// scale·q·k over the visible slots, then the weighted sum of v. One KV head per
// group of Heads/KVHeads query heads.
func attendLocal(q []float32, rows int, kv kernels.KV, m *kernels.Mask, s kernels.AttnShape) []float32 {
	d := s.HeadDim
	rowF := s.KVHeads * d
	out := make([]float32, rows*s.Heads*d)
	for i := range rows {
		for h := range s.Heads {
			kh := h / (s.Heads / s.KVHeads)
			qh := q[(i*s.Heads+h)*d : (i*s.Heads+h+1)*d]
			var w []float64
			var vis []int
			mx := math.Inf(-1)
			for j := range kv.Len {
				if m != nil && !m.Visible(i, int32(j)) {
					continue
				}
				k := kv.K[j/kv.PageTokens][(j%kv.PageTokens)*rowF+kh*d:]
				var dot float64
				for x := range d {
					dot += float64(qh[x]) * float64(k[x])
				}
				dot *= float64(s.Scale)
				w = append(w, dot)
				vis = append(vis, j)
				mx = max(mx, dot)
			}
			var sum float64
			for n := range w {
				w[n] = math.Exp(w[n] - mx)
				sum += w[n]
			}
			o := out[(i*s.Heads+h)*d : (i*s.Heads+h+1)*d]
			for n, j := range vis {
				v := kv.V[j/kv.PageTokens][(j%kv.PageTokens)*rowF+kh*d:]
				for x := range d {
					o[x] += float32(w[n] / sum * float64(v[x]))
				}
			}
		}
	}
	return out
}

// The seed's tiny trace: one head, d = 2, q = k = x, v = (x0, 2·x1); tokens
// (1,0), (0,1), (1,1) arrive one per pass. Its outputs (0.33, 1.34) and
// (0.75, 1.50) are those of scaled attention, score = q·k/√d: with score = q·k
// step 2 would give (0.27, 1.46).
var traceTokens = [][]float32{{1, 0}, {0, 1}, {1, 1}}

var traceWant = [][]float32{{1, 0}, {0.33, 1.34}, {0.75, 1.50}}

type attendFunc func(q []float32, rows int, kv kernels.KV, m *kernels.Mask, s kernels.AttnShape) []float32

func kernelAttend(q []float32, rows int, kv kernels.KV, m *kernels.Mask, s kernels.AttnShape) []float32 {
	out := make([]float32, rows*s.Heads*s.HeadDim)
	kernels.Attention(out, q, rows, kv, m, s, make([]float32, kernels.AttentionScratch(kv, rows)))
	return out
}

func TestTinyTrace(t *testing.T) {
	for _, impl := range []struct {
		name string
		f    attendFunc
	}{{"local loop", attendLocal}, {"kernels.Attention", kernelAttend}} {
		t.Run(impl.name, func(t *testing.T) {
			runTrace(t, impl.f)
		})
	}
}

func runTrace(t *testing.T, attend attendFunc) {
	shape := kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: float32(1 / math.Sqrt2)}
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 8})
	ctx := t.Context()

	// Full causal attention from scratch over the three tokens, one batch.
	var all [][]float32
	{
		scratch := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 8})
		p, err := scratch.Begin(ctx, linear(0, 0, 3))
		must(t, err)
		var q, k, v []float32
		for _, x := range traceTokens {
			q = append(q, x...)
			k = append(k, x...)
			v = append(v, x[0], 2*x[1])
		}
		p.Layer(0).Put(k, v)
		out := attend(q, 3, p.Layer(0).View(0), p.Mask(), shape)
		must(t, p.End())
		for i := range 3 {
			all = append(all, out[2*i:2*i+2])
		}
	}

	for step, x := range traceTokens {
		p, err := c.Begin(ctx, linear(0, step, 1))
		must(t, err)
		p.Layer(0).Put(x, []float32{x[0], 2 * x[1]})
		kv := p.Layer(0).View(0)
		if kv.Len != step+1 {
			t.Fatalf("step %d: View.Len = %d, want %d", step+1, kv.Len, step+1)
		}
		got := attend(x, 1, kv, p.Mask(), shape)
		must(t, p.End())
		round := []float32{float32(math.Round(float64(got[0])*100) / 100), float32(math.Round(float64(got[1])*100) / 100)}
		if diff := cmp.Diff(traceWant[step], round); diff != "" {
			t.Errorf("step %d output (-seed +got):\n%s", step+1, diff)
		}
		for j := range 2 {
			if math.Abs(float64(got[j]-all[step][j])) > 1e-6 {
				t.Errorf("step %d: cached output %v differs from full causal attention %v", step+1, got, all[step])
			}
		}
		if c.Len(0) != int32(step+1) {
			t.Errorf("after step %d Len = %d", step+1, c.Len(0))
		}
	}
}

// TestPagingEqualsFlat appends to several sequences in random chunks, several
// sequences per batch, with pages of 4 tokens, and checks that every view
// during a pass and every committed history equals a flat array.
func TestPagingEqualsFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		c := mustNew(t, Options{Layers: 2, KVHeads: 2, HeadDim: 3, PageTokens: 4, MaxTokens: 8 * 24})
		target := make([]int, 8)
		for s := range target {
			target[s] = rng.IntN(21) // 0..20 tokens
		}
		flat := make([][]int, len(target))
		tag := 0
		for {
			b := &input.Batch{}
			var tags []int
			for s := range target {
				if rem := target[s] - len(flat[s]); rem > 0 && rng.IntN(2) == 0 {
					for range 1 + rng.IntN(min(rem, 6)) {
						b.Add(0, 0, int32(s), false)
						tags = append(tags, tag)
						tag++
					}
				}
			}
			if b.Len() == 0 {
				done := true
				for s := range target {
					done = done && len(flat[s]) == target[s]
				}
				if done {
					break
				}
				continue
			}
			// Shuffle rows across sequences: rows of a sequence keep their
			// relative order (slots follow batch order) but interleave.
			shuffled := &input.Batch{}
			var stags []int
			for _, i := range interleave(rng, b.Seq) {
				shuffled.Add(0, 0, b.Seq[i], false)
				stags = append(stags, tags[i])
			}
			p, err := c.Begin(t.Context(), shuffled)
			must(t, err)
			putTags(t, c, p, stags)
			want := make([][]int, len(target))
			for s := range target {
				want[s] = slices.Clone(flat[s])
			}
			for i, s := range shuffled.Seq {
				if got, w := p.Slots()[i], int32(len(want[s])); got != w {
					t.Fatalf("trial %d: row %d of sequence %d got slot %d, want %d", trial, i, s, got, w)
				}
				want[s] = append(want[s], stags[i])
			}
			for s := range target {
				for l := range 2 {
					k, v := readKV(p.Layer(l).View(int32(s)), c.rowF)
					got := decodeTags(t, k, v, l)
					inPass := slices.Contains(shuffled.Seq, int32(s))
					if !inPass {
						if len(got) != 0 {
							t.Fatalf("View of a sequence outside the pass has %d rows", len(got))
						}
						continue
					}
					if diff := cmp.Diff(want[s], got); diff != "" {
						t.Fatalf("trial %d seq %d layer %d view (-flat +paged):\n%s", trial, s, l, diff)
					}
				}
			}
			checkInvariants(t, c)
			must(t, p.End())
			flat = want
			for s := range target {
				got := seqTags(t, c, int32(s))
				if diff := cmp.Diff(flat[s], got, cmpEmpty); diff != "" {
					t.Fatalf("trial %d seq %d history (-flat +paged):\n%s", trial, s, diff)
				}
				if c.Len(int32(s)) != int32(len(flat[s])) {
					t.Fatalf("Len(%d) = %d, want %d", s, c.Len(int32(s)), len(flat[s]))
				}
			}
			checkInvariants(t, c)
		}
		tokens := 0
		pages := 0
		for s := range target {
			tokens += target[s]
			pages += (target[s] + 3) / 4
		}
		if st := c.Stats(); st.Tokens != tokens || st.PagesInUse != pages || st.PagesShared != 0 {
			t.Errorf("trial %d: Stats %+v, want %d tokens in %d pages", trial, st, tokens, pages)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []int) bool { return slices.Equal(a, b) })

// interleave returns the row indices of seqs in a random order that keeps the
// rows of each sequence in their original relative order.
func interleave(rng *rand.Rand, seqs []int32) []int {
	queues := map[int32][]int{}
	var keys []int32
	for i, s := range seqs {
		if _, ok := queues[s]; !ok {
			keys = append(keys, s)
		}
		queues[s] = append(queues[s], i)
	}
	var out []int
	for len(out) < len(seqs) {
		s := keys[rng.IntN(len(keys))]
		if q := queues[s]; len(q) > 0 {
			out = append(out, q[0])
			queues[s] = q[1:]
		}
	}
	return out
}

func TestMaskCausal(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 2))
	must(t, err)
	must(t, p.End())
	// Two rows of sequence 0 (slots 2, 3), then three of sequence 1 (slots 0..2),
	// then one more of sequence 0 (slot 4).
	b := &input.Batch{}
	b.Add(1, 2, 0, false)
	b.Add(1, 3, 0, false)
	b.Add(1, 0, 1, false)
	b.Add(1, 1, 1, false)
	b.Add(1, 2, 1, true)
	b.Add(1, 4, 0, true)
	p, err = c.Begin(ctx, b)
	must(t, err)
	defer p.Abort()
	m := p.Mask()
	if m.Tree != nil {
		t.Errorf("causal batch has Tree rows")
	}
	if diff := cmp.Diff([]int32{2, 3, 0, 1, 2, 4}, p.Slots()); diff != "" {
		t.Errorf("Slots (-want +got):\n%s", diff)
	}
	want := []string{
		"xxx..",
		"xxxx.",
		"x....",
		"xx...",
		"xxx..",
		"xxxxx",
	}
	if diff := cmp.Diff(want, visibility(m, 6, 5)); diff != "" {
		t.Errorf("visibility (-want +got):\n%s", diff)
	}
	wantRuns := []Run{{Seq: 0, Start: 0, Rows: 2}, {Seq: 1, Start: 2, Rows: 3}, {Seq: 0, Start: 5, Rows: 1}}
	runs := p.Runs()
	if diff := cmp.Diff(wantRuns, runs, cmp.Comparer(func(a, b Run) bool {
		return a.Seq == b.Seq && a.Start == b.Start && a.Rows == b.Rows
	})); diff != "" {
		t.Errorf("Runs (-want +got):\n%s", diff)
	}
	for _, r := range runs {
		for i := range r.Rows {
			for j := range int32(6) {
				if got, want := r.Mask.Visible(i, j), m.Visible(r.Start+i, j); got != want {
					t.Errorf("run %v row %d slot %d: %v, full mask %v", r, i, j, got, want)
				}
			}
		}
	}
}

// TestMaskWindow is ollama's TestSWA in our terms: window 2, a prefill of 4
// then single steps; each row sees itself and one slot before.
func TestMaskWindow(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 2, MaxTokens: 16, Window: 2})
	p, err := c.Begin(ctx, linear(0, 0, 4))
	must(t, err)
	want := []string{
		"x.....",
		"xx....",
		".xx...",
		"..xx..",
	}
	if diff := cmp.Diff(want, visibility(p.Mask(), 4, 6)); diff != "" {
		t.Errorf("prefill (-want +got):\n%s", diff)
	}
	must(t, p.End())
	p, err = c.Begin(ctx, linear(0, 4, 2))
	must(t, err)
	want = []string{
		"...xx.",
		"....xx",
	}
	if diff := cmp.Diff(want, visibility(p.Mask(), 2, 6)); diff != "" {
		t.Errorf("step (-want +got):\n%s", diff)
	}
	must(t, p.End())
}

// treeBatch is a 5-node draft tree on sequence 0 after a history of 3 tokens:
//
//	row 0 (slot 3) root, the last accepted token
//	├── row 1 (slot 4)
//	│   └── row 3 (slot 6)
//	└── row 2 (slot 5)
//	    └── row 4 (slot 7)
func treeBatch() *input.Batch {
	b := &input.Batch{}
	for _, par := range []int32{-1, 0, 0, 1, 2} {
		i := b.Add(10+int32(b.Len()), 0, 0, true)
		b.Parent[i] = par
	}
	return b
}

func TestMaskTree(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	must(t, p.End())
	p, err = c.Begin(ctx, treeBatch())
	must(t, err)
	defer p.Abort()
	m := p.Mask()
	want := []string{
		"xxxx....",
		"xxxxx...",
		"xxxx.x..",
		"xxxxx.x.",
		"xxxx.x.x",
	}
	if diff := cmp.Diff(want, visibility(m, 5, 8)); diff != "" {
		t.Errorf("visibility (-want +got):\n%s", diff)
	}
	// Row 0 (slot 3) is the root: linear history, no tree bits. The tree
	// covers slots 4..7, bit j = slot 4+j.
	wantBits := [][]uint64{nil, {0b0001}, {0b0010}, {0b0101}, {0b1010}}
	if diff := cmp.Diff(wantBits, m.Tree); diff != "" {
		t.Errorf("Tree bits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{4, 4, 4, 4, 4}, m.TreeBase); diff != "" {
		t.Errorf("TreeBase (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{4, 5, 6, 7, 8}, m.Hi); diff != "" {
		t.Errorf("Hi (-want +got):\n%s", diff)
	}
}

func TestMaskTreeWindow(t *testing.T) {
	// Window 3 and a chain 0→1→3 plus a branch 2: positions along the chain,
	// not slots, decide what falls out of the window.
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64, Window: 3})
	p, err := c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	must(t, p.End())
	p, err = c.Begin(ctx, treeBatch())
	must(t, err)
	defer p.Abort()
	// row 0 pos 3: slots 1..3; row 1 pos 4: 2,3,4; row 2 pos 4: 2,3,5;
	// row 3 pos 5: 3,4,6 (history slot 2 out); row 4 pos 5: 3,5,7.
	want := []string{
		".xxx....",
		"..xxx...",
		"..xx.x..",
		"...xx.x.",
		"...x.x.x",
	}
	if diff := cmp.Diff(want, visibility(p.Mask(), 5, 8)); diff != "" {
		t.Errorf("visibility (-want +got):\n%s", diff)
	}
	// A chain deeper than the window drops ancestors inside the batch too.
	c2 := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64, Window: 2})
	b := &input.Batch{}
	for _, par := range []int32{-1, 0, 0, 2, 3} {
		i := b.Add(0, 0, 0, false)
		b.Parent[i] = par
	}
	p2, err := c2.Begin(ctx, b)
	must(t, err)
	defer p2.Abort()
	want = []string{
		"x....",
		"xx...",
		"x.x..",
		"..xx.",
		"...xx",
	}
	if diff := cmp.Diff(want, visibility(p2.Mask(), 5, 5)); diff != "" {
		t.Errorf("deep chain (-want +got):\n%s", diff)
	}
}

func TestMaskParentChainIsCausal(t *testing.T) {
	// Parents that only point at the previous row are a linear chunk.
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, MaxTokens: 64})
	b := &input.Batch{}
	for i := range int32(4) {
		j := b.Add(0, i, 0, false)
		b.Parent[j] = i - 1
	}
	p, err := c.Begin(t.Context(), b)
	must(t, err)
	defer p.Abort()
	if p.Mask().Tree != nil {
		t.Errorf("a parent chain got Tree rows; want the causal fast path")
	}
	want := []string{"x...", "xx..", "xxx.", "xxxx"}
	if diff := cmp.Diff(want, visibility(p.Mask(), 4, 4)); diff != "" {
		t.Errorf("visibility (-want +got):\n%s", diff)
	}
}

func TestCommit(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 32})
	p, err := c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	putTags(t, c, p, []int{0, 1, 2})
	must(t, p.End())

	if err := c.Commit(0, []int32{0}); err != nil {
		// A linear pass may be committed too: keeping row 0 of [0 1 2] drops 1, 2.
		t.Fatalf("Commit of a linear pass: %v", err)
	}
	if got := seqTags(t, c, 0); !slices.Equal(got, []int{0}) {
		t.Fatalf("after Commit([0]) history = %v, want [0]", got)
	}
	must(t, c.Truncate(0, 0))
	p, err = c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	putTags(t, c, p, []int{0, 1, 2})
	must(t, p.End())

	// The 5-node tree; accept the path root → row 2 → row 4.
	p, err = c.Begin(ctx, treeBatch())
	must(t, err)
	putTags(t, c, p, []int{10, 11, 12, 13, 14})
	must(t, p.End())
	if c.Len(0) != 8 {
		t.Fatalf("Len after tree pass = %d, want 8", c.Len(0))
	}
	before := c.Stats()
	must(t, c.Commit(0, []int32{0, 2, 4}))
	if got, want := seqTags(t, c, 0), []int{0, 1, 2, 10, 12, 14}; !slices.Equal(got, want) {
		t.Fatalf("history after Commit = %v, want %v", got, want)
	}
	if after := c.Stats(); after.PagesInUse != before.PagesInUse-1 {
		t.Errorf("Commit 8 → 6 tokens with 2-token pages: pages %d → %d, want one freed", before.PagesInUse, after.PagesInUse)
	}
	checkInvariants(t, c)
	// The next token lands right after the path, with causal history.
	p, err = c.Begin(ctx, linear(0, 6, 1))
	must(t, err)
	if p.Slots()[0] != 6 {
		t.Errorf("next slot = %d, want 6", p.Slots()[0])
	}
	putTags(t, c, p, []int{20})
	must(t, p.End())
	if got, want := seqTags(t, c, 0), []int{0, 1, 2, 10, 12, 14, 20}; !slices.Equal(got, want) {
		t.Fatalf("history = %v, want %v", got, want)
	}

	errs := []struct {
		name string
		prep func()
		keep []int32
	}{
		{"twice", func() {}, []int32{0}},
		{"after truncate", func() { tree(t, c); must(t, c.Truncate(0, 7)) }, []int32{0}},
		{"row not in pass", func() { tree(t, c) }, []int32{5}},
		{"negative row", func() { tree(t, c) }, []int32{-1}},
		{"out of order", func() { tree(t, c) }, []int32{2, 0}},
		{"duplicate", func() { tree(t, c) }, []int32{0, 0}},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			must(t, c.Truncate(0, 7))
			tc.prep()
			n := c.Len(0)
			err := c.Commit(0, tc.keep)
			if !errors.Is(err, ErrCommit) {
				t.Fatalf("Commit(%v) = %v, want ErrCommit", tc.keep, err)
			}
			if c.Len(0) != n {
				t.Errorf("failed Commit changed Len %d → %d", n, c.Len(0))
			}
		})
	}
	if err := c.Commit(42, nil); !errors.Is(err, ErrCommit) {
		t.Errorf("Commit of unknown sequence = %v, want ErrCommit", err)
	}
	// Empty keep drops the whole tree.
	must(t, c.Truncate(0, 7))
	tree(t, c)
	must(t, c.Commit(0, nil))
	if c.Len(0) != 7 {
		t.Errorf("Commit(nil) Len = %d, want 7", c.Len(0))
	}
	checkInvariants(t, c)
}

// tree runs treeBatch's 5 nodes as a pass on sequence 0 with tags 30..34.
func tree(t *testing.T, c *Cache) {
	t.Helper()
	p, err := c.Begin(t.Context(), treeBatch())
	must(t, err)
	putTags(t, c, p, tagsRange(30, 5))
	must(t, p.End())
}

func TestCommitMultiSeqBatch(t *testing.T) {
	// Rows of two sequences interleaved: keep refers to batch rows.
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 3, MaxTokens: 32})
	b := &input.Batch{}
	for i, s := range []int32{0, 1, 0, 1, 0, 1} {
		j := b.Add(0, 0, s, false)
		if i >= 2 {
			b.Parent[j] = int32(i - 2) // chain per sequence, but through rows
		}
	}
	b.Parent[4] = 0 // sequence 0: rows 0 → 2 and 0 → 4 (a fork)
	p, err := c.Begin(ctx, b)
	must(t, err)
	if p.Mask().Tree == nil {
		t.Fatal("branching batch has no Tree")
	}
	putTags(t, c, p, tagsRange(0, 6))
	must(t, p.End())
	must(t, c.Commit(0, []int32{0, 4}))
	must(t, c.Commit(1, []int32{1, 3, 5}))
	if got := seqTags(t, c, 0); !slices.Equal(got, []int{0, 4}) {
		t.Errorf("sequence 0 = %v, want [0 4]", got)
	}
	if got := seqTags(t, c, 1); !slices.Equal(got, []int{1, 3, 5}) {
		t.Errorf("sequence 1 = %v, want [1 3 5]", got)
	}
	if err := c.Commit(0, []int32{1}); !errors.Is(err, ErrCommit) {
		t.Errorf("second Commit = %v, want ErrCommit", err)
	}
}

func TestTruncate(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 2, KVHeads: 2, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 10))
	must(t, err)
	putTags(t, c, p, tagsRange(0, 10))
	must(t, p.End())
	if st := c.Stats(); st.PagesInUse != 3 {
		t.Fatalf("10 tokens in %d pages, want 3", st.PagesInUse)
	}
	must(t, c.Truncate(0, 5))
	if st := c.Stats(); st.PagesInUse != 2 || st.Tokens != 5 {
		t.Errorf("after Truncate(5): %+v, want 2 pages, 5 tokens", st)
	}
	p, err = c.Begin(ctx, linear(0, 5, 6))
	must(t, err)
	putTags(t, c, p, tagsRange(100, 6))
	must(t, p.End())
	want := append(tagsRange(0, 5), tagsRange(100, 6)...)
	if diff := cmp.Diff(want, seqTags(t, c, 0)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	must(t, c.Truncate(0, 8))
	must(t, c.Truncate(0, 8)) // idempotent
	must(t, c.Truncate(0, 0))
	if st := c.Stats(); st.PagesInUse != 0 || st.Sequences != 1 {
		t.Errorf("after Truncate(0): %+v, want no pages and the sequence kept", st)
	}
	for _, n := range []int32{-1, 1} {
		if err := c.Truncate(0, n); !errors.Is(err, ErrRange) {
			t.Errorf("Truncate(%d) of empty = %v, want ErrRange", n, err)
		}
	}
	must(t, c.Truncate(77, 0))
	if err := c.Truncate(77, 3); !errors.Is(err, ErrRange) {
		t.Errorf("Truncate of unknown sequence = %v, want ErrRange", err)
	}
	checkInvariants(t, c)
}

func TestFork(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 10))
	must(t, err)
	putTags(t, c, p, tagsRange(0, 10))
	must(t, p.End())

	must(t, c.Fork(0, 1, 6)) // pages 0 and 1 shared; page 1 is half used by the fork
	if got, want := c.Stats(), (Stats{Pages: 16, PagesInUse: 3, PagesFree: 13, PagesShared: 2, Sequences: 2, Tokens: 16}); got != want {
		t.Errorf("after Fork: %+v, want %+v", got, want)
	}
	if diff := cmp.Diff(tagsRange(0, 6), seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork history (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)

	// Writing into the fork copies its shared tail page and leaves the source as it was.
	p, err = c.Begin(ctx, linear(1, 6, 3))
	must(t, err)
	putTags(t, c, p, []int{100, 101, 102})
	must(t, p.End())
	if diff := cmp.Diff(tagsRange(0, 10), seqTags(t, c, 0)); diff != "" {
		t.Errorf("source changed by a write after fork (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(tagsRange(0, 6), 100, 101, 102), seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork (-want +got):\n%s", diff)
	}
	st := c.Stats()
	if st.PagesShared != 1 {
		t.Errorf("untouched page 0 should stay shared: %+v", st)
	}
	c.mu.Lock()
	s0, s1 := c.seqs[0], c.seqs[1]
	if s0.pages[0] != s1.pages[0] || s0.pages[1] == s1.pages[1] {
		t.Errorf("pages after write: source %v, fork %v; want first shared, second copied", s0.pages, s1.pages)
	}
	c.mu.Unlock()

	// Writing into the source's tail page (now private) needs no copy.
	p, err = c.Begin(ctx, linear(0, 10, 1))
	must(t, err)
	putTags(t, c, p, []int{200})
	must(t, p.End())
	if diff := cmp.Diff(append(tagsRange(0, 6), 100, 101, 102), seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork changed by a write to the source (-want +got):\n%s", diff)
	}

	// Freeing the source keeps the shared page alive for the fork.
	c.Free(0)
	if diff := cmp.Diff(append(tagsRange(0, 6), 100, 101, 102), seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork after freeing the source (-want +got):\n%s", diff)
	}
	if st := c.Stats(); st.PagesShared != 0 || st.PagesInUse != 3 || st.Sequences != 1 {
		t.Errorf("after Free(0): %+v", st)
	}
	checkInvariants(t, c)

	// Forking onto an existing sequence replaces it; errors name the problem.
	must(t, c.Fork(1, 2, 9))
	must(t, c.Fork(1, 2, 4))
	if diff := cmp.Diff(tagsRange(0, 4), seqTags(t, c, 2)); diff != "" {
		t.Errorf("re-fork (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		src, dst, n int32
		want        error
	}{{1, 1, 2, ErrRange}, {1, 3, 10, ErrRange}, {1, 3, -1, ErrRange}, {9, 3, 1, ErrRange}} {
		if err := c.Fork(tc.src, tc.dst, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("Fork(%d, %d, %d) = %v, want %v", tc.src, tc.dst, tc.n, err, tc.want)
		}
	}
	must(t, c.Fork(9, 3, 0)) // an empty fork of nothing
	if c.Len(3) != 0 {
		t.Errorf("empty fork Len = %d", c.Len(3))
	}
	checkInvariants(t, c)
}

func TestCommitUnsharesForkedPages(t *testing.T) {
	// A tree pass ended, then its sequence was forked (beam search), then the
	// tree is committed: the moved rows must not leak into the fork.
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 3))
	must(t, err)
	putTags(t, c, p, tagsRange(0, 3))
	must(t, p.End())
	tree(t, c)
	must(t, c.Fork(0, 1, 8))
	must(t, c.Commit(0, []int32{0, 2, 4}))
	if diff := cmp.Diff([]int{0, 1, 2, 30, 32, 34}, seqTags(t, c, 0)); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 30, 31, 32, 33, 34}, seqTags(t, c, 1)); diff != "" {
		t.Errorf("fork (-want +got):\n%s", diff)
	}
	checkInvariants(t, c)
}

func TestErrFullAtomic(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 16}) // 4 pages
	p, err := c.Begin(ctx, linear(0, 0, 10))                                                  // 3 pages
	must(t, err)
	putTags(t, c, p, tagsRange(0, 10))
	must(t, p.End())
	must(t, c.Fork(0, 1, 10)) // shares all 3

	before := c.Stats()
	tries := []*input.Batch{
		// sequence 0 needs a copy of its shared tail page and a new page
		linear(0, 10, 3),
		// a new sequence 2 needs 1 page and sequence 1 a copy: 2 > 1 free
		func() *input.Batch {
			b := linear(2, 0, 1)
			b.Add(0, 10, 1, false)
			return b
		}(),
		// one new sequence wanting 2 pages
		linear(5, 0, 5),
	}
	for i, b := range tries {
		if _, err := c.Begin(ctx, b); !errors.Is(err, ErrFull) {
			t.Fatalf("try %d: Begin = %v, want ErrFull", i, err)
		}
		if got := c.Stats(); got != before {
			t.Fatalf("try %d: failed Begin changed Stats %+v → %+v", i, before, got)
		}
		checkInvariants(t, c)
	}
	// Exactly the free page fits: sequence 1 copies its tail page to append.
	p, err = c.Begin(ctx, linear(1, 10, 2))
	must(t, err)
	putTags(t, c, p, []int{50, 51})
	must(t, p.End())
	if diff := cmp.Diff(tagsRange(0, 10), seqTags(t, c, 0)); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	if _, err := c.Begin(ctx, linear(3, 0, 1)); !errors.Is(err, ErrFull) {
		t.Errorf("Begin on a full pool = %v, want ErrFull", err)
	}
	c.Free(1)
	p, err = c.Begin(ctx, linear(3, 0, 1))
	must(t, err)
	must(t, p.End())
	checkInvariants(t, c)
}

func TestBeginErrors(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64, MaxSeqLen: 6})
	bad := func(edit func(b *input.Batch)) *input.Batch {
		b := linear(0, 0, 3)
		edit(b)
		return b
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		b    *input.Batch
		want error
	}{
		{"empty", ctx, &input.Batch{}, ErrBatch},
		{"negative seq", ctx, bad(func(b *input.Batch) { b.Seq[1] = -1 }), ErrBatch},
		{"parent after row", ctx, bad(func(b *input.Batch) { b.Parent[1] = 2 }), ErrBatch},
		{"parent is self", ctx, bad(func(b *input.Batch) { b.Parent[1] = 1 }), ErrBatch},
		{"parent below -1", ctx, bad(func(b *input.Batch) { b.Parent[1] = -2 }), ErrBatch},
		{"parent of another seq", ctx, bad(func(b *input.Batch) { b.Seq[1] = 1; b.Parent[2] = 1 }), ErrBatch},
		{"short Parent", ctx, bad(func(b *input.Batch) { b.Parent = b.Parent[:2] }), ErrBatch},
		{"short Tokens", ctx, bad(func(b *input.Batch) { b.Tokens = b.Tokens[:1] }), ErrBatch},
		{"over MaxSeqLen", ctx, linear(0, 0, 7), ErrSeqLen},
		{"cancelled", cancelled, linear(0, 0, 1), context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Begin(tc.ctx, tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("Begin = %v, want %v", err, tc.want)
			}
			if st := c.Stats(); st != (Stats{Pages: 16, PagesFree: 16}) {
				t.Errorf("failed Begin left state behind: %+v", st)
			}
		})
	}
	// Parent nil means all rows extend the tail.
	b := linear(0, 0, 2)
	b.Parent = nil
	p, err := c.Begin(ctx, b)
	must(t, err)
	must(t, p.End())
	if _, err := c.Begin(ctx, linear(0, 2, 5)); !errors.Is(err, ErrSeqLen) {
		t.Errorf("2+5 tokens with MaxSeqLen 6: %v, want ErrSeqLen", err)
	}
}

func TestBusy(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 2))
	must(t, err)
	must(t, p.End())
	p, err = c.Begin(ctx, linear(0, 2, 1))
	must(t, err)
	before := c.Stats()
	b := linear(1, 0, 1)
	b.Add(0, 2, 0, false)
	if _, err := c.Begin(ctx, b); !errors.Is(err, ErrBusy) {
		t.Errorf("second Begin on a busy sequence = %v, want ErrBusy", err)
	}
	if got := c.Stats(); got != before {
		t.Errorf("failed Begin changed Stats: %+v → %+v (sequence 1 must not be created)", before, got)
	}
	for name, err := range map[string]error{
		"Truncate":  c.Truncate(0, 1),
		"Fork from": c.Fork(0, 5, 1),
		"Commit":    c.Commit(0, []int32{0}),
	} {
		if !errors.Is(err, ErrBusy) {
			t.Errorf("%s on a busy sequence = %v, want ErrBusy", name, err)
		}
	}
	if c.Len(0) != 2 {
		t.Errorf("Len during a pass = %d, want the committed 2", c.Len(0))
	}
	// Another sequence can run alongside.
	q, err := c.Begin(ctx, linear(1, 0, 1))
	must(t, err)
	if err := c.Fork(2, 1, 0); !errors.Is(err, ErrBusy) {
		t.Errorf("Fork into a busy sequence = %v, want ErrBusy", err)
	}
	if st := c.Stats(); st.Passes != 2 {
		t.Errorf("Passes = %d, want 2", st.Passes)
	}
	must(t, q.End())
	// Free during a pass is deferred to its end.
	c.Free(0)
	if c.Len(0) != 2 {
		t.Errorf("Free took effect during the pass")
	}
	must(t, p.End())
	if st := c.Stats(); st.Sequences != 1 || st.Passes != 0 {
		t.Errorf("after End of a freed sequence: %+v, want only sequence 1", st)
	}
	checkInvariants(t, c)
}

func TestAbort(t *testing.T) {
	ctx := t.Context()
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(ctx, linear(0, 0, 6))
	must(t, err)
	putTags(t, c, p, tagsRange(0, 6))
	must(t, p.End())
	must(t, c.Fork(0, 1, 6))
	before := c.Stats()

	b := linear(0, 6, 5) // copies the shared tail page, takes one more
	b.Add(0, 0, 2, false)
	p, err = c.Begin(ctx, b)
	must(t, err)
	putTags(t, c, p, tagsRange(50, 6))
	p.Abort()
	if got := c.Stats(); got != before {
		t.Errorf("Abort: Stats %+v, want %+v (pages back, sequence 2 forgotten)", got, before)
	}
	if diff := cmp.Diff(tagsRange(0, 6), seqTags(t, c, 0)); diff != "" {
		t.Errorf("history after Abort (-want +got):\n%s", diff)
	}
	// A commit record survives an aborted pass.
	must(t, c.Commit(0, []int32{0, 1}))
	if c.Len(0) != 2 {
		t.Errorf("Commit after Abort: Len %d, want 2", c.Len(0))
	}
	// Free during a pass then Abort drops the sequence.
	p, err = c.Begin(ctx, linear(1, 6, 1))
	must(t, err)
	c.Free(1)
	p.Abort()
	if st := c.Stats(); st.Sequences != 1 {
		t.Errorf("Free then Abort: %+v", st)
	}
	checkInvariants(t, c)
}

func TestEndTwice(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, MaxTokens: 8})
	p, err := c.Begin(t.Context(), linear(0, 0, 2))
	must(t, err)
	must(t, p.End())
	if err := p.End(); !errors.Is(err, ErrEnded) {
		t.Errorf("second End = %v, want ErrEnded", err)
	}
	p.Abort() // no effect
	if c.Len(0) != 2 || c.Stats().Passes != 0 {
		t.Errorf("after End, End, Abort: Len %d, %+v", c.Len(0), c.Stats())
	}
	checkInvariants(t, c)
}

func TestPutPanicsOnBadLength(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 2, HeadDim: 2, MaxTokens: 8})
	p, err := c.Begin(t.Context(), linear(0, 0, 2))
	must(t, err)
	defer p.Abort()
	defer func() {
		if r := recover(); r == nil {
			t.Error("Put with 3 floats for 2 rows of 4 did not panic")
		}
	}()
	p.Layer(0).Put(make([]float32, 3), make([]float32, 8))
}

// TestConcurrentPasses runs decode loops of different sequences from different
// goroutines, each overlapping its passes with the others (run with -race).
func TestConcurrentPasses(t *testing.T) {
	const workers, steps = 4, 60
	o := Options{Layers: 3, KVHeads: 2, HeadDim: 4, PageTokens: 4, MaxTokens: workers * steps}
	t.Run("unbounded", func(t *testing.T) { concurrentPasses(t, o) })
	// Under a budget of 100 of the 180 frames: passes of the four
	// sequences pin at most 4×15 frames per layer, the other 36 are
	// ristretto's, the rest goes through the spill file.
	o.Budget, o.PassFrames, o.SpillDir = 100*4*2*8*4, 64, t.TempDir()
	t.Run("budget", func(t *testing.T) { concurrentPasses(t, o) })
	// F16 pages: frames of half the bytes, so the same budget in frames is
	// half the bytes.
	o.Budget, o.DType = 0, tensor.F16
	t.Run("f16", func(t *testing.T) { withF16(func() { concurrentPasses(t, o) }) })
	o.Budget = 100 * 4 * 2 * 8 * 2
	t.Run("f16 budget", func(t *testing.T) {
		withF16(func() { concurrentPasses(t, o) })
		c := mustNew(t, o)
		defer c.Close()
		if fb, sp := c.FrameBytes(), c.Stats().Spill; fb != 4*2*8*2 || sp.Frames != 100 {
			t.Errorf("f16 frames: %d bytes, %d frames; want %d bytes, 100 frames", fb, sp.Frames, 4*2*8*2)
		}
	})
}

func concurrentPasses(t *testing.T, o Options) {
	const workers, steps = 4, 60
	c := mustNew(t, o)
	defer c.Close()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			seq := int32(w)
			rowF := c.rowF
			k, v := make([]float32, 2*rowF), make([]float32, 2*rowF)
			b := &input.Batch{}
			for step := 0; step < steps; step += 2 {
				b.Reset()
				b.Add(0, int32(step), seq, false)
				b.Add(0, int32(step+1), seq, true)
				p, err := c.Begin(ctx, b)
				if err != nil {
					errs <- err
					return
				}
				for l := range 3 {
					for r := range 2 {
						tagRow(k[r*rowF:(r+1)*rowF], w*1000+step+r, l)
						for j := range rowF {
							v[r*rowF+j] = -k[r*rowF+j]
						}
					}
					p.Layer(l).Put(k, v)
					kv := p.Layer(l).View(seq)
					if kv.Len != step+2 {
						errs <- fmt.Errorf("seq %d step %d: Len %d", seq, step, kv.Len)
						return
					}
					keys, _ := readKV(kv, rowF)
					want := make([]float32, rowF)
					for j := range kv.Len {
						tagRow(want, w*1000+j, l)
						if row := keys[j][0]; row != want[0] {
							errs <- fmt.Errorf("seq %d layer %d slot %d: %v, want %v", seq, l, j, row, want[0])
							return
						}
					}
				}
				if step%10 == 8 {
					_ = c.Stats() // readers of shared state alongside
				}
				if err := p.End(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range workers {
		if diff := cmp.Diff(tagsRange(w*1000, steps), seqTags(t, c, int32(w))); diff != "" {
			t.Errorf("sequence %d (-want +got):\n%s", w, diff)
		}
	}
	checkInvariants(t, c)
	if sp := c.Stats().Spill; o.Budget > 0 && (sp.Spills == 0 || sp.Reloads == 0 || sp.Resident > sp.Frames) {
		t.Errorf("under a budget of %d frames: %+v", sp.Frames, sp)
	}
}

// TestDecodeNoAllocs: once the pool's pages are allocated, a decode step
// (Begin, Put and View in every layer, Mask, End) allocates nothing, including
// across page boundaries and for a small draft tree.
func TestDecodeNoAllocs(t *testing.T) {
	const layers, steps = 4, 64
	c := mustNew(t, Options{Layers: layers, KVHeads: 2, HeadDim: 8, PageTokens: 4, MaxTokens: 256})
	ctx := t.Context()
	k := make([]float32, 5*c.rowF)
	v := make([]float32, 5*c.rowF)
	lin := &input.Batch{}
	trees := treeBatch()
	step := func(b *input.Batch) {
		p, err := c.Begin(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		n := b.Len() * c.rowF
		for l := range layers {
			p.Layer(l).Put(k[:n], v[:n])
			_ = p.Layer(l).View(0)
		}
		_ = p.Mask()
		_ = p.Runs()
		if err := p.End(); err != nil {
			t.Fatal(err)
		}
	}
	warm := func() {
		must(t, c.Truncate(0, 0))
		for i := range steps {
			lin.Reset()
			lin.Add(0, int32(i), 0, true)
			step(lin)
		}
		step(trees)
		must(t, c.Commit(0, []int32{0, 2, 4}))
	}
	warm()
	if a := testing.AllocsPerRun(5, warm); a != 0 {
		t.Errorf("a decode loop of %d steps allocates %v times", steps, a)
	}
}

func TestViewLenAndPages(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: 4, MaxTokens: 64})
	p, err := c.Begin(t.Context(), linear(0, 0, 5))
	must(t, err)
	kv := p.Layer(0).View(0)
	if kv.Len != 5 || len(kv.K) != 2 || len(kv.V) != 2 || kv.PageTokens != 4 || len(kv.K[0]) != 4 {
		t.Errorf("View = Len %d, %d/%d pages of %d, PageTokens %d; want 5, 2 pages of 4", kv.Len, len(kv.K), len(kv.V), len(kv.K[0]), kv.PageTokens)
	}
	must(t, p.End())
}

// TestF16Bytes: F16 pages take half the bytes per token and per frame.
func TestF16Bytes(t *testing.T) {
	o := Options{Layers: 12, KVHeads: 12, HeadDim: 64, MaxTokens: 64}
	c32 := mustNew(t, o)
	o.DType = tensor.F16
	c16 := mustNew(t, o)
	if got, want := c32.BytesPerToken(), int64(2*12*768*4); got != want {
		t.Errorf("f32 BytesPerToken = %d, want %d", got, want)
	}
	if got, want := c16.BytesPerToken(), int64(2*12*768*2); got != want {
		t.Errorf("f16 BytesPerToken = %d, want %d", got, want)
	}
	if got, want := c16.FrameBytes(), c32.FrameBytes()/2; got != want {
		t.Errorf("f16 FrameBytes = %d, want %d", got, want)
	}
	// An odd number of values per page rounds the buffer up to whole words.
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 3, PageTokens: 3, MaxTokens: 9, DType: tensor.F16})
	if got := c.FrameBytes(); got != 2*4*5 {
		t.Errorf("f16 FrameBytes of 9-value pages = %d, want %d", got, 2*4*5)
	}
}

// TestReserve checks that Reserve gives the next pages to be handed out
// their memory, disjoint per page and layer, that it neither reallocates a
// page that has memory nor runs past the pool, that it does nothing under a
// budget, and that a reserved cache holds what a cache that allocates on
// first use holds, for F32 and F16 pages.
func TestReserve(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			o := Options{Layers: 2, KVHeads: 1, HeadDim: 3, PageTokens: 2, MaxTokens: 10, DType: dt}
			c, plain := mustNew(t, o), mustNew(t, o)
			c.Reserve(2)
			for p := range 5 {
				if got, want := c.k[0][p] != nil, p < 2; got != want {
					t.Fatalf("after Reserve(2): page %d has memory %v, want %v", p, got, want)
				}
			}
			first := &c.k[1][0][0]
			c.Reserve(100)
			if &c.k[1][0][0] != first {
				t.Error("Reserve reallocated a page that had memory")
			}
			seen := map[*float32]bool{}
			for l := range 2 {
				for p := range 5 {
					for _, b := range [][]float32{c.k[l][p], c.v[l][p]} {
						if len(b) != c.pageW || cap(b) != c.pageW || seen[&b[0]] {
							t.Fatalf("layer %d page %d: buffer len %d cap %d (want %d), shared %v", l, p, len(b), cap(b), c.pageW, seen[&b[0]])
						}
						seen[&b[0]] = true
					}
				}
			}
			ctx := t.Context()
			for _, cc := range []*Cache{c, plain} {
				p, err := cc.Begin(ctx, linear(0, 0, 7))
				must(t, err)
				for l := range 2 {
					k, v := make([]float32, 7*3), make([]float32, 7*3)
					for i := range k {
						k[i], v[i] = float32(i+l), -float32(i*l)
					}
					p.Layer(l).Put(k, v)
				}
				must(t, p.End())
			}
			for l := range 2 {
				for p := range 4 {
					if !slices.Equal(c.k[l][p], plain.k[l][p]) || !slices.Equal(c.v[l][p], plain.v[l][p]) {
						t.Errorf("layer %d page %d differs from the cache that allocates on first use", l, p)
					}
				}
			}
		})
	}
	b := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 8, Budget: 96, SpillDir: t.TempDir()})
	defer b.Close()
	b.Reserve(4)
	for p := range 4 {
		if b.k[0][p] != nil {
			t.Errorf("under a budget Reserve gave page %d memory", p)
		}
	}
}
