package kernels

import (
	"runtime"
	"sync"
)

// Pool splits data-parallel work across persistent goroutines, so a kernel call
// costs a few channel operations rather than goroutine creation. A nil *Pool is
// valid everywhere and runs the work inline on the caller's goroutine.
//
// Calls on one Pool are serialized (the pool is the CPU budget: two callers
// would only compete for the same cores). The function given to For must not
// call For on the same Pool.
type Pool struct {
	mu      sync.Mutex
	threads int
	wake    []chan struct{} // one per helper goroutine; helper k runs chunk k+1
	busy    sync.WaitGroup  // helpers still running the current call
	exited  sync.WaitGroup  // helpers not yet returned after Close
	closed  bool

	// The current call, published to helpers by the send on wake.
	n, parts int
	fn       func(lo, hi int)

	// Preallocated jobs so MatMul does not build a closure (an allocation) per call.
	mat   matJob
	matFn func(lo, hi int)

	// act is the quantized-activation scratch of int8-activation MatMuls
	// (grown on demand, reused while p.mu is held).
	act actQ8
}

// NewPool starts threads-1 helper goroutines (the caller of For is the other
// thread). threads <= 0 means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1)}
	p.matFn = p.mat.run
	p.exited.Add(threads - 1)
	for k := range p.wake {
		p.wake[k] = make(chan struct{})
		go p.helper(k+1, p.wake[k])
	}
	return p
}

func (p *Pool) helper(chunk int, wake <-chan struct{}) {
	defer p.exited.Done()
	for range wake {
		lo, hi := chunkBounds(p.n, p.parts, chunk)
		p.fn(lo, hi)
		p.busy.Done()
	}
}

// Threads is the number of goroutines that share a call (1 for a nil Pool).
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

// Close stops the helper goroutines and waits for them to exit. It is
// idempotent; a closed Pool still works, running everything inline.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, w := range p.wake {
		close(w)
	}
	p.exited.Wait()
}

// For splits [0,n) into at most Threads() contiguous chunks, calls fn(lo, hi)
// once per non-empty chunk, one chunk per goroutine, and returns when all have
// finished. It does not allocate.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if p == nil {
		fn(0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forLocked(n, p.threads, fn)
}

// forLocked runs fn over [0,n) in min(parts, n, threads) chunks; p.mu is held.
func (p *Pool) forLocked(n, parts int, fn func(lo, hi int)) {
	parts = min(parts, n, p.threads)
	if p.closed || parts <= 1 {
		fn(0, n)
		return
	}
	p.n, p.parts, p.fn = n, parts, fn
	p.busy.Add(parts - 1)
	for k := 0; k < parts-1; k++ {
		p.wake[k] <- struct{}{}
	}
	// Wait even if fn panics on this goroutine: helpers still read p.fn.
	defer func() {
		p.busy.Wait()
		p.fn = nil
	}()
	lo, hi := chunkBounds(n, parts, 0)
	fn(lo, hi)
}

// chunkBounds is chunk k of [0,n) cut into parts near-equal contiguous pieces.
func chunkBounds(n, parts, k int) (lo, hi int) {
	return n * k / parts, n * (k + 1) / parts
}
