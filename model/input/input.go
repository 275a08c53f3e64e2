// Package input holds Batch, the unit of work that flows through a forward pass.
// It is a leaf so that kvcache, spec and model can all speak of a batch without
// importing each other (ollama's model/input breaks the same cycle).
package input

// Batch is a set of token rows processed in one forward pass. Rows of several
// sequences may share a batch (continuous batching); a draft tree is a batch
// whose rows point at their parents, in this batch (Parent) or in an earlier
// pass of the same sequence (ParentSlot).
type Batch struct {
	Tokens    []int32 // token id per row
	Positions []int32 // absolute position per row (RoPE angle)
	Seq       []int32 // KV-cache sequence per row
	// Parent is the row within this batch that this row extends, or -1 when the
	// row extends its sequence's cached tail (plain text: every row after the
	// first of a sequence has Parent = previous row of that sequence, or -1 is
	// also accepted for linear chunks). Trees use it for the ancestor mask.
	Parent []int32
	// ParentSlot is, for a row with Parent -1, the KV slot of its parent when
	// that parent is a draft-tree node reserved by an earlier, ended pass of
	// the same sequence (or the tree's root, the last slot before the tree),
	// else -1. It lets a draft tree grow over several passes. nil means all -1;
	// when non-nil it has one entry per row. A row may not set both Parent and
	// ParentSlot.
	//
	// Positions stay the caller's: a node at depth d below a root at position
	// r usually has position r+d, whatever slot the cache gives it.
	ParentSlot []int32
	// Outputs lists rows that need logits, ascending (ollama prunes the rest
	// before the output head). Empty means none.
	Outputs []int32
}

// Len is the number of rows.
func (b *Batch) Len() int { return len(b.Tokens) }

// Reset empties b keeping its capacity.
func (b *Batch) Reset() {
	b.Tokens, b.Positions, b.Seq, b.Parent, b.Outputs = b.Tokens[:0], b.Positions[:0], b.Seq[:0], b.Parent[:0], b.Outputs[:0]
	if b.ParentSlot != nil {
		b.ParentSlot = b.ParentSlot[:0]
	}
}

// Add appends one row of a linear sequence and returns its index.
func (b *Batch) Add(token, pos, seq int32, output bool) int32 {
	return b.AddChild(token, pos, seq, -1, -1, output)
}

// AddChild appends one row whose parent is row parentRow of this batch or,
// with parentRow -1, the slot parentSlot of an earlier pass of seq (see
// Parent and ParentSlot); with both -1 it is Add. It returns the row's index.
// ParentSlot is allocated on the first row whose parentSlot is not -1.
func (b *Batch) AddChild(token, pos, seq, parentRow, parentSlot int32, output bool) int32 {
	i := int32(len(b.Tokens))
	b.Tokens = append(b.Tokens, token)
	b.Positions = append(b.Positions, pos)
	b.Seq = append(b.Seq, seq)
	b.Parent = append(b.Parent, parentRow)
	if b.ParentSlot == nil && parentSlot != -1 {
		b.ParentSlot = make([]int32, i, cap(b.Tokens))
		for j := range b.ParentSlot {
			b.ParentSlot[j] = -1
		}
	}
	if b.ParentSlot != nil {
		b.ParentSlot = append(b.ParentSlot, parentSlot)
	}
	if output {
		b.Outputs = append(b.Outputs, i)
	}
	return i
}
