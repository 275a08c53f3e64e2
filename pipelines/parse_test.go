package pipelines

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// baseTOML is a valid pipeline whose line numbers the error tests rely on:
// edit() changes one spot and the test names the line it expects.
const baseTOML = `name = "t"

[[stage]]
id   = "tok"
kind = "tokenize"

[[stage]]
id   = "sched"
kind = "scheduler"

[[stage]]
id   = "embed"
kind = "embed"

[[stage]]
id   = "layers"
kind = "transformer_layers"

[[stage]]
id   = "head"
kind = "head"

[[stage]]
id   = "samp"
kind = "sample"
  [stage.params]
  top_k = 10

[[stage]]
id   = "detok"
kind = "detokenize"
`

// edit returns baseTOML with each (old, new) pair replaced once; old must occur.
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	s := baseTOML
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("edit: %q not in baseTOML", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

func u64(v uint64) *uint64 { return &v }

func TestParseBase(t *testing.T) {
	p, err := Parse([]byte(baseTOML), "base.toml")
	if err != nil {
		t.Fatal(err)
	}
	samp := DefaultSampleParams()
	samp.TopK = 10
	want := &Pipeline{
		Name:   "t",
		Source: "base.toml",
		Stages: []StageSpec{
			{ID: "tok", Kind: KindTokenize, Buffer: 1, Workers: 1, Params: DefaultTokenizeParams(), Line: 3},
			{ID: "sched", Kind: KindScheduler, Buffer: 1, Workers: 1, Params: DefaultSchedulerParams(), Line: 7},
			{ID: "embed", Kind: KindEmbed, Buffer: 1, Workers: 1, Line: 11},
			{ID: "layers", Kind: KindTransformerLayers, Buffer: 1, Workers: 1, Params: DefaultTransformerLayersParams(), Line: 15},
			{ID: "head", Kind: KindHead, Buffer: 1, Workers: 1, Line: 19},
			{ID: "samp", Kind: KindSample, Buffer: 1, Workers: 1, Params: samp, Line: 23},
			{ID: "detok", Kind: KindDetokenize, Buffer: 1, Workers: 1, Line: 29},
		},
	}
	if diff := cmp.Diff(want, p, cmpopts.IgnoreUnexported(Pipeline{})); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseEveryKey(t *testing.T) {
	src := `name        = "full"
description = "every key set"
timeout     = "90s"

[model]
path        = "m/x.gguf"
tokenizer   = "tok512.bin"
tokenizer_pre = "qwen2"
tier        = "ram"
threads     = 2
context     = 512
page_tokens = 32

[[stage]]
id      = "tok"
kind    = "tokenize"
buffer  = 3
workers = 2
  [stage.params]
  add_bos = false

[[stage]]
id   = "sched"
kind = "scheduler"
params = { max_in_flight = 8, prefill_chunk = 16, max_new_tokens = 0, stop_at_eos = false }

[[stage]]
id   = "embed"
kind = "embed"
fuse = true
  [stage.params]

[[stage]]
id   = "layers"
kind = "transformer_layers"
  [stage.params]
  prefetch_ahead = 0

[[stage]]
id   = "head"
kind = "head"
fuse = false

[[stage]]
id   = "samp"
kind = "sample"
buffer = 2
  [stage.params]
  temperature    = 0.7
  top_k          = 0
  top_p          = 1.0
  min_p          = 0.0
  repeat_penalty = 1.1
  repeat_last_n  = 0
  seed           = 42

[[stage]]
id   = "detok"
kind = "detokenize"
`
	p, err := Parse([]byte(src), "full.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Pipeline{
		Name: "full", Description: "every key set", Timeout: 90 * time.Second, Source: "full.toml",
		Model: ModelSpec{Path: "m/x.gguf", Tokenizer: "tok512.bin", TokenizerPre: "qwen2", Tier: TierRAM, Threads: 2, Context: 512, PageTokens: 32},
		Stages: []StageSpec{
			{ID: "tok", Kind: KindTokenize, Buffer: 3, Workers: 2, Params: &TokenizeParams{AddBOS: false}, Line: 14},
			{ID: "sched", Kind: KindScheduler, Buffer: 1, Workers: 1, Line: 22,
				Params: &SchedulerParams{MaxInFlight: 8, PrefillChunk: 16, MaxNewTokens: 0, StopAtEOS: false}},
			{ID: "embed", Kind: KindEmbed, Buffer: 1, Workers: 1, Fuse: true, Line: 27},
			{ID: "layers", Kind: KindTransformerLayers, Buffer: 1, Workers: 1, Params: &TransformerLayersParams{}, Line: 33},
			{ID: "head", Kind: KindHead, Buffer: 1, Workers: 1, Line: 39},
			{ID: "samp", Kind: KindSample, Buffer: 2, Workers: 1, Line: 44, Params: &SampleParams{
				Temperature: 0.7, TopK: 0, TopP: 1, MinP: 0, RepeatPenalty: 1.1, RepeatLastN: 0, Seed: u64(42)}},
			{ID: "detok", Kind: KindDetokenize, Buffer: 1, Workers: 1, Line: 57},
		},
	}
	if diff := cmp.Diff(want, p, cmpopts.IgnoreUnexported(Pipeline{})); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		name, value string
		want        time.Duration
	}{
		{"minutes", `"5m"`, 5 * time.Minute},
		{"zero string", `"0s"`, 0},
		{"bare zero string", `"0"`, 0},
		{"integer zero", `0`, 0},
		{"compound", `"1h30m"`, 90 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(edit(t, `name = "t"`, "name = \"t\"\ntimeout = "+tc.value)), "t.toml")
			if err != nil {
				t.Fatal(err)
			}
			if p.Timeout != tc.want {
				t.Errorf("Timeout = %v, want %v", p.Timeout, tc.want)
			}
		})
	}
}

