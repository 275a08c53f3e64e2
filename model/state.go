package model

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model/input"
)

// State carries one batch's activations between stages (llama2.c's RunState).
// It is owned by whichever stage holds it; buffers grow on first use and are
// reused by later batches when the State is recycled.
type State struct {
	Batch  *input.Batch
	Hidden []float32     // (rows, Dim)
	Logits []float32     // (len(Batch.Outputs), Vocab), written by Head
	Pass   *kvcache.Pass // this batch's reservation in the KV cache
	Mask   *kernels.Mask // KV.Mask(), kept here so every layer sees the same one
	// Adapter names the LoRA adapter set (Adaptable.AddAdapter) this batch
	// runs with; "" is the base model alone.
	Adapter string

	scratch [][]float32
	sub     kernels.Mask // AttendRows' mask of a run's listed rows
}

// Scratch returns scratch buffer i with at least n floats. Its contents are
// undefined; buffers with different i never alias.
func (st *State) Scratch(i, n int) []float32 {
	for len(st.scratch) <= i {
		st.scratch = append(st.scratch, nil)
	}
	if cap(st.scratch[i]) < n {
		st.scratch[i] = make([]float32, n)
	}
	return st.scratch[i][:n]
}

// Grow returns buf resized to n, reallocating only when it is too small.
func Grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
