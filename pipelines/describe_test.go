package pipelines

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDescribeGreedy(t *testing.T) {
	p, err := Preset("greedy")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p.Describe(&b)
	want := `pipeline "greedy" from <preset greedy>
  greedy decoding (temperature 0): deterministic output
timeout: none
model:
  path         (not set: give one on the command line)
  tokenizer    (not set: from the model file)
  tier         auto (default)
  threads      GOMAXPROCS
  context      the model's context length
  page_tokens  the KV cache's default
cache:
  kv_type       f32
  prefix_cache  true
stages (session.Request → stages.Result):
  #  id          kind                in → out                            loop    buffer  workers  fuse   params
  1  tokenize    tokenize            session.Request → *session.Session  -       1       1        false  add_bos=true
  2  scheduler   scheduler           *session.Session → *sched.Step      opens   1       1        true   max_in_flight=4 prefill_chunk=64 max_batch_tokens=0 max_new_tokens=256 stop_at_eos=true
  3  embed       embed               *sched.Step → *sched.Step           inside  1       1        true   -
  4  layers      transformer_layers  *sched.Step → *sched.Step           inside  1       1        true   prefetch_ahead=1 blocks_per_stage=0
  5  head        head                *sched.Step → *sched.Step           inside  1       1        true   -
  6  sample      sample              *sched.Step → *session.Session      closes  1       1        true   temperature=0 top_k=40 top_p=0.95 min_p=0.05 repeat_penalty=1 repeat_last_n=64 seed=unset
  7  detokenize  detokenize          *session.Session → stages.Result    -       1       1        false  -
  tokenize: text to token ids
  scheduler: continuous batching: one pass per step carries a row of every generating sequence plus prompt chunks, up to max_batch_tokens
  embed: token ids to hidden states
  layers: transformer blocks, blocks_per_stage to a stage (auto: all in one), with weight prefetch
  head: final norm and output projection to logits
  sample: picks the next token; feeds it back to the scheduler
  detokenize: token ids to text
decode loop: scheduler opens it; sample closes it and feeds each step back to scheduler; embed, layers, head run inside it, once per step
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
}

func TestDescribeSetValues(t *testing.T) {
	src := edit(t, `name = "t"`, "name = \"t\"\ntimeout = \"2m\"\n[model]\npath = \"/m/x.gguf\"\ntier = \"ram\"\nthreads = 3",
		"  top_k = 10", "  top_k = 10\n  seed = 7")
	p, err := Parse([]byte(src), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p.Describe(&b)
	for _, want := range []string{
		"timeout: 2m0s per request\n",
		"  path         /m/x.gguf\n",
		"  tier         ram\n",
		"  threads      3\n",
		"top_k=10 ",
		"seed=7\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Describe lacks %q:\n%s", want, b.String())
		}
	}
}

func TestFormatParams(t *testing.T) {
	type odd struct {
		Plain  int
		Hidden int    `toml:"-"`
		Tagged string `toml:"tag,omitempty"`
		secret int
	}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, "-"},
		{"nil pointer", (*SampleParams)(nil), "-"},
		{"empty struct", &struct{}{}, "-"},
		{"not a struct", 3, "3"},
		{"tags", &odd{Plain: 1, Hidden: 2, Tagged: "x", secret: 4}, "Plain=1 tag=x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatParams(tc.in); got != tc.want {
				t.Errorf("formatParams = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribeUsesTheParsingRegistry(t *testing.T) {
	src := edit(t, "kind = \"sample\"\n  [stage.params]\n  top_k = 10", "kind = \"beam_close\"")
	p, err := beamRegistry(t).Parse([]byte(src), "beam.toml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p.Describe(&b)
	for _, want := range []string{
		"  6  samp    beam_close          *sched.Step → *session.Session      closes  1       1        false  beams=4 return=1\n",
		"  samp: beam search\n",
		"decode loop: sched opens it; samp closes it and feeds each step back to sched; embed, layers, head run inside it, once per step\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Describe lacks %q:\n%s", want, b.String())
		}
	}
}
