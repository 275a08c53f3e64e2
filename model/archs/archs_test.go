package archs_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/archs"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/model/ref"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

var update = flag.Bool("update", false, "rewrite testdata/llamacpp-ids.json from llama.cpp (needs bench/node_modules)")

// The comparison: one synthetic file per (architecture, type), a fixed prompt
// of ids, 64 greedy tokens.
const (
	genLen  = 64
	golden  = "testdata/llamacpp-ids.json"
	idsMjs  = "../../bench/ids.mjs"
	nodeDir = "../../bench/node_modules"
)

var prompt = []int32{1, 45, 300, 17, 222, 9, 130}

// preset is synth's tiny shape with a feed-forward width of whole Q8_0
// blocks (tiny's 176 would keep ffn_down in F16, whose products llama.cpp
// runs on activations rounded to F16 and sluice on F32 ones).
var preset = synth.Preset{Name: "archtest", Dim: 64, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, Context: 256, Vocab: 512}

type archCase struct {
	arch    string
	headDim int // 0: width/heads
	seed    uint64
	layers  int     // 0: preset's
	window  int     // synth.Options.Window (gemma): 0 the architecture's
	softcap float32 // synth.Options.AttnSoftcap (gemma2): 0 the architecture's
}

// The seeds. At F32 every seed tried (11 to 30) gives llama.cpp's 64 ids. At
// Q8_0 most seeds part from llama.cpp somewhere in the 64 tokens, always at a
// near-tie (see nearTie), because the activations of a Q8_0 product are
// quantized with a float32 block scale in sluice and an f16 one in llama.cpp
// (kernels/actq8.go), and the generic kernels do not quantize them at all;
// each seed below is one whose 64 Q8_0 ids match llama.cpp's exactly on the
// quantizing (non-generic) kernels: 2 to 4 seeds in 20 per architecture.
var cases = []archCase{
	{arch: "llama3", seed: 13},
	{arch: "qwen2", seed: 14},
	{arch: "qwen3", headDim: 32, seed: 17}, // 4 heads of 32 over a width of 64
	{arch: "phi3", seed: 28},
	// gemma2: layer 0 local (a window of 16 of the 71 tokens), layer 1
	// global; an attention cap of 5 that binds (the real 50 hardly does at
	// these scores; the ids differ between the two, and llama.cpp agrees
	// with both at F32 for all six seeds tried).
	{arch: "gemma2", seed: 14, window: 16, softcap: 5},
	// gemma3: layers 0–4 local (window 16, RoPE base 10000), layer 5
	// global (base 1e6, linear scaling 8).
	{arch: "gemma3", seed: 13, layers: 6, window: 16},
}

var dtypes = []tensor.DType{tensor.F32, tensor.Q8_0}

func (c archCase) key(dt tensor.DType) string { return c.arch + "/" + dt.String() }

