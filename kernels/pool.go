package kernels

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Pool splits data-parallel work across persistent goroutines. A nil *Pool is
// valid everywhere and runs the work inline on the caller's goroutine.
//
// Calls on one Pool are serialized (the pool is the CPU budget: two callers
// would only compete for the same cores). The function given to For must not
// call For on the same Pool.
//
// Helpers spin for a short while (spinFor) after each chunk before parking on
// a channel: a decode step is hundreds of matrix products tens of µs apart,
// and waking a parked goroutine costs several µs (and, when the caller's P
// is the only one awake, can leave the helper queued behind the caller until
// it blocks, running the call serially). The caller likewise spins until the
// helpers' chunks are done instead of parking on a WaitGroup.
type Pool struct {
	mu      sync.Mutex
	threads int
	helpers []poolHelper // helper k runs chunk k+1
	exited  sync.WaitGroup
	closed  bool // guarded by mu
	stop    atomic.Bool

	// pending counts helper chunks of the current call not yet finished.
	pending atomic.Int32
	// waiting is 1 while the caller is parked (or about to park) on done,
	// which the helper finishing the last chunk then sends to (buffered 1).
	waiting atomic.Int32
	done    chan struct{}

	// The current call, published to helper k by the increment of its gen.
	// With chunks > 0 the call's [0,n) is cut into chunks pieces: part k
	// runs piece k, then takes the next unclaimed one from next.
	n, parts, chunks int
	fn               func(lo, hi int)
	next             atomic.Int32

	// Preallocated jobs so MatMul does not build a closure (an allocation) per call.
	mat     matJob
	matFn   func(lo, hi int)
	quantFn func(lo, hi int)
	row     rowJob
	rowFn   func(lo, hi int)

	// act is the quantized-activation scratch of int8-activation MatMuls
	// (grown on demand, reused while p.mu is held).
	act actQ8

	// fault is the first memory fault a helper hit in the current call (a
	// mapped weight file truncated under it), for the caller to re-raise.
	faultMu sync.Mutex
	fault   any
}

// poolHelper is one helper goroutine's mailbox.
type poolHelper struct {
	gen    atomic.Uint64 // bumped once per call the helper takes part in
	asleep atomic.Int32  // 1 while parked (or about to park) on wake
	wake   chan struct{} // buffered(1): the caller's nudge to a parked helper
	_      [40]byte      // keep helpers' counters on separate cache lines
}

// spinFor is how long a helper (or a waiting caller) polls before parking
// (or yielding); a var so tests can set it to 0 to force the parking paths.
var spinFor = 100 * time.Microsecond

// NewPool starts threads-1 helper goroutines (the caller of For is the other
// thread). threads <= 0 means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, helpers: make([]poolHelper, threads-1), done: make(chan struct{}, 1)}
	p.matFn = p.mat.run
	p.quantFn = p.mat.quant
	p.rowFn = p.row.run
	p.exited.Add(threads - 1)
	for k := range p.helpers {
		p.helpers[k].wake = make(chan struct{}, 1)
		go p.helper(k + 1)
	}
	return p
}

