package server

import (
	"sync"

	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
)

// tokenLP is one generated token with its log-probability and the top
// alternatives, under the model's raw distribution: log-softmax of the
// logits before temperature, penalties and truncation (vLLM's default,
// "raw_logprobs"). The sampled token may lie outside the top alternatives.
type tokenLP struct {
	id     int32
	lp     float64
	top    []altLP
	offset int // byte offset of the token's text in the completion
}

type altLP struct {
	id int32
	lp float64
}

// lpCapture computes tokenLPs on the engine's goroutine: OnLogits keeps the
// last row of logits (copied into a buffer reused for every token) and its
// log-sum-exp; OnToken, which follows with the token sampled from that row,
// records the token's entry.
type lpCapture struct {
	k   int
	buf []float32
	lse float64

	mu  sync.Mutex
	out []tokenLP
}

func newCapture(k int) *lpCapture { return &lpCapture{k: k} }

func (c *lpCapture) logits(_ int32, logits []float32) {
	c.buf = append(c.buf[:0], logits...)
	c.lse = sample.LogSumExp(c.buf)
}

func (c *lpCapture) token(tok int32, _ string) {
	if tok < 0 || int(tok) >= len(c.buf) {
		return // the flush of an unfinished character: no token
	}
	e := tokenLP{id: tok, lp: float64(c.buf[tok]) - c.lse}
	if c.k > 0 {
		e.top = topK(c.buf, c.k, c.lse)
	}
	c.mu.Lock()
	c.out = append(c.out, e)
	c.mu.Unlock()
}

// get returns the entry of the i-th generated token (counting from 0). The
// stream delivers a token after its OnToken ran, so it is there.
func (c *lpCapture) get(i int) tokenLP {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < len(c.out) {
		return c.out[i]
	}
	return tokenLP{id: -1}
}

// topK is the k most likely ids (ties: lower id first), by insertion into a
// sorted list of k: O(vocab·k), k ≤ 20.
func topK(logits []float32, k int, lse float64) []altLP {
	top := make([]altLP, 0, k+1)
	for id, x := range logits {
		v := float64(x)
		if len(top) == k && v <= top[k-1].lp {
			continue
		}
		i := len(top)
		for i > 0 && top[i-1].lp < v {
			i--
		}
		top = append(top, altLP{})
		copy(top[i+1:], top[i:])
		top[i] = altLP{id: int32(id), lp: v}
		if len(top) > k {
			top = top[:k]
		}
	}
	for i := range top {
		top[i].lp -= lse
	}
	return top
}

// pieceText is a token's own text, as OpenAI reports tokens: its bytes
// (a byte piece is its raw byte) read as a string.
func pieceText(tok tokenizer.Tokenizer, id int32) string { return tok.Piece(-1, id) }

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}
