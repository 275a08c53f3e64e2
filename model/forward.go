package model

import (
	"context"

	"github.com/sluicehq/sluice/offload"
)

// Forward is one forward pass over st.Batch, for any model (a target or a
// draft): the embedding, every block in order, and the head's logits for the
// rows listed in st.Batch.Outputs. st.Pass must hold the batch's reservation in
// the model's KV cache. Ahead > 0 hints the store, before each block, about
// the weights of the block Ahead blocks further on (RunBlocks).
//
// The engine's stages run the same three parts one stage each (embed,
// transformer_layers, head), so that a streamed store's loader sees the
// hints as the pass moves; a draft model's passes call Forward whole.
func Forward(ctx context.Context, m Model, st *State, w offload.Store, ahead int) error {
	if err := m.Embed(ctx, st, w); err != nil {
		return err
	}
	blocks := m.Blocks()
	if err := RunBlocks(ctx, blocks, blocks, ahead, st, w); err != nil {
		return err
	}
	return m.Head(ctx, st, w)
}

// RunBlocks runs blocks (a run of consecutive blocks of all, the model's
// every block) over st in order. Before each block it hints the store about
// the weights of the block ahead blocks further down all, wrapping into the
// next pass, so a tier that loads from disk reads them while this block
// computes, and layer 0 of the next pass loads while the last layer
// computes. ahead ≤ 0 gives no hints. The store also hears the pass's rows
// (offload.HintRows).
func RunBlocks(ctx context.Context, blocks, all []Block, ahead int, st *State, w offload.Store) error {
	if st.Batch != nil {
		offload.HintRows(w, st.Batch.Len()) // a streamed store lays out layers for batches
	}
	for _, b := range blocks {
		if ahead > 0 && len(all) > 0 {
			w.Prefetch(all[(b.Index()+ahead)%len(all)].Weights()...)
		}
		if err := b.Forward(ctx, st, w); err != nil {
			return err
		}
	}
	return nil
}
