// Package chat renders a conversation into the prompt text a chat model was
// trained on, with the model's own Jinja chat template (GGUF metadata key
// tokenizer.chat_template, as Hugging Face's tokenizer_config.json carries
// it) or one of the built-in templates: llama-2, llama-3 and chatml.
//
// A template is rendered as Hugging Face's apply_chat_template does: with
// messages (a list of {role, content}), add_generation_prompt, bos_token and
// eos_token (the texts of the vocabulary's BOS and EOS tokens). The rendered
// text carries the special tokens as text; encode it with
// tokenizer.EncodeOptions.ParseSpecial so that they become their ids.
//
// # The Jinja engine
//
// Templates are compiled with github.com/ardanlabs/jinja (v1.8.0, the last
// release that builds with Go 1.26). We tried it and
// github.com/nikolalohinski/gonja/v2 on the llama-2, llama-3 and ChatML
// templates as their models ship them, on the Phi-3 template inside
// llama.cpp's phi-3 vocabulary file and on a Qwen2.5-style template with
// tools, namespace() and tojson. Both rendered those identically, but:
//
//   - gonja has no raise_exception (Llama 2's template calls it to reject
//     roles that do not alternate) and no strftime_now (Llama 3.1's);
//   - gonja fails on negative indices (messages[-1], common in templates);
//   - gonja panicked (integer divide by zero) on a %-format expression,
//     where a server must get an error;
//   - gonja treats a variable passed as None as undefined, unlike Jinja;
//   - gonja pulls in logrus, json-iterator, pkg/errors and x/exp; the
//     ardanlabs engine has no dependencies and was written for exactly
//     these templates.
//
// The ardanlabs engine is lenient where Jinja is strict (an attribute of an
// undefined value renders as "" instead of failing, and printf-style %
// formatting is not implemented); chat templates do not rely on either.
// Render still recovers from a panic in the engine and reports it as an
// error, so a bad template can never take a server down.
package chat

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tokenizer"
)

// KeyTemplate is the GGUF metadata key of a model's chat template.
const KeyTemplate = "tokenizer.chat_template"

// Errors; every error of this package wraps one of them.
var (
	// ErrTemplate: a template does not parse or fails to render.
	ErrTemplate = errors.New("chat: bad template")
	// ErrUnknown: a name is neither a built-in template nor a readable file.
	ErrUnknown = errors.New("chat: unknown template")
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // system, user, assistant (or what the template knows)
	Content string
	// ToolCalls are an assistant turn's tool calls as the API gave them
	// (a list of {id, type, function: {name, arguments}}), and ToolCallID
	// the call a tool turn answers: rendered as the message's tool_calls
	// and tool_call_id when set, as Hugging Face passes them.
	ToolCalls  []any
	ToolCallID string
}

// Options are the variables a template is rendered with besides messages.
type Options struct {
	// AddGenerationPrompt ends the text with the header of an assistant
	// turn, so the model continues with the reply.
	AddGenerationPrompt bool
	// BOS and EOS are the texts of the vocabulary's BOS and EOS tokens
	// (bos_token and eos_token); see Specials.
	BOS, EOS string
	// Tools are the functions the model may call, as the API gave them
	// (a list of {type: "function", function: {name, description,
	// parameters}}): the template's tools variable, unset when empty.
	Tools []any
}

// Template is a compiled chat template. It is immutable and safe for
// concurrent use.
type Template struct {
	// Name is the built-in name, or where the template came from (a file,
	// or a model file's metadata).
	Name   string
	Source string
	t      *jinja.Template
}

// Parse compiles a template; name says where it came from and is in errors.
func Parse(name, source string) (*Template, error) {
	t, err := compile(source)
	if err != nil {
		return nil, fmt.Errorf("chat: template %s: %v: %w", name, err, ErrTemplate)
	}
	return &Template{Name: name, Source: source, t: t}, nil
}

func compile(source string) (t *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("the template engine panicked: %v", r)
		}
	}()
	return jinja.Compile(source)
}

