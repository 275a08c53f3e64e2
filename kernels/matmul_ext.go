package kernels

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/tensor"
)

// Extension dtypes are the layouts registered with tensor.RegisterCodec
// (compress/quant's int8/int4/nf4, compress/prune's 2:4). kernels may import
// only tensor, so it cannot know their bytes; it multiplies them in one of two
// ways:
//
//   - generically: each weight row is decoded with the codec's DequantizeRow
//     into pooled scratch, then summed exactly as the F32 path sums (four rows
//     at a time, each output strictly in column order). The result is
//     therefore bit-identical to kernels/ref and model/ref, which decode the
//     same rows with tensor.DequantizeRow.
//   - by a kernel the layout's owner registers with RegisterMatKernel, when
//     the layout allows something faster than decoding (2:4 sparsity skips
//     the zeros).

// ExtKernel computes output rows [lo,hi) of a weight in a registered
// extension layout for all n inputs, with the contract of MatMul:
//
//	// w: (rows, cols) in the layout; x: (n, cols); dst: (n, rows)
//	dst[i*rows+r] = Σ_j W(r, j) * x[i*cols+j]   (float32, j ascending)
//
// where W is what the codec's DequantizeRow decodes. A kernel may leave out
// terms whose weight is zero (for finite x that changes no result except
// perhaps the sign of an exact zero). It must not allocate.
type ExtKernel func(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int)

// ErrKernel is wrapped by RegisterMatKernel errors.
var ErrKernel = errors.New("kernels: bad kernel registration")

var (
	extMu      sync.Mutex
	extKernels atomic.Pointer[map[tensor.DType]matKernel]
)

// RegisterMatKernel makes k the MatMul kernel of the extension dtype t, which
// must already have a tensor.Codec (MatMul validates weights through it).
// Registering t twice is an error.
func RegisterMatKernel(t tensor.DType, k ExtKernel) error {
	if k == nil {
		return fmt.Errorf("%w: %v: nil kernel", ErrKernel, t)
	}
	if _, ok := tensor.LookupCodec(t); !ok {
		return fmt.Errorf("%w: dtype %d has no registered tensor.Codec", ErrKernel, uint32(t))
	}
	extMu.Lock()
	defer extMu.Unlock()
	next := map[tensor.DType]matKernel{}
	if old := extKernels.Load(); old != nil {
		for d, f := range *old {
			next[d] = f
		}
	}
	if _, dup := next[t]; dup {
		return fmt.Errorf("%w: %v already has a kernel", ErrKernel, t)
	}
	next[t] = matKernel(k)
	extKernels.Store(&next)
	return nil
}

// extKernelFor returns the registered kernel of t, or nil.
func extKernelFor(t tensor.DType) matKernel {
	if m := extKernels.Load(); m != nil {
		return (*m)[t]
	}
	return nil
}

// extScratch holds decoded weight rows; pooled so MatMul does not allocate
// once warm, and one per goroutine running a chunk of rows.
type extScratch struct{ rows []float32 }

var extScratchPool = sync.Pool{New: func() any { return new(extScratch) }}

// matExt is the generic kernel of an extension dtype t: decode, then the F32
// summation (accumulate4/accumulate1 over the whole row as one tile).
func matExt(t tensor.DType, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	c, ok := tensor.LookupCodec(t)
	if !ok {
		panic("kernels: MatMul: unsupported dtype " + t.String())
	}
	rb := c.RowBytes(cols)
	s := extScratchPool.Get().(*extScratch)
	defer extScratchPool.Put(s)
	if cap(s.rows) < group*cols {
		s.rows = make([]float32, group*cols)
	}
	buf := s.rows[:group*cols]
	row := func(k, r int) []float32 {
		d := buf[k*cols : (k+1)*cols]
		c.DequantizeRow(d, w[int64(r)*rb:int64(r+1)*rb], cols)
		return d
	}
	r := lo
	for ; r+group <= hi; r += group {
		for i := 0; i < n; i++ {
			clear(dst[i*rows+r : i*rows+r+group])
		}
		accumulate4(dst, row(0, r), row(1, r+1), row(2, r+2), row(3, r+3), x, n, rows, cols, r, 0)
	}
	for ; r < hi; r++ {
		for i := 0; i < n; i++ {
			dst[i*rows+r] = 0
		}
		accumulate1(dst, row(0, r), x, n, rows, cols, r, 0)
	}
}
