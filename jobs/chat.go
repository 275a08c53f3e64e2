package jobs

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/tokenizer"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

// ChatPrompt turns chat messages into prompt tokens as the chat endpoint
// does: roles normalised (developer is system), the template rendered with
// the generation prompt, BOS added only when the pipeline wants it and the
// template did not write it, special tokens parsed. Other writers of chat
// requests (sluice run's OpenAI Batch files) use it so a chat line gets the
// same prompt as the same request over HTTP.
type ChatPrompt struct {
	tmpl     *chat.Template
	tok      tokenizer.Tokenizer
	bos, eos string
	addBOS   bool
	stopIDs  []int32
	stopTxt  []string
}

// NewChatPrompt renders with tmpl, or the model's own template when nil.
func NewChatPrompt(eng *sluice.Engine, tmpl *chat.Template) (*ChatPrompt, error) {
	l := eng.Loaded()
	if tmpl == nil {
		var err error
		if tmpl, err = chat.ForModel(l.Source.GGUF, l.Tokenizer); err != nil {
			return nil, err
		}
	}
	c := &ChatPrompt{tmpl: tmpl, tok: l.Tokenizer, addBOS: eng.Pipeline().AddBOS()}
	c.stopIDs, c.stopTxt = tmpl.Stops(l.Tokenizer)
	c.bos, c.eos = chat.Specials(l.Tokenizer)
	return c, nil
}

// Template is the chat template in use.
func (c *ChatPrompt) Template() *chat.Template { return c.tmpl }

// Stops are the template's end-of-turn token ids (for Request.StopTokens)
// and the end-of-turn markers the vocabulary lacks (stop strings).
func (c *ChatPrompt) Stops() ([]int32, []string) { return c.stopIDs, c.stopTxt }

var chatRoles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

// ChatRole is the template role of an API role, false for an unknown one.
func ChatRole(role string) (string, bool) {
	r, ok := chatRoles[role]
	return r, ok
}

// RoleError is an unknown role in message Index.
type RoleError struct {
	Index int
	Role  string
}

func (e *RoleError) Error() string {
	return fmt.Sprintf("messages[%d]: invalid role %q: expected system, developer, user, assistant or tool", e.Index, e.Role)
}

// Tokens renders msgs (API roles) and tokenizes the text. An unknown role
// is a *RoleError; a template that rejects the messages, its error.
func (c *ChatPrompt) Tokens(msgs []chat.Message) ([]int32, error) {
	return c.TokensWithTools(msgs, nil)
}

// TokensWithTools is Tokens with the functions the model may call, given to
// the template as its tools variable (a template without one ignores them).
func (c *ChatPrompt) TokensWithTools(msgs []chat.Message, tools []any) ([]int32, error) {
	norm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		role, ok := ChatRole(m.Role)
		if !ok {
			return nil, &RoleError{Index: i, Role: m.Role}
		}
		norm[i] = m
		norm[i].Role = role
	}
	prompt, err := c.tmpl.Render(norm, chat.Options{AddGenerationPrompt: true, BOS: c.bos, EOS: c.eos, Tools: tools})
	if err != nil {
		return nil, err
	}
	// The template writes BOS as text when the model wants it; add it only
	// when the pipeline does and the template did not.
	addBOS := c.addBOS && (c.bos == "" || !strings.HasPrefix(prompt, c.bos))
	return c.tok.Encode(prompt, tokenizer.EncodeOptions{BOS: addBOS, ParseSpecial: true}), nil
}
