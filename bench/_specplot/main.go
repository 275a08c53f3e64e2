// Command specplot draws tokens per target pass against the draft budget for
// SpecExec and for chain speculative decoding with the same number of draft
// tokens (the shape of the SpecExec paper's Figure 1), as an SVG. It runs the
// engine in-process through the public API, greedy, on a few prompts.
//
//	go run ./bench/_specplot -m stories260K.bin --tokenizer tok512.bin \
//	    --draft llama2xs_model.bin -o docs/specexec-budget.svg
//
// The underscore keeps it out of the module's ./... (it is a tool, not a test).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pipelines"
)

type point struct {
	Budget        int     `json:"budget"`
	TokensPerPass float64 `json:"tokens_per_target_pass"`
}

func main() {
	m := flag.String("m", "", "target model")
	tok := flag.String("tokenizer", "", "llama2.c tokenizer.bin")
	draft := flag.String("draft", "", "draft model")
	out := flag.String("o", "specexec-budget.svg", "SVG to write")
	budgets := flag.String("budgets", "16,32,64,128,256,512,1024", "draft budgets")
	depth := flag.Int("max-depth", 32, "SpecExec's max depth")
	n := flag.Int("n", 96, "tokens per prompt")
	chainMax := flag.Int("chain-max", 128, "longest chain tried (positions must fit the context)")
	flag.Parse()
	var bs []int
	for _, f := range strings.Split(*budgets, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fail(err)
		}
		bs = append(bs, b)
	}
	var spec, chain []point
	for _, b := range bs {
		spec = append(spec, point{b, run(*m, *tok, *draft, "specexec", b, *depth, *n)})
		if b <= *chainMax {
			chain = append(chain, point{b, run(*m, *tok, *draft, "chain", b, *depth, *n)})
		}
		fmt.Fprintf(os.Stderr, "budget %d: specexec %.2f, chain %v\n", b, spec[len(spec)-1].TokensPerPass, chain)
	}
	json.NewEncoder(os.Stdout).Encode(map[string][]point{"specexec": spec, "chain": chain})
	if err := os.WriteFile(*out, []byte(svg(spec, chain)), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "specplot:", err)
	os.Exit(1)
}

var prompts = []string{"", "Lily and Tom", "Once upon a time, there was a", "The cat", "One day, a little girl named", "The sun was"}

func run(m, tok, draft, mode string, budget, depth, n int) float64 {
	p, err := pipelines.Preset(map[string]string{"specexec": "specexec", "chain": "chain"}[mode])
	if err != nil {
		fail(err)
	}
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = len(prompts), n
	for i := range p.Stages {
		if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok {
			dp.Budget, dp.DraftMax, dp.MaxDepth, dp.MaxBeams = pipelines.TreeBudget(budget), budget, depth, min(budget, 64)
			dp.Branch = 8
		}
	}
	dtok := ""
	if strings.HasSuffix(draft, ".bin") {
		dtok = tok
	}
	p.Draft = &pipelines.ModelSpec{Path: draft, Tokenizer: dtok}
	ctx := context.Background()
	eng, err := sluice.Open(ctx, sluice.Options{Pipeline: p, Model: m, Tokenizer: tok})
	if err != nil {
		fail(err)
	}
	var wg sync.WaitGroup
	for i, pr := range prompts {
		wg.Add(1)
		if err := eng.Submit(ctx, sluice.Request{Index: uint64(i), Prompt: pr}, func(sluice.Result) { wg.Done() }); err != nil {
			fail(err)
		}
	}
	wg.Wait()
	st := eng.SpecStats()
	eng.Close()
	return st.TokensPerPass()
}

// svg draws both series on a log2 budget axis.
func svg(spec, chain []point) string {
	const W, H, L, R, T, B = 640.0, 420.0, 60.0, 20.0, 40.0, 50.0
	maxY := 1.0
	for _, s := range [][]point{spec, chain} {
		for _, p := range s {
			maxY = math.Max(maxY, p.TokensPerPass)
		}
	}
	maxY = math.Ceil(maxY + 0.5)
	lo, hi := math.Log2(float64(spec[0].Budget)), math.Log2(float64(spec[len(spec)-1].Budget))
	x := func(b int) float64 { return L + (math.Log2(float64(b))-lo)/math.Max(hi-lo, 1)*(W-L-R) }
	y := func(v float64) float64 { return H - B - v/maxY*(H-T-B) }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&sb, `<text x="%.0f" y="22" font-size="14" text-anchor="middle">tokens per target pass vs draft budget (stories260K, draft llama2xs-260k, greedy)</text>`+"\n", W/2)
	fmt.Fprintf(&sb, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&sb, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", L, T, L, H-B)
	for _, p := range spec {
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(p.Budget), H-B+18, p.Budget)
	}
	for v := 0.0; v <= maxY; v++ {
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">%.0f</text><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", L-6, y(v)+4, v, L, y(v), W-R, y(v))
	}
	fmt.Fprintf(&sb, `<text x="%.0f" y="%.0f" text-anchor="middle">draft budget (tree nodes; chain: draft tokens)</text>`+"\n", (L+W-R)/2, H-12)
	fmt.Fprintf(&sb, `<text transform="translate(16 %.0f) rotate(-90)" text-anchor="middle">tokens per target pass</text>`+"\n", (T+H-B)/2)
	series := func(ps []point, color, name string, ly float64) {
		var pts []string
		for _, p := range ps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Budget), y(p.TokensPerPass)))
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x(p.Budget), y(p.TokensPerPass), color)
		}
		fmt.Fprintf(&sb, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
		fmt.Fprintf(&sb, `<rect x="%.0f" y="%.0f" width="14" height="4" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", L+16, ly-4, color, L+36, ly, name)
	}
	series(spec, "#c0392b", "SpecExec (draft tree)", T+16)
	series(chain, "#2471a3", "chain speculative decoding", T+34)
	sb.WriteString("</svg>\n")
	return sb.String()
}
