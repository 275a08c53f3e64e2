package tensor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// FirstExtension is the lowest DType id a Codec may take. ggml's own ids end
// far below it, so a file carrying an extension id is clearly sluice-only.
const FirstExtension DType = 1024

// ErrCodec is wrapped by RegisterCodec errors.
var ErrCodec = errors.New("tensor: bad codec registration")

// Codec describes a row layout defined outside this package (sluice's own
// quantized and sparse formats). package tensor is a leaf, so the packages
// that own a layout (compress/quant, compress/prune) register it here from an
// init function, and every reader of DType — the GGUF reader, the kernels,
// model/ref — then sizes and decodes it without importing them.
//
// A registered layout has BlockSize 1: a row of any width is valid, and the
// codec itself handles a short last group.
type Codec struct {
	Name string // the dtype's spelling, as String returns it ("int4-g32")
	// RowBytes is the encoded size of one row of cols weights (cols >= 0).
	RowBytes func(cols int) int64
	// DequantizeRow decodes one row of cols = len(dst) weights from src,
	// which holds at least RowBytes(cols) bytes. It must not allocate.
	DequantizeRow func(dst []float32, src []byte, cols int)
}

// codecs is read on hot paths (every MatMul validates its weight), so readers
// take one atomic load; writers copy the map under codecMu.
var (
	codecMu sync.Mutex
	codecs  atomic.Pointer[map[DType]Codec]
)

// RegisterCodec makes t a known dtype decoded by c. t must be at least
// FirstExtension, c must have a name no other dtype uses and both functions;
// registering an id twice is an error (two packages claiming one id would
// otherwise decode each other's files silently).
func RegisterCodec(t DType, c Codec) error {
	if t < FirstExtension {
		return fmt.Errorf("%w: id %d is below %d (ggml's range)", ErrCodec, uint32(t), uint32(FirstExtension))
	}
	if c.Name == "" || c.RowBytes == nil || c.DequantizeRow == nil {
		return fmt.Errorf("%w: id %d: Name, RowBytes and DequantizeRow are all required", ErrCodec, uint32(t))
	}
	codecMu.Lock()
	defer codecMu.Unlock()
	old := codecs.Load()
	next := map[DType]Codec{}
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	if prev, dup := next[t]; dup {
		return fmt.Errorf("%w: id %d is already registered as %q", ErrCodec, uint32(t), prev.Name)
	}
	for _, b := range builtin {
		if b.String() == c.Name {
			return fmt.Errorf("%w: id %d: name %q is a built-in dtype", ErrCodec, uint32(t), c.Name)
		}
	}
	for k, v := range next {
		if v.Name == c.Name {
			return fmt.Errorf("%w: id %d: name %q is already used by id %d", ErrCodec, uint32(t), c.Name, uint32(k))
		}
	}
	next[t] = c
	codecs.Store(&next)
	return nil
}

// LookupCodec returns the codec registered for t.
func LookupCodec(t DType) (Codec, bool) {
	if t < FirstExtension {
		return Codec{}, false
	}
	m := codecs.Load()
	if m == nil {
		return Codec{}, false
	}
	c, ok := (*m)[t]
	return c, ok
}

// Extensions lists the registered extension dtypes in increasing id order.
func Extensions() []DType {
	m := codecs.Load()
	if m == nil {
		return nil
	}
	out := make([]DType, 0, len(*m))
	for t := range *m {
		out = append(out, t)
	}
	for i := 1; i < len(out); i++ { // insertion sort: a handful of ids
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