// write generates the case's file into dir.
func (c archCase) write(t *testing.T, dir string, dt tensor.DType) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%s-%v.gguf", c.arch, dt))
	p := preset
	if c.layers != 0 {
		p.Layers = c.layers
	}
	if err := synth.WriteFile(path, synth.Options{Preset: p, Arch: c.arch, HeadDim: c.headDim, DType: dt, Seed: c.seed,
		Window: c.window, AttnSoftcap: c.softcap, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// engineGreedy runs the engine's model (Embed, Blocks, Head over a paged KV
// cache): the prompt as one pass, then one token per pass. It returns the
// generated ids and the logits of every position from the last prompt token on.
func engineGreedy(t *testing.T, l *model.Loaded, n int) (ids []int32, logits [][]float32) {
	t.Helper()
	ctx := t.Context()
	m := l.Model
	a := m.Arch()
	kv, err := kvcache.New(kvcache.Options{Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
		PageTokens: 16, MaxTokens: 512, MaxSeqLen: a.Context, Window: a.SlidingWindow})
	if err != nil {
		t.Fatal(err)
	}
	pass := func(b *input.Batch) []float32 {
		p, err := kv.Begin(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		st := &model.State{Batch: b, KV: p, Mask: p.Mask()}
		err = m.Embed(ctx, st, l.Store)
		for _, blk := range m.Blocks() {
			if err == nil {
				err = blk.Forward(ctx, st, l.Store)
			}
		}
		if err == nil {
			err = m.Head(ctx, st, l.Store)
		}
		if err != nil {
			p.Abort()
			t.Fatal(err)
		}
		if err := p.End(); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(st.Logits[:a.Vocab])
	}
	b := &input.Batch{}
	for i, tok := range prompt {
		b.Add(tok, int32(i), 0, i == len(prompt)-1)
	}
	lg := pass(b)
	for len(ids) < n {
		logits = append(logits, lg)
		tok := argmax(lg)
		ids = append(ids, tok)
		if len(ids) == n {
			break
		}
		b := &input.Batch{}
		b.Add(tok, int32(len(prompt)+len(ids)-1), 0, true)
		lg = pass(b)
	}
	return ids, logits
}

// refLogits runs the oracle over the prompt and ids[:len(ids)-1] (the
// engine's choices, so both see the same text) and returns the logits from
// the last prompt token on, and what greedy decoding would have picked at each.
func refLogits(t *testing.T, tr *ref.Transformer, ids []int32) (picks []int32, logits [][]float32) {
	t.Helper()
	text := append(slices.Clone(prompt), ids[:len(ids)-1]...)
	for pos, tok := range text {
		lg, err := tr.Forward(tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		if pos >= len(prompt)-1 {
			logits = append(logits, slices.Clone(lg))
			picks = append(picks, argmax(lg))
		}
	}
	return picks, logits
}

// forced runs the engine over the prompt and ids[:len(ids)-1] as one pass
// and returns the logits from the last prompt token on.
func forced(t *testing.T, l *model.Loaded, ids []int32) [][]float32 {
	t.Helper()
	ctx := t.Context()
	m := l.Model
	a := m.Arch()
	kv, err := kvcache.New(kvcache.Options{Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
		PageTokens: 16, MaxTokens: 512, MaxSeqLen: a.Context, Window: a.SlidingWindow})
	if err != nil {
		t.Fatal(err)
	}
	b := &input.Batch{}
	text := append(slices.Clone(prompt), ids[:len(ids)-1]...)
	for i, tok := range text {
		b.Add(tok, int32(i), 0, i >= len(prompt)-1)
	}
	p, err := kv.Begin(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	st := &model.State{Batch: b, KV: p, Mask: p.Mask()}
	err = m.Embed(ctx, st, l.Store)
	for _, blk := range m.Blocks() {
		if err == nil {
			err = blk.Forward(ctx, st, l.Store)
		}
	}
	if err == nil {
		err = m.Head(ctx, st, l.Store)
	}
	if err != nil {
		p.Abort()
		t.Fatal(err)
	}
	if err := p.End(); err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for i := range ids {
		out = append(out, slices.Clone(st.Logits[i*a.Vocab:(i+1)*a.Vocab]))
	}
	return out
}

// nearTie is how far below sluice's best logit llama.cpp's choice may be
// when the two engines' arithmetic differs: 1e-3·(1+|best|) at F32 (no
// disagreement has been seen there); for Q8_0, whose activations llama.cpp
// quantizes with f16 scales, 2.5e-2·(1+|best|) on the kernels that quantize
// them with float32 ones (the largest gap measured over 9 seeds and three
// architectures was 0.063 under a best logit of 5.95, 1.1e-2·(1+|best|)),
// 5e-2·(1+|best|) on the generic kernels, which do not quantize them (phi3
// at its seed: 0.15 under 4.08, 3e-2·(1+|best|)).
func nearTie(dt tensor.DType, best float32) float64 {
	switch {
	case dt == tensor.F32:
		return 1e-3 * (1 + math.Abs(float64(best)))
	case kernels.Impl() == "generic":
		return 5e-2 * (1 + math.Abs(float64(best)))
	}
	return 2.5e-2 * (1 + math.Abs(float64(best)))
}

// relRMS is ‖a−b‖/‖b‖.
func relRMS(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		d += float64(a[i]-b[i]) * float64(a[i]-b[i])
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// argmax is greedy sampling: the first largest logit.
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func distinct(ids []int32) int {
	s := slices.Clone(ids)
	slices.Sort(s)
	return len(slices.Compact(s))
}

func readGolden(t *testing.T) map[string][]int32 {
	t.Helper()
	b, err := os.ReadFile(golden)
	if err != nil {
		if *update && os.IsNotExist(err) {
			return map[string][]int32{}
		}
		t.Fatal(err)
	}
	var g struct {
		Prompt []int32            `json:"prompt"`
		IDs    map[string][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	if !slices.Equal(g.Prompt, prompt) {
		t.Fatalf("%s: prompt %v, the test's is %v", golden, g.Prompt, prompt)
	}
	return g.IDs
}

// llamaCpp runs bench/ids.mjs on path, or reports why it cannot.
func llamaCpp(t *testing.T, path string) ([]int32, error) {
	t.Helper()
	if _, err := os.Stat(nodeDir); err != nil {
		return nil, fmt.Errorf("no %s (cd bench && npm install)", nodeDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("no node on PATH")
	}
	args := []string{idsMjs, "-m", path, "--n", fmt.Sprint(genLen), "--prompt", ""}
	for i, tok := range prompt {
		if i > 0 {
			args[len(args)-1] += ","
		}
		args[len(args)-1] += fmt.Sprint(tok)
	}
	cmd := exec.CommandContext(t.Context(), node, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %v: %v", args, err)
	}
	var r struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ids.mjs output %q: %v", out, err)
	}
	return r.IDs, nil
}

// For every architecture, at F32 and Q8_0: the engine's logits equal the
// oracle's (bit for bit with the generic kernels, within 1e-3 relative
// otherwise), greedy decoding is varied, and its 64 ids equal llama.cpp's:
// the committed golden always, and a live run through bench/'s llama.cpp
// when its node_modules are installed.
func TestGreedyMatchesLlamaCpp(t *testing.T) {
	want := readGolden(t)
	dir := t.TempDir()
	exact := kernels.Impl() == "generic"
	live := 0
	// Off the generic kernels, Q8_0 products quantize the activations to
	// int8 per 32-block as llama.cpp does (kernels/close_test.go derives one
	// product's bound) and ref does not; through 64 steps of these sensitive
	// models that rounding moves single logits by up to about 0.5, so Q8_0
	// is held to a relative RMS of each step's logits instead.
	for _, c := range cases {
		for _, dt := range dtypes {
			t.Run(c.key(dt), func(t *testing.T) {
				path := c.write(t, dir, dt)
				l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				ids, logits := engineGreedy(t, l, genLen)
				tr, err := ref.New(t.Context(), l.Source, l.Store, 0)
				if err != nil {
					t.Fatal(err)
				}
				rids, rlogits := refLogits(t, tr, ids)
				worst := 0.0
				for i := range logits {
					if dt != tensor.F32 && !exact {
						worst = max(worst, relRMS(logits[i], rlogits[i]))
						continue
					}
					for j := range logits[i] {
						g, w := logits[i][j], rlogits[i][j]
						if exact && math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("step %d logit %d: engine %v, ref %v (bit-identical with %s kernels)", i, j, g, w, kernels.Impl())
						}
						if !exact && math.Abs(float64(g-w)) > 1e-3*(1+math.Abs(float64(w))) {
							t.Fatalf("step %d logit %d: engine %v, ref %v", i, j, g, w)
						}
					}
				}
				if worst > 0.2 { // twice the worst measured (0.10, qwen2)
					t.Errorf("engine logits differ from ref's by a relative RMS of %.3g (> 0.2)", worst)
				} else if worst > 0 {
					t.Logf("engine vs ref: worst relative RMS of a step's logits %.3g", worst)
				}
				if exact && !slices.Equal(ids, rids) {
					t.Fatalf("engine ids %v, ref %v", ids, rids)
				}
				if d := distinct(ids); d < 16 {
					t.Errorf("%d distinct tokens in %d: greedy output too repetitive to compare engines (%v)", d, genLen, ids)
				}
				if cpp, err := llamaCpp(t, path); err != nil {
					t.Logf("llama.cpp not run: %v", err)
				} else {
					live++
					if *update {
						want[c.key(dt)] = cpp
					}
					if !slices.Equal(cpp, want[c.key(dt)]) {
						t.Errorf("llama.cpp now gives %v, golden %v", cpp, want[c.key(dt)])
					}
				}
				w, ok := want[c.key(dt)]
				if !ok {
					t.Fatalf("no golden for %s in %s (run with -update beside bench/node_modules)", c.key(dt), golden)
				}
				// Exact where the arithmetic is llama.cpp's up to rounding:
				// F32 everywhere, Q8_0 on the quantizing kernels.
				if (dt == tensor.F32 || !exact) && !slices.Equal(ids, w) {
					t.Errorf("sluice's greedy ids differ from llama.cpp's:\nsluice    %v\nllama.cpp %v", ids, w)
				}
				// Fed llama.cpp's text, sluice picks llama.cpp's token at
				// every step, or one whose logit beats it by a near-tie.
				worstTie := 0.0
				for i, lg := range forced(t, l, w) {
					a := argmax(lg)
					if a == w[i] {
						continue
					}
					gap := float64(lg[a] - lg[w[i]])
					worstTie = max(worstTie, gap/(1+math.Abs(float64(lg[a]))))
					if gap > nearTie(dt, lg[a]) {
						t.Errorf("step %d: sluice prefers %d (%v) to llama.cpp's %d (%v), beyond a near-tie", i, a, lg[a], w[i], lg[w[i]])
					}
				}
				if worstTie > 0 {
					t.Logf("fed llama.cpp's text, sluice differs at near-ties of up to %.2g·(1+|best|)", worstTie)
				}
			})
		}
	}
	if *update {
		if live == 0 {
			t.Fatal("-update needs llama.cpp (bench/node_modules)")
		}
		// One line per file, keys sorted.
		note, _ := json.Marshal("llama.cpp (node-llama-cpp, bench/ids.mjs: F32 KV cache, no flash attention) greedy ids on the synthetic files of model/archs/archs_test.go; regenerate with go test ./model/archs -update")
		pr, _ := json.Marshal(prompt)
		b := fmt.Appendf(nil, "{\n \"note\": %s,\n \"prompt\": %s,\n \"ids\": {\n", note, pr)
		keys := slices.Sorted(maps.Keys(want))
		for i, k := range keys {
			v, _ := json.Marshal(want[k])
			b = fmt.Appendf(b, "  %q: %s", k, v)
			if i < len(keys)-1 {
				b = append(b, ',')
			}
			b = append(b, '\n')
		}
		b = append(b, " }\n}"...)
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
