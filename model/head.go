package model

import (
	"context"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/offload"
)

// HeadOptions describe an architecture's output head.
type HeadOptions struct {
	Norm, Output offload.Ref
	Dim, Vocab   int
	Eps          float32
	Pool         *kernels.Pool
}

// Head is the output head every architecture shares: RMSNorm of the rows
// listed in st.Batch.Outputs, then their projection onto the vocabulary into
// st.Logits (len(Outputs)·Vocab). It returns the normalised rows (scratch 0,
// valid until the next use of it), which LoRA's output adapters read; an
// architecture adds what is its own after it (gemma's final soft-capping).
func Head(ctx context.Context, st *State, w offload.Store, o HeadOptions) ([]float32, error) {
	dim, outs := o.Dim, st.Batch.Outputs
	st.Logits = Grow(st.Logits, len(outs)*o.Vocab)
	if len(outs) == 0 {
		return nil, nil
	}
	var normBuf []float32 // used only by a non-F32 norm (never in GGUF files llama.cpp writes)
	norm, pn, err := Vector(ctx, w, o.Norm, &normBuf)
	if err != nil {
		return nil, err
	}
	defer pn.Release()
	x := st.Scratch(0, len(outs)*dim)
	for j, r := range outs {
		kernels.RMSNorm(x[j*dim:(j+1)*dim], st.Hidden[int(r)*dim:(int(r)+1)*dim], norm, o.Eps)
	}
	out, po, err := Matrix(ctx, w, o.Output)
	if err != nil {
		return nil, err
	}
	defer po.Release()
	kernels.MatMul(o.Pool, st.Logits, out, x, len(outs))
	return x, nil
}

// Refs lists the weights given that are present (non-nil and valid), in the
// order given: a block's weight list, in the order it acquires them, for a
// store that streams them in that order.
func Refs(rs ...*offload.Ref) []offload.Ref {
	var refs []offload.Ref
	for _, r := range rs {
		if r != nil && r.Valid() {
			refs = append(refs, *r)
		}
	}
	return refs
}