func (p *Pool) helper(chunk int) {
	defer p.exited.Done()
	// Weights may be a mapped file: a fault reading them panics here
	// (instead of killing the process), and runChunk hands it to the caller.
	debug.SetPanicOnFault(true)
	h := &p.helpers[chunk-1]
	var seen uint64
	for {
		seen = h.await(seen)
		if p.stop.Load() {
			return
		}
		p.runChunk(chunk)
		if p.pending.Add(-1) == 0 && p.waiting.Load() == 1 {
			select { // a token already waiting wakes the caller just as well
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// runChunk runs the helper's chunk of the current call. A memory fault
// (a panic whose value has an Addr method, from debug.SetPanicOnFault) is
// kept for the caller, which re-panics with it on its own goroutine, where
// the pass's guard turns it into an error; any other panic crashes as it
// would have.
func (p *Pool) runChunk(chunk int) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(interface{ Addr() uintptr }); !ok {
				panic(v)
			}
			p.faultMu.Lock()
			if p.fault == nil {
				p.fault = v
			}
			p.faultMu.Unlock()
		}
	}()
	p.runPart(chunk)
}

// runPart runs part k of the current call: its chunk, or with p.chunks its
// first piece and then pieces claimed from p.next until none is left.
func (p *Pool) runPart(k int) {
	if p.chunks == 0 {
		lo, hi := chunkBounds(p.n, p.parts, k)
		p.fn(lo, hi)
		return
	}
	for c := k; c < p.chunks; c = int(p.next.Add(1)) - 1 {
		lo, hi := chunkBounds(p.n, p.chunks, c)
		p.fn(lo, hi)
	}
}

// await returns h.gen once it differs from seen: polling for spinFor, then
// parked on h.wake. The caller bumps gen before it checks asleep, and the
// helper sets asleep before it rechecks gen, so at least one sees the other
// (Go's atomics are sequentially consistent). The helper sets it by Swap, a
// read-modify-write, not Store: under qemu-user (arm64 code on an x86 host,
// make test-arm64) a Store followed by a Load of another word lost wake-ups
// and hung TestPoolWakeups, which an atomic read-modify-write, a full
// barrier there too, does not. A wake-up may be stale (a token sent for a
// call the helper had already seen by polling): the helper then rechecks
// gen and parks again, so it never runs a chunk twice.
func (h *poolHelper) await(seen uint64) uint64 {
	start := time.Now()
	for i := 1; ; i++ {
		if g := h.gen.Load(); g != seen {
			return g
		}
		if i%128 == 0 {
			if time.Since(start) > spinFor {
				break
			}
			runtime.Gosched()
		}
	}
	for {
		h.asleep.Swap(1)
		if g := h.gen.Load(); g != seen {
			h.asleep.Store(0)
			return g
		}
		<-h.wake
		h.asleep.Store(0)
		if g := h.gen.Load(); g != seen {
			return g
		}
	}
}

// signal publishes a new call (or the stop) to helper k.
func (p *Pool) signal(k int) {
	h := &p.helpers[k]
	h.gen.Add(1)
	if h.asleep.Load() == 1 {
		select { // a token already waiting wakes the helper just as well
		case h.wake <- struct{}{}:
		default:
		}
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
	p.stop.Store(true)
	for k := range p.helpers {
		p.signal(k)
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
	p.forPieces(n, parts, 0, fn)
}

// forPieces is forLocked with [0,n) cut into min(pieces, n) contiguous
// pieces that the min(parts, n, threads) goroutines claim as they finish
// (each starts with its own; pieces ≤ parts: forLocked's fixed chunks).
// Why: a matrix split into one fixed half per thread ends when the slower
// half does, and a thread that lost its core for a while (a shared
// machine, an interrupt) or read from a busier memory channel leaves the
// other spinning; with pieces the faster thread takes over the rest. fn
// must not depend on which goroutine runs a piece: MatMul's outputs do not
// (each output row is computed whole by one call, in its one order).
func (p *Pool) forPieces(n, parts, pieces int, fn func(lo, hi int)) {
	parts = min(parts, n, p.threads)
	if p.closed || parts <= 1 {
		fn(0, n)
		return
	}
	if pieces = min(pieces, n); pieces <= parts {
		pieces = 0
	}
	p.n, p.parts, p.chunks, p.fn = n, parts, pieces, fn
	p.next.Store(int32(parts))
	p.pending.Store(int32(parts - 1))
	for k := 0; k < parts-1; k++ {
		p.signal(k)
	}
	// Wait even if fn panics on this goroutine: helpers still read p.fn.
	returned := false
	defer func() {
		p.waitHelpers()
		p.fn = nil
		p.faultMu.Lock()
		f := p.fault
		p.fault = nil
		p.faultMu.Unlock()
		if f != nil && returned {
			panic(f) // a helper's memory fault, raised where the call came from
		}
	}()
	p.runPart(0)
	returned = true
}

// waitHelpers returns when every helper chunk of the current call is done:
// polling for spinFor, then parked on p.done (which also frees the P for a
// helper queued behind us), as await parks a helper. Yielding in a loop
// instead (runtime.Gosched, each through the scheduler's global run queue
// and its lock) took a quarter of a two-thread prefill's CPU on a loaded
// host, whenever one thread's chunk ran long or was descheduled. The last
// helper decrements pending before it checks waiting and the caller sets
// waiting before it rechecks pending, so at least one sees the other; a
// stale token (sent for an earlier call) only makes the caller recheck.
func (p *Pool) waitHelpers() {
	start := time.Now()
	for i := 1; p.pending.Load() != 0; i++ {
		if i%128 == 0 && time.Since(start) > spinFor {
			break
		}
	}
	for p.pending.Load() != 0 {
		p.waiting.Swap(1)
		if p.pending.Load() == 0 {
			break
		}
		<-p.done
	}
	p.waiting.Store(0)
}

// chunkBounds is chunk k of [0,n) cut into parts near-equal contiguous pieces.
func chunkBounds(n, parts, k int) (lo, hi int) {
	return n * k / parts, n * (k + 1) / parts
}
