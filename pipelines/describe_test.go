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
stages (chain "sample"):
  #  id          kind                buffer  workers  params
  1  tokenize    tokenize            1       1        add_bos=true
  2  scheduler   scheduler           1       1        max_in_flight=4 prefill_chunk=64 max_batch_tokens=0 max_new_tokens=256 stop_at_eos=true
  3  embed       embed               1       1        -
  4  layers      transformer_layers  1       1        prefetch_ahead=1 blocks_per_stage=0
  5  head        head                1       1        -
  6  sample      sample              1       1        temperature=0 top_k=40 top_p=0.95 min_p=0.05 repeat_penalty=1 repeat_last_n=64 seed=unset
  7  detokenize  detokenize          1       1        -
  tokenize: text to token ids
  scheduler: continuous batching: one pass per step carries a row of every generating sequence plus prompt chunks, up to max_batch_tokens
  embed: token ids to hidden states
  layers: transformer blocks, blocks_per_stage to a stage (auto: all in one), with weight prefetch
  head: final norm and output projection to logits
  sample: picks the next token; feeds it back to the scheduler
  detokenize: token ids to text
feedback: sample → scheduler (next tokens; at most max_in_flight sequences in the loop)
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