// TestParseErrors checks each kind of problem: its sentinel and its exact
// message, file:line[:col] included.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		kind error
		want string // the whole error text
	}{
		{
			name: "syntax error has line and column",
			src:  edit(t, `id   = "head"`, `id   = "head`),
			kind: ErrSyntax,
			want: `pipelines: t.toml:20:13: strings cannot contain newlines`,
		},
		{
			name: "syntax error at start of line",
			src:  edit(t, `kind = "embed"`, `kind = "embed"`+"\n= 3"),
			kind: ErrSyntax,
			want: `pipelines: t.toml:14:1: unexpected '=': key name appears blank`,
		},
		{
			name: "duplicate toml key",
			src:  edit(t, `kind = "embed"`, "kind = \"embed\"\nkind = \"embed\""),
			kind: ErrSyntax,
			want: `pipelines: t.toml:14:1: Key 'stage.kind' has already been defined.`,
		},
		{
			name: "unknown params key names stage, key and line",
			src:  edit(t, "  top_k = 10", "  top_pp = 10"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:27: stage "samp": unknown key stage.params.top_pp`,
		},
		{
			name: "key valid in another stage is still unknown here",
			src:  edit(t, `kind = "tokenize"`, "kind = \"tokenize\"\n  [stage.params]\n  top_k = 3"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:7: stage "tok": unknown key stage.params.top_k`,
		},
		{
			name: "keys are matched exactly, not case-folded",
			src:  edit(t, "  top_k = 10", "  TOP_K = 10"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:27: stage "samp": unknown key stage.params.TOP_K`,
		},
		{
			name: "params for a kind without params",
			src:  edit(t, `kind = "head"`, "kind = \"head\"\n  [stage.params]\n  norm = 1"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:23: stage "head": unknown key stage.params.norm: kind "head" takes no params`,
		},
		{
			name: "unknown stage-level key",
			src:  edit(t, `id   = "embed"`, "id   = \"embed\"\nbuffers = 2"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:13: stage "embed": unknown key stage.buffers`,
		},
		{
			name: "unknown top-level key",
			src:  edit(t, `name = "t"`, "name = \"t\"\ntimeot = \"5m\""),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:2: unknown key timeot`,
		},
		{
			name: "unknown table",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[modle]\npath = \"x.gguf\""),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:2: unknown key modle`,
		},
		{
			name: "unknown model key",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\npath = \"x.gguf\"\ntheads = 2"),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:4: unknown key model.theads`,
		},
		{
			name: "unknown kind lists known kinds",
			src:  edit(t, `kind = "sample"`, `kind = "sampler"`),
			kind: ErrUnknownKind,
			want: `pipelines: t.toml:25: stage "samp": unknown kind "sampler"; known kinds: "tokenize", "scheduler", "embed", "transformer_layers", "head", "sample", "detokenize", "draft_tree", "verify", "beam"`,
		},
		{
			name: "missing kind",
			src:  edit(t, "kind = \"embed\"\n", ""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:11: stage "embed": missing kind; known kinds: "tokenize", "scheduler", "embed", "transformer_layers", "head", "sample", "detokenize", "draft_tree", "verify", "beam"`,
		},
		{
			name: "duplicate id",
			src:  edit(t, `id   = "head"`, `id   = "embed"`),
			kind: ErrDuplicateID,
			want: `pipelines: t.toml:19: stage "embed": duplicate id: stage #3 (line 11) already uses it; ids must be unique`,
		},
		{
			name: "missing id",
			src:  edit(t, "id   = \"head\"\n", ""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:19: stage #5: missing id (e.g. id = "sample"); every stage needs a unique id`,
		},
		{
			name: "ports do not fit: a stage between tokenize and scheduler that takes steps",
			src:  edit(t, "[[stage]]\nid   = \"sched\"", "[[stage]]\nid   = \"early\"\nkind = \"head\"\n\n[[stage]]\nid   = \"sched\""),
			kind: ErrStageOrder,
			want: "pipelines: t.toml:7: stage \"early\": kind \"head\" takes *sched.Step, but the stage before it, \"tok\" (kind \"tokenize\", line 3), gives *session.Session; kinds that take *session.Session: \"scheduler\", \"detokenize\"\n" +
				`pipelines: t.toml:11: stage "sched": kind "scheduler" takes *session.Session, but the stage before it, "early" (kind "head", line 7), gives *sched.Step; kinds that take *sched.Step: "embed", "transformer_layers", "head", "sample", "draft_tree", "verify", "beam"`,
		},
		{
			name: "no stage closes the loop",
			src:  edit(t, "[[stage]]\nid   = \"samp\"\nkind = \"sample\"\n  [stage.params]\n  top_k = 10\n", ""),
			kind: ErrStageOrder,
			want: "pipelines: t.toml:7: stage \"sched\": kind \"scheduler\" opens the decode loop, but no stage after it closes it; kinds that close it: \"sample\"\n" +
				`pipelines: t.toml:24: stage "detok": kind "detokenize" takes *session.Session, but the stage before it, "head" (kind "head", line 19), gives *sched.Step; kinds that take *sched.Step: "embed", "transformer_layers", "head", "sample", "draft_tree", "verify", "beam"`,
		},
		{
			name: "first stage does not take requests",
			src:  edit(t, "[[stage]]\nid   = \"tok\"\nkind = \"tokenize\"\n", ""),
			kind: ErrStageOrder,
			want: `pipelines: t.toml:4: stage "sched": kind "scheduler" takes *session.Session, but the first stage takes the requests, session.Request; kinds that take it: "tokenize"`,
		},
		{
			name: "last stage does not give results",
			src:  edit(t, "[[stage]]\nid   = \"detok\"\nkind = \"detokenize\"\n", ""),
			kind: ErrStageOrder,
			want: `pipelines: t.toml:23: stage "samp": kind "sample" gives *session.Session, but the last stage must give the results, stages.Result; kinds that give them: "detokenize"`,
		},
		{
			name: "loop opened twice",
			src:  edit(t, "[[stage]]\nid   = \"embed\"", "[[stage]]\nid   = \"s2\"\nkind = \"scheduler\"\n\n[[stage]]\nid   = \"embed\""),
			kind: ErrStageOrder,
			want: "pipelines: t.toml:11: stage \"s2\": kind \"scheduler\" takes *session.Session, but the stage before it, \"sched\" (kind \"scheduler\", line 7), gives *sched.Step; kinds that take *sched.Step: \"embed\", \"transformer_layers\", \"head\", \"sample\", \"draft_tree\", \"verify\", \"beam\"\n" +
				`pipelines: t.toml:11: stage "s2": kind "scheduler" opens the decode loop, but stage "sched" (kind "scheduler", line 7) opened it already; a pipeline has one loop`,
		},
		{
			name: "misordered stages",
			src: edit(t, "[[stage]]\nid   = \"tok\"\nkind = \"tokenize\"\n", "",
				"[[stage]]\nid   = \"embed\"", "[[stage]]\nid   = \"tok\"\nkind = \"tokenize\"\n\n[[stage]]\nid   = \"embed\""),
			kind: ErrStageOrder,
			want: "pipelines: t.toml:4: stage \"sched\": kind \"scheduler\" takes *session.Session, but the first stage takes the requests, session.Request; kinds that take it: \"tokenize\"\n" +
				"pipelines: t.toml:8: stage \"tok\": kind \"tokenize\" takes session.Request, but the stage before it, \"sched\" (kind \"scheduler\", line 4), gives *sched.Step; kinds that take *sched.Step: \"embed\", \"transformer_layers\", \"head\", \"sample\", \"draft_tree\", \"verify\", \"beam\"\n" +
				`pipelines: t.toml:12: stage "embed": kind "embed" takes *sched.Step, but the stage before it, "tok" (kind "tokenize", line 8), gives *session.Session; kinds that take *session.Session: "scheduler", "detokenize"`,
		},
		{
			name: "no stages",
			src:  "name = \"t\"\n",
			kind: ErrStageOrder,
			want: `pipelines: t.toml: no [[stage]] entries; want stages from session.Request to stages.Result that open and close the decode loop, as in the greedy preset`,
		},
		{
			name: "stage written as a table",
			src:  "name = \"t\"\n[stage]\nid = \"x\"\n",
			kind: ErrInvalid,
			want: `pipelines: t.toml:2: stage: got a table; want an array of tables, written [[stage]]`,
		},
		{
			name: "params not a table",
			src:  edit(t, `kind = "embed"`, "kind = \"embed\"\nparams = 3"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:14: stage "embed": params: got integer 3; want a table, written [stage.params]`,
		},
		{
			name: "missing name",
			src:  edit(t, `name = "t"`, ``),
			kind: ErrInvalid,
			want: `pipelines: t.toml: missing required key name (e.g. name = "greedy")`,
		},
		{
			name: "empty name",
			src:  edit(t, `name = "t"`, `name = " "`),
			kind: ErrInvalid,
			want: `pipelines: t.toml:1: name is empty`,
		},
		{
			name: "name of wrong type",
			src:  edit(t, `name = "t"`, `name = 7`),
			kind: ErrInvalid,
			want: `pipelines: t.toml:1: name: got an integer; want a string`,
		},
		{
			name: "negative buffer",
			src:  edit(t, `kind = "head"`, "kind = \"head\"\nbuffer = -2"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:22: stage "head": buffer: -2 is less than 1`,
		},
		{
			name: "zero buffer",
			src:  edit(t, `kind = "head"`, "kind = \"head\"\nbuffer = 0"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:22: stage "head": buffer: 0 is less than 1`,
		},
		{
			name: "buffer of wrong type",
			src:  edit(t, `kind = "head"`, "kind = \"head\"\nbuffer = \"big\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:22: stage "head": buffer: got a string; want an integer`,
		},
		{
			name: "workers on a stateful kind",
			src:  edit(t, `kind = "sample"`, "kind = \"sample\"\nworkers = 2"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:26: stage "samp": workers: 2, but kind "sample" keeps state between inputs; only stateless kinds may have workers > 1`,
		},
		{
			name: "fuse of wrong type",
			src:  edit(t, `kind = "head"`, "kind = \"head\"\nfuse = 1"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:22: stage "head": fuse: got an integer; want true or false`,
		},
		{
			name: "fuse on a kind that cannot be fused",
			src:  edit(t, `kind = "tokenize"`, "kind = \"tokenize\"\nfuse = true"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:6: stage "tok": fuse = true, but kind "tokenize" cannot run on the goroutine of the stage before it; kinds that can: "scheduler", "embed", "transformer_layers", "head", "sample", "draft_tree", "verify", "beam"`,
		},
		{
			name: "zero workers",
			src:  edit(t, `kind = "tokenize"`, "kind = \"tokenize\"\nworkers = 0"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:6: stage "tok": workers: 0 is less than 1`,
		},
		{
			name: "negative temperature",
			src:  edit(t, "  top_k = 10", "  temperature = -0.5"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": temperature: -0.5 is less than 0`,
		},
		{
			name: "nan temperature",
			src:  edit(t, "  top_k = 10", "  temperature = nan"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": temperature: NaN is not a finite number`,
		},
		{
			name: "top_p above 1",
			src:  edit(t, "  top_k = 10", "  top_k = 10\n  top_p = 1.5"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:28: stage "samp": top_p: 1.5 is greater than 1`,
		},
		{
			name: "json_schema the engine cannot enforce",
			src:  edit(t, "  top_k = 10", "  top_k = 10\n  json_schema = '{\"type\":\"object\",\"patternProperties\":{}}'"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:28: stage "samp": json_schema: schema #: keyword "patternProperties": not supported (it cannot be enforced by the grammar)`,
		},
		{
			name: "grammar syntax error",
			src:  edit(t, "  top_k = 10", "  top_k = 10\n  grammar = 'root ::= [a-'"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:28: stage "samp": grammar: grammar: line 1 col 13: unterminated character class: expected ']', found end of input`,
		},
		{
			name: "negative top_k",
			src:  edit(t, "  top_k = 10", "  top_k = -1"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": top_k: -1 is less than 0`,
		},
		{
			name: "zero repeat_penalty",
			src:  edit(t, "  top_k = 10", "  repeat_penalty = 0.0"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": repeat_penalty: 0 is not allowed; want a number > 0 (1 = off)`,
		},
		{
			name: "negative seed",
			src:  edit(t, "  top_k = 10", "  seed = -1"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": seed: -1 is negative; want an integer ≥ 0`,
		},
		{
			name: "params value of wrong type",
			src:  edit(t, "  top_k = 10", "  top_k = 1.5"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:27: stage "samp": params.top_k: got a float; want an integer`,
		},
		{
			name: "zero max_in_flight",
			src:  edit(t, `kind = "scheduler"`, "kind = \"scheduler\"\nparams = { max_in_flight = 0 }"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:10: stage "sched": max_in_flight: 0 is less than 1`,
		},
		{
			name: "zero max_in_flight in a params table",
			src:  edit(t, `kind = "scheduler"`, "kind = \"scheduler\"\n  [stage.params]\n  prefill_chunk = 16\n  max_in_flight = 0"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:12: stage "sched": max_in_flight: 0 is less than 1`,
		},
		{
			name: "max_batch_tokens smaller than prefill_chunk",
			src:  edit(t, `kind = "scheduler"`, "kind = \"scheduler\"\n  [stage.params]\n  prefill_chunk = 32\n  max_batch_tokens = 16"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:12: stage "sched": max_batch_tokens: 16 is less than prefill_chunk = 32: one prompt chunk must fit in a step`,
		},
		{
			name: "max_batch_tokens smaller than max_in_flight",
			src:  edit(t, `kind = "scheduler"`, "kind = \"scheduler\"\n  [stage.params]\n  max_batch_tokens = 2\n  prefill_chunk = 2"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:11: stage "sched": max_batch_tokens: 2 is less than max_in_flight = 4: every generating sequence needs its row in each step`,
		},
		{
			name: "negative prefetch_ahead",
			src:  edit(t, `kind = "transformer_layers"`, "kind = \"transformer_layers\"\n[stage.params]\nprefetch_ahead = -1"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:19: stage "layers": prefetch_ahead: -1 is less than 0`,
		},
		{
			name: "bad duration",
			src:  edit(t, `name = "t"`, "name = \"t\"\ntimeout = \"5 minutes\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:2: timeout: invalid duration "5 minutes"; want e.g. "30s", "5m" or "0" for none`,
		},
		{
			name: "negative duration",
			src:  edit(t, `name = "t"`, "name = \"t\"\ntimeout = \"-1s\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:2: timeout: "-1s" is negative; want ≥ 0 (0 = none)`,
		},
		{
			name: "integer duration",
			src:  edit(t, `name = "t"`, "name = \"t\"\ntimeout = 300"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:2: timeout: integer 300 has no unit; want a duration string such as "5m" (an integer is accepted only as 0 = none)`,
		},
		{
			name: "budget unit typo",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\nmem_budget = \"512MiBs\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: model.mem_budget: byte size "512MiBs": unknown unit "MiBs" (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)`,
		},
		{
			name: "budget not a size",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\nmem_budget = true"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: model.mem_budget: got boolean true; want a size such as "512MiB" or "2GB", or an integer of bytes`,
		},
		{
			name: "kv budget unit typo",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[cache]\nkv_budget = \"64MB_\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: cache.kv_budget: byte size "64MB_": unknown unit "MB_" (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)`,
		},
		{
			name: "negative kv budget",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[cache]\nkv_budget = -4096"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: cache.kv_budget: -4096 is negative; want ≥ 0 (0 = none)`,
		},
		{
			name: "bad prefix cache size",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[cache]\nprefix_cache_size = \"lots\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: cache.prefix_cache_size: byte size "lots": want a number with an optional unit, e.g. 512MiB or 2GB`,
		},
		{
			name: "bad kv type",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[cache]\nkv_type = \"q8_0\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: cache.kv_type: "q8_0", want "f32" or "f16"`,
		},
		{
			name: "unknown cache key",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[cache]\nkv_bugdet = \"1MiB\""),
			kind: ErrUnknownKey,
			want: `pipelines: t.toml:3: unknown key cache.kv_bugdet`,
		},
		{
			name: "bad tier",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\ntier = \"disk\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: model.tier: "disk" is not a tier; want "auto", "ram", "mmap" or "ssd"`,
		},
		{
			name: "negative threads",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\nthreads = -1"),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: model.threads: -1 is negative; want ≥ 0 (0 = default)`,
		},
		{
			name: "model value of wrong type",
			src:  edit(t, `name = "t"`, "name = \"t\"\n[model]\ncontext = \"big\""),
			kind: ErrInvalid,
			want: `pipelines: t.toml:3: model.context: got a string; want an integer`,
		},
		{
			name: "several problems in line order",
			src:  edit(t, "  top_k = 10", "  top_pp = 10", `name = "t"`, "name = \"t\"\nfoo = 1", `kind = "head"`, "kind = \"head\"\nbuffer = 0"),
			kind: ErrUnknownKey,
			want: "pipelines: t.toml:2: unknown key foo\n" +
				"pipelines: t.toml:23: stage \"head\": buffer: 0 is less than 1\n" +
				"pipelines: t.toml:29: stage \"samp\": unknown key stage.params.top_pp",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.src), "t.toml")
			if err == nil {
				t.Fatalf("Parse succeeded (%+v); want error %q", p, tc.want)
			}
			if p != nil {
				t.Errorf("Parse returned a pipeline with an error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("errors.Is(err, %v) = false", tc.kind)
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Errorf("error is not a *Error: %T", err)
			}
		})
	}
}

func TestSyntaxErrorKeepsTOMLPosition(t *testing.T) {
	_, err := Parse([]byte(edit(t, `id   = "head"`, `id   = "head`)), "t.toml")
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v is not a *Error", err)
	}
	if e.Line != 20 || e.Col != 13 { // just past the unterminated string
		t.Errorf("Line:Col = %d:%d, want 20:13", e.Line, e.Col)
	}
	pe, ok := errors.AsType[toml.ParseError](err)
	if !ok {
		t.Fatal("the toml.ParseError is not reachable; the CLI needs it for ErrorWithPosition")
	}
	if !strings.Contains(pe.ErrorWithPosition(), "20 | id   = \"head") {
		t.Errorf("ErrorWithPosition does not show the line:\n%s", pe.ErrorWithPosition())
	}
}

func TestStageLinesForInlineArray(t *testing.T) {
	// Stages as an inline array have no [[stage]] headers: no lines, but
	// everything else works.
	src := `name = "inline"
stage = [
  { id = "a", kind = "tokenize" }, { id = "b", kind = "scheduler" }, { id = "c", kind = "embed" },
  { id = "d", kind = "transformer_layers" }, { id = "e", kind = "head" },
  { id = "f", kind = "sample", params = { temperature = 0.0 } }, { id = "g", kind = "detokenize" },
]
`
	p, err := Parse([]byte(src), "inline.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Stages {
		if s.Line != 0 {
			t.Errorf("stage %q: Line = %d, want 0 (unknown)", s.ID, s.Line)
		}
	}
	if got := p.Stages[5].Params.(*SampleParams).Temperature; got != 0 {
		t.Errorf("temperature = %v, want 0", got)
	}
	bad := strings.Replace(src, "temperature = 0.0", "temp = 0.0", 1)
	_, err = Parse([]byte(bad), "inline.toml")
	if want := `pipelines: inline.toml: stage "f": unknown key stage.params.temp`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestStageOfKind(t *testing.T) {
	p, err := Parse([]byte(baseTOML), "base.toml")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := p.StageOfKind(KindSample)
	if !ok || s.ID != "samp" {
		t.Fatalf("StageOfKind(sample) = %v, %v; want stage samp", s, ok)
	}
	s.Buffer = 7 // a pointer into the pipeline, so a builder can adjust it
	if p.Stages[5].Buffer != 7 {
		t.Error("StageOfKind returned a copy")
	}
	if _, ok := p.StageOfKind("beam"); ok {
		t.Error("StageOfKind(beam) found a stage")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "abs.gguf")
	tests := []struct {
		name, model, tokenizer string
		wantModel, wantTok     string
	}{
		{"relative", "models/x.bin", "tok512.bin", filepath.Join(dir, "models/x.bin"), filepath.Join(dir, "tok512.bin")},
		{"absolute", abs, "", abs, ""},
		{"parent", "../up.gguf", "", filepath.Join(filepath.Dir(dir), "up.gguf"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := edit(t, `name = "t"`, "name = \"t\"\n[model]\npath = '"+tc.model+"'\ntokenizer = '"+tc.tokenizer+"'")
			path := filepath.Join(dir, tc.name+".toml")
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if p.Model.Path != tc.wantModel || p.Model.Tokenizer != tc.wantTok {
				t.Errorf("Model = %q, %q; want %q, %q", p.Model.Path, p.Model.Tokenizer, tc.wantModel, tc.wantTok)
			}
			if p.Source != path {
				t.Errorf("Source = %q, want %q", p.Source, path)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.toml"))
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nope.toml") {
			t.Errorf("err = %v; want a not-exist error naming the file", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		path := filepath.Join(dir, "big.toml")
		if err := os.WriteFile(path, []byte(baseTOML+"#"+strings.Repeat("x", MaxFileBytes)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path) {
			t.Errorf("err = %v; want ErrInvalid naming the file", err)
		}
	})
	t.Run("error names the path", func(t *testing.T) {
		path := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(path, []byte(edit(t, "  top_k = 10", "  top_pp = 10")), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if want := "pipelines: " + path + `:27: stage "samp": unknown key stage.params.top_pp`; err == nil || err.Error() != want {
			t.Errorf("err = %v, want %q", err, want)
		}
	})
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		line string
		want header
		ok   bool
	}{
		{"[[stage]]", header{name: "stage", array: true}, true},
		{"  [ stage . params ]  # the params", header{name: "stage.params"}, true},
		{`["model"]`, header{name: "model"}, true},
		{"[model] x = 1", header{}, false},
		{`  ["tok", "draft"],`, header{}, false},
		{"[1, 2]", header{}, false},
		{"name = 1", header{}, false},
		{"[", header{}, false},
		{"[]", header{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, ok := parseHeader(tc.line)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseHeader(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestLineIndexSkipsMultilineStrings(t *testing.T) {
	src := "name = \"t\"\ndescription = \"\"\"\n[[stage]]\ntop_k = 1\n\"\"\"\n[[stage]]\nid = \"a\"\n"
	ix := newLineIndex(src)
	if diff := cmp.Diff([]span{{6, 8}}, ix.stages, cmp.AllowUnexported(span{})); diff != "" {
		t.Fatalf("stage spans (-want +got):\n%s", diff)
	}
	if got := ix.stageKeyLine(0, 1, []string{"id"}); got != 7 {
		t.Errorf("stageKeyLine(id) = %d, want 7", got)
	}
}

func TestTestdataFiles(t *testing.T) {
	tests := []struct {
		file    string
		wantErr []error
	}{
		{"full.toml", nil},
		{"spec-shape.toml", []error{ErrUnknownKey}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			p, err := Load(filepath.Join("testdata", tc.file))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join("testdata", "models/stories260K.bin"); p.Model.Path != want {
					t.Errorf("Model.Path = %q, want %q", p.Model.Path, want)
				}
				return
			}
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err = %v; want it to include %v", err, want)
				}
			}
		})
	}
}

func TestParseManyProblems(t *testing.T) {
	// 5000 unknown keys: reported quickly (the line lookup is indexed), and
	// capped so the message stays readable.
	var b strings.Builder
	b.WriteString(baseTOML)
	b.WriteString("[model]\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "k%d = 1\n", i)
	}
	_, err := Parse([]byte(b.String()), "many.toml")
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	if len(errs) != maxErrors+1 {
		t.Fatalf("%d errors, want %d", len(errs), maxErrors+1)
	}
	last := errs[len(errs)-1].Error()
	if !strings.HasSuffix(last, "more problems not shown") || !errors.Is(errs[len(errs)-1], ErrUnknownKey) {
		t.Errorf("last error = %q", last)
	}
}

func TestKVBudget(t *testing.T) {
	for src, want := range map[string]CacheSpec{
		`kv_budget = "64MiB"`:                          {KVBudget: 64 << 20},
		`kv_budget = 524288`:                           {KVBudget: 512 << 10},
		"kv_budget = \"1.5MiB\"\nspill_dir = \"/tmp\"": {KVBudget: 3 << 19, SpillDir: "/tmp"},
		`kv_type = "f16"`:                              {KVType: "f16"},
		`kv_type = "f32"`:                              {KVType: "f32"},
		`prefix_cache = false`:                         {NoPrefixCache: true},
		`prefix_cache = true`:                          {},
		`prefix_cache_size = "256MiB"`:                 {PrefixCacheSize: 256 << 20},
	} {
		p, err := Parse([]byte(edit(t, `name = "t"`, "name = \"t\"\n[cache]\n"+src)), "t.toml")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if p.Cache != want {
			t.Errorf("%s: [cache] %+v, want %+v", src, p.Cache, want)
		}
		if o := p.SchedOptions(); o.KVBudget != want.KVBudget || o.SpillDir != want.SpillDir || o.KVType != want.KVDType() ||
			o.PrefixCache == want.NoPrefixCache || o.PrefixCacheBytes != want.PrefixCacheSize {
			t.Errorf("%s: scheduler options %+v", src, o)
		}
	}
}

func TestMemBudget(t *testing.T) {
	for src, want := range map[string]int64{
		`mem_budget = "512MiB"`:  512 << 20,
		`mem_budget = "1.5 GiB"`: 3 << 29,
		`mem_budget = "2GB"`:     2e9,
		`mem_budget = 1048576`:   1 << 20,
		`tier = "ssd"`:           0,
	} {
		p, err := Parse([]byte(edit(t, `name = "t"`, "name = \"t\"\n[model]\n"+src)), "t.toml")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if p.Model.MemBudget != want {
			t.Errorf("%s: budget %d, want %d", src, p.Model.MemBudget, want)
		}
	}
}

// draft_tree's budget is an integer or "auto"; auto sizes the engine's rows
// for max_budget and prints as auto; anything else is an error naming the
// key's line.
func TestTreeBudgetAuto(t *testing.T) {
	src, err := os.ReadFile("specexec.toml")
	if err != nil {
		t.Fatal(err)
	}
	set := func(v string) string {
		return strings.Replace(string(src), "budget    = 64", "budget    = "+v, 1)
	}
	p, err := Parse([]byte(set(`"auto"`+"\n  max_budget = 96")), "s.toml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.StageOfKind(KindDraftTree)
	dp := s.Params.(*DraftTreeParams)
	o := dp.Options()
	if dp.Budget != AutoBudget || !o.AutoBudget || o.Tree.Budget != 96 || o.Needs().Rows != 96 {
		t.Errorf("budget %v: options %+v, needs %d rows; want auto up to 96", dp.Budget, o, o.Needs().Rows)
	}
	var sb strings.Builder
	p.Describe(&sb)
	if d := sb.String(); !strings.Contains(d, "budget=auto max_budget=96") {
		t.Errorf("describe does not show budget=auto max_budget=96:\n%s", d)
	}
	p, err = Parse([]byte(set("24")), "s.toml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ = p.StageOfKind(KindDraftTree)
	if o := s.Params.(*DraftTreeParams).Options(); o.AutoBudget || o.Tree.Budget != 24 {
		t.Errorf("budget 24: %+v", o)
	}
	for v, want := range map[string]string{`"fast"`: `budget "fast": want an integer or "auto"`, "0": "budget: 0 is less than 1", "1.5": "budget: got float64"} {
		if _, err := Parse([]byte(set(v)), "s.toml"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "s.toml:") {
			t.Errorf("budget = %s: err %v, want one naming the line and saying %q", v, err, want)
		}
	}
}

// ParseTreeBudget never panics; what it accepts prints back to itself.
func FuzzParseTreeBudget(f *testing.F) {
	for _, s := range []string{"auto", "64", "0", "-1", "x", "99999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseTreeBudget(s)
		if err != nil {
			return
		}
		if again, err := ParseTreeBudget(b.String()); err != nil || again != b {
			t.Fatalf("%q: %v prints as %q, which parses as %v, %v", s, b, b.String(), again, err)
		}
	})
}
