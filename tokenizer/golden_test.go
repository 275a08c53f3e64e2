package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGoldenLlamaCpp runs llama.cpp's tokenizer test vectors
// (tests/test-tokenizer-0): every case of ggml-vocab-<name>.gguf.inp must
// encode, without BOS and without parsing special tokens, to the ids on the
// same line of the .out file, which HF transformers produced.
func TestGoldenLlamaCpp(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2"} {
		t.Run(name, func(t *testing.T) {
			base := "llama-cpp-vocab/ggml-vocab-" + name + ".gguf"
			tok := loadGGUF(t, base)
			inp, err := os.ReadFile(modelFile(t, base+".inp"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(modelFile(t, base+".out"))
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			if cases[len(cases)-1] != "" {
				t.Fatalf("%s.inp does not end with the separator", base)
			}
			cases = cases[:len(cases)-1] // the trailing separator starts no case
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(cases) != len(lines) || len(cases) < 40 {
				t.Fatalf("%d cases in .inp, %d lines in .out", len(cases), len(lines))
			}
			for i, text := range cases {
				want := []int32{}
				for _, f := range strings.Fields(lines[i]) {
					id, err := strconv.ParseInt(f, 10, 32)
					if err != nil {
						t.Fatalf(".out line %d: %v", i+1, err)
					}
					want = append(want, int32(id))
				}
				got := tok.Encode(text, EncodeOptions{})
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("case %d %q (-want +got):\n%s", i, text, diff)
				}
			}
		})
	}
}