// Render renders msgs. An error (the template raising an exception, say for
// roles that do not alternate) wraps ErrTemplate and names the template.
func (t *Template) Render(msgs []Message, o Options) (out string, err error) {
	list := make([]any, len(msgs))
	for i, m := range msgs {
		msg := map[string]any{"role": m.Role, "content": m.Content}
		if len(m.ToolCalls) > 0 {
			msg["tool_calls"] = m.ToolCalls
		}
		if m.ToolCallID != "" {
			msg["tool_call_id"] = m.ToolCallID
		}
		list[i] = msg
	}
	data := map[string]any{
		"messages":              list,
		"add_generation_prompt": o.AddGenerationPrompt,
		"bos_token":             o.BOS,
		"eos_token":             o.EOS,
	}
	if len(o.Tools) > 0 {
		data["tools"] = o.Tools
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: template %s: the template engine panicked: %v: %w", t.Name, r, ErrTemplate)
		}
	}()
	out, err = t.t.Render(data)
	if err != nil {
		return "", fmt.Errorf("chat: template %s: %v: %w", t.Name, err, ErrTemplate)
	}
	return out, nil
}

// The built-in templates, written for this package. Each renders the prompt
// format its family's own template produces for system, user and assistant
// turns. Jinja string literals turn \n into a newline.
var builtins = map[string]string{
	// Llama 2 chat: "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]
	// {assistant} </s>"; the system prompt goes inside the first user turn,
	// and roles must alternate user/assistant.
	"llama-2": `{%- if messages and messages[0].role == 'system' -%}
{%- set system = messages[0].content -%}{%- set turns = messages[1:] -%}
{%- else -%}
{%- set system = '' -%}{%- set turns = messages -%}
{%- endif -%}
{%- for m in turns -%}
{%- if (m.role == 'user') != (loop.index0 % 2 == 0) -%}
{{- raise_exception('llama-2 chat: roles must alternate user/assistant/user/... after an optional system message') -}}
{%- endif -%}
{%- if m.role == 'user' -%}
{%- if loop.first and system -%}
{{- bos_token ~ '[INST] ' ~ ('<<SYS>>\n' ~ system ~ '\n<</SYS>>\n\n' ~ m.content) | trim ~ ' [/INST]' -}}
{%- else -%}
{{- bos_token ~ '[INST] ' ~ m.content | trim ~ ' [/INST]' -}}
{%- endif -%}
{%- else -%}
{{- ' ' ~ m.content | trim ~ ' ' ~ eos_token -}}
{%- endif -%}
{%- endfor -%}`,

	// Llama 3 instruct: BOS, then per turn
	// "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>".
	"llama-3": `{{- bos_token -}}
{%- for m in messages -%}
{{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ m.content | trim ~ '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}`,

	// ChatML: "<|im_start|>{role}\n{content}<|im_end|>\n" per turn.
	"chatml": `{%- for m in messages -%}
{{- '<|im_start|>' ~ m.role ~ '\n' ~ m.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`,
}

// Builtins lists the built-in template names.
func Builtins() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Builtin returns the built-in template called name.
func Builtin(name string) (*Template, error) {
	src, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("chat: %q is not a built-in template (have %s): %w", name, strings.Join(Builtins(), ", "), ErrUnknown)
	}
	return Parse(name, src)
}

// Load returns the built-in template called nameOrFile, or else compiles the
// Jinja file at that path.
func Load(nameOrFile string) (*Template, error) {
	if _, ok := builtins[nameOrFile]; ok {
		return Builtin(nameOrFile)
	}
	b, err := os.ReadFile(nameOrFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("chat: %q is neither a built-in template (%s) nor a file: %w", nameOrFile, strings.Join(Builtins(), ", "), ErrUnknown)
		}
		return nil, fmt.Errorf("chat: %w", err)
	}
	return Parse(nameOrFile, string(b))
}

