// Package input holds Batch, the unit of work that flows through a forward pass.
// It is a leaf so that kvcache, spec and model can all speak of a batch without
// importing each other (ollama's model/input breaks the same cycle).
package input

// Batch is a set of token rows processed in one forward pass. Rows of several
// sequences may share a batch (continuous batching); a draft tree is a batch
// whose rows point at their parents.
type Batch struct {
	Tokens    []int32 // token id per row
	Positions []int32 // absolute position per row (RoPE angle)
	Seq       []int32 // KV-cache sequence per row
	// Parent is the row within this batch that this row extends, or -1 when the
	// row extends its sequence's cached tail (plain text: every row after the
	// first of a sequence has Parent = previous row of that sequence, or -1 is
	// also accepted for linear chunks). Trees use it for the ancestor mask.
	Parent []int32
	// Outputs lists rows that need logits, ascending (ollama prunes the rest
	// before the output head). Empty means none.
	Outputs []int32
}

// Len is the number of rows.
func (b *Batch) Len() int { return len(b.Tokens) }

// Reset empties b keeping its capacity.
func (b *Batch) Reset() {
	b.Tokens, b.Positions, b.Seq, b.Parent, b.Outputs = b.Tokens[:0], b.Positions[:0], b.Seq[:0], b.Parent[:0], b.Outputs[:0]
}

// Add appends one row of a linear sequence and returns its index.
func (b *Batch) Add(token, pos, seq int32, output bool) int32 {
	i := int32(len(b.Tokens))
	b.Tokens = append(b.Tokens, token)
	b.Positions = append(b.Positions, pos)
	b.Seq = append(b.Seq, seq)
	b.Parent = append(b.Parent, -1)
	if output {
		b.Outputs = append(b.Outputs, i)
	}
	return i
}
