package chat_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tokenizer"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

var conversation = []chat.Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: " Hi there "},
	{Role: "assistant", Content: "Hello!"},
	{Role: "user", Content: `Say "x".`},
}

// The built-ins render exactly what the families' own templates render for
// the same conversation (checked against the templates as Llama 2 chat,
// Llama 3 instruct and ChatML models ship them).
func TestBuiltinGolden(t *testing.T) {
	for _, c := range []struct {
		name, bos, eos string
		msgs           []chat.Message
		want           string
	}{
		{"llama-2", "<s>", "</s>", conversation,
			"<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi there [/INST] Hello! </s><s>[INST] Say \"x\". [/INST]"},
		{"llama-2", "<s>", "</s>", conversation[1:2], "<s>[INST] Hi there [/INST]"},
		{"llama-3", "<|begin_of_text|>", "<|end_of_text|>", conversation,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nSay \"x\".<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"chatml", "<s>", "</s>", conversation,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi there <|im_end|>\n" +
				"<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nSay \"x\".<|im_end|>\n<|im_start|>assistant\n"},
	} {
		tm, err := chat.Builtin(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.Render(c.msgs, chat.Options{AddGenerationPrompt: true, BOS: c.bos, EOS: c.eos})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestBuiltinsCompile(t *testing.T) {
	for _, n := range chat.Builtins() {
		if _, err := chat.Load(n); err != nil {
			t.Fatal(err)
		}
	}
	if len(chat.Builtins()) != 3 {
		t.Fatalf("built-ins %v", chat.Builtins())
	}
}

func TestAddGenerationPromptFalse(t *testing.T) {
	tm, _ := chat.Builtin("chatml")
	got, err := tm.Render(conversation[1:3], chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\n Hi there <|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Llama 2 raises for roles that do not alternate: an error naming the
// template, not a prompt.
func TestRaiseException(t *testing.T) {
	tm, _ := chat.Builtin("llama-2")
	_, err := tm.Render([]chat.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, chat.Options{BOS: "<s>"})
	if !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), "alternate") || !strings.Contains(err.Error(), "llama-2") {
		t.Fatalf("err = %v", err)
	}
}

func TestEndOfTurn(t *testing.T) {
	for name, want := range map[string]string{"llama-2": "", "llama-3": "<|eot_id|>", "chatml": "<|im_end|>"} {
		tm, _ := chat.Builtin(name)
		if got := strings.Join(tm.EndOfTurn(), ","); got != want {
			t.Errorf("%s: end of turn %q, want %q", name, got, want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "t.jinja")
	os.WriteFile(good, []byte("{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"), 0o644)
	tm, err := chat.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tm.Render(conversation[1:2], chat.Options{}); got != "[user]  Hi there " {
		t.Fatalf("got %q", got)
	}
	bad := filepath.Join(dir, "bad.jinja")
	os.WriteFile(bad, []byte("{% if x %}unclosed"), 0o644)
	if _, err := chat.Load(bad); !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad template: %v", err)
	}
	if _, err := chat.Load("no-such-template"); !errors.Is(err, chat.ErrUnknown) || !strings.Contains(err.Error(), "chatml") {
		t.Fatalf("unknown: %v", err)
	}
}

func writeGGUF(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// An unparsable template in a model file is an error naming the file.
func TestFromGGUF(t *testing.T) {
	f := writeGGUF(t, map[string]any{chat.KeyTemplate: "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"})
	tm, err := chat.FromGGUF(f)
	if err != nil || tm == nil {
		t.Fatal(tm, err)
	}
	if got, _ := tm.Render(conversation[1:2], chat.Options{BOS: "<s>"}); got != "<s><user> Hi there " {
		t.Fatalf("got %q", got)
	}
	bad := writeGGUF(t, map[string]any{chat.KeyTemplate: "{% for m in messages %}{{ m.content }"})
	if _, err := chat.FromGGUF(bad); !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), bad.Path) {
		t.Fatalf("bad template: %v", err)
	}
	none := writeGGUF(t, map[string]any{"general.name": "x"})
	if tm, err := chat.FromGGUF(none); tm != nil || err != nil {
		t.Fatalf("no template: %v %v", tm, err)
	}
	typed := writeGGUF(t, map[string]any{chat.KeyTemplate: uint32(3)})
	if _, err := chat.FromGGUF(typed); !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), typed.Path) {
		t.Fatalf("mistyped template: %v", err)
	}
}

// The Phi-3 vocabulary in llama.cpp's test files carries its model's chat
// template: it parses, renders, and ends turns with <|end|>, a token of the
// vocabulary.
func TestRealTemplates(t *testing.T) {
	dir := testutil.Model(t, "llama-cpp-vocab")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	found := 0
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := chat.ForModel(f, tok)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Get(chat.KeyTemplate); !ok {
			continue
		}
		found++
		bos, eos := chat.Specials(tok)
		got, err := tm.Render(conversation[1:], chat.Options{AddGenerationPrompt: true, BOS: bos, EOS: eos})
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(p) == "ggml-vocab-phi-3.gguf" {
			want := "<s><|user|>\n Hi there <|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nSay \"x\".<|end|>\n<|assistant|>\n"
			if got != want {
				t.Fatalf("phi-3:\n got %q\nwant %q", got, want)
			}
			ids, texts := tm.Stops(tok)
			if len(ids) != 1 || tok.Token(ids[0]) != "<|end|>" || len(texts) != 0 {
				t.Fatalf("phi-3 stops: %v %q", ids, texts)
			}
			enc := tok.Encode(got, tokenizer.EncodeOptions{ParseSpecial: true})
			if enc[0] != tok.BOS() {
				t.Fatalf("rendered prompt does not start with BOS: %v", enc[:4])
			}
		}
	}
	if found == 0 {
		t.Skip("no vocabulary file carries a chat template")
	}
}

func TestDefault(t *testing.T) {
	dir := testutil.Model(t, "llama-cpp-vocab")
	f, err := gguf.Open(filepath.Join(dir, "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := chat.Default(tok).Name; got != "llama-2" {
		t.Fatalf("llama spm vocabulary: default %s, want llama-2", got)
	}
}