// FromGGUF compiles a model file's tokenizer.chat_template; nil, nil when
// the file has none. A template that does not parse, or fails on a one-turn
// conversation, is an error naming the file.
func FromGGUF(f *gguf.File) (*Template, error) {
	if f == nil {
		return nil, nil
	}
	v, present := f.Get(KeyTemplate)
	if !present {
		return nil, nil
	}
	src, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("chat: %s: %s holds %T, expected a string: %w", f.Path, KeyTemplate, v, ErrTemplate)
	}
	name := f.Path + ": " + KeyTemplate
	t, err := Parse(name, src)
	if err != nil {
		return nil, err
	}
	if _, err := t.Render([]Message{{Role: "user", Content: "Hello"}}, Options{AddGenerationPrompt: true}); err != nil {
		return nil, err
	}
	return t, nil
}

// ForModel is the template a model's chat requests use: the one in its GGUF
// metadata (f may be nil for other formats), else a built-in chosen by its
// vocabulary (Default).
func ForModel(f *gguf.File, tok tokenizer.Tokenizer) (*Template, error) {
	t, err := FromGGUF(f)
	if err != nil || t != nil {
		return t, err
	}
	return Default(tok), nil
}

// Default picks a built-in template for a vocabulary without one: llama-3
// when it has <|eot_id|> and <|start_header_id|>, chatml when it has
// <|im_start|> and <|im_end|>, llama-2 when BOS is "<s>" (SentencePiece
// llama vocabularies), otherwise chatml.
func Default(tok tokenizer.Tokenizer) *Template {
	name := "chatml"
	switch {
	case has(tok, "<|eot_id|>") && has(tok, "<|start_header_id|>"):
		name = "llama-3"
	case has(tok, "<|im_start|>") && has(tok, "<|im_end|>"):
		name = "chatml"
	case tok != nil && tok.BOS() >= 0 && tok.Token(tok.BOS()) == "<s>":
		name = "llama-2"
	}
	t, err := Builtin(name)
	if err != nil {
		panic(err) // the built-ins compile: TestBuiltinsCompile
	}
	return t
}

// Specials returns the texts of tok's BOS and EOS tokens ("" when it has
// none), for Options.BOS and EOS.
func Specials(tok tokenizer.Tokenizer) (bos, eos string) {
	if id := tok.BOS(); id >= 0 {
		bos = tok.Token(id)
	}
	if id := tok.EOS(); id >= 0 {
		eos = tok.Token(id)
	}
	return bos, eos
}

// endOfTurn are the end-of-turn markers of the chat formats we know.
var endOfTurn = []string{"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}

// EndOfTurn returns the known end-of-turn markers that t's source writes
// (<|im_end|> for ChatML, <|eot_id|> for Llama 3, <|end|> for Phi-3): the
// model ends its reply with one of them. EOS is not listed: it always stops.
func (t *Template) EndOfTurn() []string {
	var out []string
	for _, m := range endOfTurn {
		if strings.Contains(t.Source, m) {
			out = append(out, m)
		}
	}
	return out
}

// Stops maps t's end-of-turn markers to tok's token ids (for
// session.Request.StopTokens); markers the vocabulary has no token for come
// back as text, to be matched as stop strings.
func (t *Template) Stops(tok tokenizer.Tokenizer) (ids []int32, texts []string) {
	for _, m := range t.EndOfTurn() {
		if id := lookup(tok, m); id >= 0 {
			ids = append(ids, id)
		} else {
			texts = append(texts, m)
		}
	}
	return ids, texts
}

func has(tok tokenizer.Tokenizer, piece string) bool { return lookup(tok, piece) >= 0 }

// lookup finds the id of a vocabulary entry by its text, -1 when none.
func lookup(tok tokenizer.Tokenizer, piece string) int32 {
	if tok == nil {
		return -1
	}
	// A linear scan, once per server start: cheap next to loading the weights.
	for id := range int32(tok.VocabSize()) {
		if tok.Token(id) == piece {
			return id
		}
	}
	return -1
}
