package model

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/offload"
)

// Arch is the hyperparameters the engine needs, read once from Config.
type Arch struct {
	Name                string // "llama"
	Dim, Hidden, Layers int
	Heads, KVHeads      int
	HeadDim, RopeDim    int
	Vocab, Context      int
	RopeBase, Eps       float32
	RopeStyle           kernels.RopeStyle
	SlidingWindow       int // 0 = none
	TiedOutput          bool
	BytesPerKVValue     int // cache element size (4: float32)
}

// KVBytesPerToken is the KV-cache size of one token: 2·L·G·d·bytes.
func (a Arch) KVBytesPerToken() int64 {
	return 2 * int64(a.Layers) * int64(a.KVHeads) * int64(a.HeadDim) * int64(a.BytesPerKVValue)
}

// Block is one transformer layer; the engine runs one stage per Block.
type Block interface {
	Index() int
	// Forward runs the block over st.Hidden in place, reading and writing the
	// KV cache through st.Pass.Layer(Index()).
	Forward(ctx context.Context, st *State, w offload.Store) error
	// Weights lists what the block reads (what a prefetcher would load).
	Weights() []offload.Ref
}

// Model is one architecture bound to one file's weights.
type Model interface {
	Arch() Arch
	// Embed fills st.Hidden from st.Batch.Tokens.
	Embed(ctx context.Context, st *State, w offload.Store) error
	Blocks() []Block
	// Head applies the final norm and the output matrix to the rows listed in
	// st.Batch.Outputs, writing len(Outputs)·Vocab logits into st.Logits.
	Head(ctx context.Context, st *State, w offload.Store) error
}

// Options are what an architecture constructor needs beyond the file.
type Options struct {
	Pool *kernels.Pool // kernel worker pool; nil runs kernels on the caller's goroutine
}

// Constructor binds an architecture to an opened file.
type Constructor func(src *Source, store offload.Store, o Options) (Model, error)

// Registry maps general.architecture to a constructor. It is a value so tests
// can build their own; Default is the one the CLI uses.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Constructor
}

// Default is the registry architectures add themselves to in init.
var Default Registry

// Register adds an architecture; a duplicate is an error.
func (r *Registry) Register(arch string, c Constructor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]Constructor{}
	}
	if _, dup := r.m[arch]; dup {
		return fmt.Errorf("model: architecture %q registered twice", arch)
	}
	r.m[arch] = c
	return nil
}

// MustRegister is Register for init functions.
func (r *Registry) MustRegister(arch string, c Constructor) {
	if err := r.Register(arch, c); err != nil {
		panic(err)
	}
}

// Lookup returns the constructor for arch.
func (r *Registry) Lookup(arch string) (Constructor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.m[arch]
	return c, ok
}

// Names lists the registered architectures, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var n []string
	for k := range r.m {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// Build finds src's architecture and constructs the model.
func (r *Registry) Build(src *Source, store offload.Store, o Options) (Model, error) {
	arch := src.Config.Architecture()
	c, ok := r.Lookup(arch)
	if !ok {
		known := strings.Join(r.Names(), ", ")
		if arch == "" {
			return nil, fmt.Errorf("model: %s: no general.architecture key (known architectures: %s)", src.Path, known)
		}
		return nil, fmt.Errorf("model: %s: unknown architecture %q (known: %s)", src.Path, arch, known)
	}
	return c(src, store, o)
}
