package graph

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

var (
	// ErrInvalid is matched (errors.Is) by every wiring error reported by Validate.
	ErrInvalid = errors.New("invalid graph")
	// ErrAlreadyRun is returned by a second call to Run: a Graph's channels are
	// consumed by its first run, so a graph is built once and run once.
	ErrAlreadyRun = errors.New("graph: already run")
	// ErrTypeMismatch is returned by ThenAny and PortOf when port and stage types differ.
	ErrTypeMismatch = errors.New("type mismatch")
	// ErrPanic is wrapped by the error of a node whose user code panicked.
	ErrPanic = errors.New("panic")
)

// WiringError is one mistake found while building a graph. It matches ErrInvalid.
type WiringError struct {
	Node string // the node at fault ("" for graph-wide problems)
	Msg  string
}

func (e *WiringError) Error() string {
	if e.Node == "" {
		return "graph: " + e.Msg
	}
	return fmt.Sprintf("graph: node %q: %s", e.Node, e.Msg)
}

// Is reports whether target is ErrInvalid.
func (e *WiringError) Is(target error) bool { return target == ErrInvalid }

// Options configures a Graph.
type Options struct {
	// Name identifies the graph in logs. Default "graph".
	Name string
	// Logger receives a debug event per node start and stop. The zero Logger is
	// disabled, like zerolog.Nop().
	Logger zerolog.Logger
}

// Graph is a set of typed nodes joined by bounded channels. Build it with Source,
// Then, Sink and the other free functions, then call Run once. Building is not safe
// for concurrent use; Stats is, at any time.
type Graph struct {
	name string
	log  zerolog.Logger

	mu    sync.Mutex
	nodes []*node
	names map[string]*node
	loops []loopChecker
	errs  []error
	state atomic.Int32 // stateBuilding, stateRunning, stateDone
}

const (
	stateBuilding = iota
	stateRunning
	stateDone
)

// New returns an empty graph.
func New(o Options) *Graph {
	if o.Name == "" {
		o.Name = "graph"
	}
	return &Graph{name: o.Name, log: o.Logger, names: map[string]*node{}}
}

// Name returns the graph's name.
func (g *Graph) Name() string { return g.name }

// NodeOption configures one node.
type NodeOption struct{ apply func(*nodeConfig) }

type nodeConfig struct {
	buffer     int
	workers    int
	ordered    bool
	fused      bool
	setBuffer  bool
	setWorkers bool
}

// Buffer sets the capacity of the node's output channel (of each branch's channel for
// Broadcast and Split). Default 1: tight backpressure, so memory stays bounded by the
// number of edges. 0 makes a rendezvous channel.
func Buffer(n int) NodeOption {
	return NodeOption{func(c *nodeConfig) { c.buffer, c.setBuffer = n, true }}
}

// Workers runs n Process loops in parallel on one stage value (Then and Sink only).
// Output order is then arbitrary unless Ordered is also given.
func Workers(n int) NodeOption {
	return NodeOption{func(c *nodeConfig) { c.workers, c.setWorkers = n, true }}
}

// Ordered makes a Then node with Workers(n) emit in input order: each input gets a
// sequence number and its outputs wait in a reorder buffer of at most 2n items. The
// outputs of one Process call are held until it returns, so in ordered mode a
// Process call that emits many items buffers them all.
func Ordered() NodeOption {
	return NodeOption{func(c *nodeConfig) { c.ordered = true }}
}

// node is one vertex: its outputs are edges it owns, its inputs edges it consumes.
type node struct {
	g    *Graph
	name string
	kind string
	cfg  nodeConfig
	ins  []*edge
	outs []*edge
	run  func(rs *runState)
	// inline makes the node's fused form for a run (Then and Split only);
	// Run uses it instead of run when the node is Fused.
	inline func(rs *runState) fusable
	c      counters
}

// counters are updated by the node's goroutines and read by Stats at any time.
type counters struct {
	in, out, errors                atomic.Int64
	busy, blockedSend, blockedRecv atomic.Int64 // nanoseconds
}

// edge is one bounded channel from a producer's output to its single consumer.
type edge struct {
	from     *node
	label    string // the port's name, for messages
	typ      reflect.Type
	to       *node
	capacity int
	makeCh   func(capacity int) (ch any, length func() int)
	ch       any // chan T, made by Run; nil when the consumer is fused
	length   func() int
	fin      fusable // *inline[T], made by Run when the consumer is fused
}

func newEdge[T any](from *node, label string, capacity int) *edge {
	e := &edge{from: from, label: label, typ: reflect.TypeFor[T](), capacity: capacity}
	e.makeCh = func(c int) (any, func() int) {
		ch := make(chan T, c)
		return ch, func() int { return len(ch) }
	}
	from.outs = append(from.outs, e)
	return e
}

// Port is a typed handle on one output of a node (≈ Beam PCollection). Every port must
// be consumed exactly once; use Broadcast to feed several consumers.
type Port[T any] struct{ e *edge }

// Name returns "node" for a single-output node and "node.branch" for the others
// (e.g. "route.yes", "fan.1"). It is unique within a graph.
func (p Port[T]) Name() string {
	if p.e == nil {
		return ""
	}
	return p.e.label
}

// Graph returns the graph the port belongs to, or nil for the zero Port.
func (p Port[T]) Graph() *Graph {
	if p.e == nil {
		return nil
	}
	return p.e.from.g
}

// graphOf returns the graph of p, panicking on the zero Port: a zero Port was not
// produced by this package, which is a programming error rather than bad input.
func graphOf(op, name string, e *edge) *Graph {
	if e == nil {
		panic(fmt.Sprintf("graph: %s %q: zero Port (not produced by Source, Then or another graph function)", op, name))
	}
	return e.from.g
}

// addNode registers a node. Wiring problems are recorded and reported by Validate,
// so builder code reads as straight-line calls.
func (g *Graph) addNode(name, kind string, opts []NodeOption) *node {
	n := &node{g: g, name: name, kind: kind, cfg: nodeConfig{buffer: 1, workers: 1}}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&n.cfg)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.names == nil { // a zero Graph works too
		g.names = map[string]*node{}
	}
	switch {
	case g.state.Load() != stateBuilding:
		g.errs = append(g.errs, &WiringError{name, "added after Run"})
	case name == "":
		g.errs = append(g.errs, &WiringError{name, "a " + kind + " node has an empty name"})
	case g.names[name] != nil:
		g.errs = append(g.errs, &WiringError{name, fmt.Sprintf("duplicate node name (a %s and a %s)", g.names[name].kind, kind)})
	}
	if n.cfg.buffer < 0 {
		g.errs = append(g.errs, &WiringError{name, fmt.Sprintf("Buffer(%d): capacity must be >= 0", n.cfg.buffer)})
		n.cfg.buffer = 0
	}
	if n.cfg.workers < 1 {
		g.errs = append(g.errs, &WiringError{name, fmt.Sprintf("Workers(%d): need at least 1", n.cfg.workers)})
		n.cfg.workers = 1
	}
	if n.cfg.setWorkers && kind != kindThen && kind != kindSink {
		g.errs = append(g.errs, &WiringError{name, "Workers applies only to Then and Sink nodes, not a " + kind})
		n.cfg.workers = 1
	}
	if n.cfg.ordered && kind != kindThen {
		g.errs = append(g.errs, &WiringError{name, "Ordered applies only to Then nodes, not a " + kind})
	}
	if n.cfg.fused {
		switch {
		case kind != kindThen && kind != kindSplit:
			g.errs = append(g.errs, &WiringError{name, "Fused applies only to Then and Split nodes, not a " + kind})
			n.cfg.fused = false
		case n.cfg.workers > 1:
			g.errs = append(g.errs, &WiringError{name, fmt.Sprintf("Fused runs the node on its producer's goroutine, so it takes one worker, not Workers(%d)", n.cfg.workers)})
		case n.cfg.ordered:
			g.errs = append(g.errs, &WiringError{name, "Fused and Ordered: a fused node runs on its producer's goroutine, in its producer's order; Ordered is for Workers(n>1)"})
		}
	}
	if n.cfg.setBuffer && kind == kindSink {
		g.errs = append(g.errs, &WiringError{name, "Buffer does not apply to a sink (it has no output)"})
	}
	if g.names[name] == nil {
		g.names[name] = n
	}
	g.nodes = append(g.nodes, n)
	return n
}

// consume records that n reads edge e. e may belong to another graph, which is an error.
func (g *Graph) consume(e *edge, n *node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e.from.g != g {
		g.errs = append(g.errs, &WiringError{n.name, fmt.Sprintf("input port %q belongs to graph %q, not %q", e.label, e.from.g.name, g.name)})
		return
	}
	if e.to != nil {
		g.errs = append(g.errs, &WiringError{n.name, fmt.Sprintf("port %q is already consumed by %q (use Broadcast to fan out)", e.label, e.to.name)})
		return
	}
	e.to = n
	n.ins = append(n.ins, e)
}

func (g *Graph) errorf(node, format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, &WiringError{node, fmt.Sprintf(format, args...)})
}

// loopChecker is what Validate needs from a Loop of any type.
type loopChecker interface{ check() []error }

// Validate reports every wiring mistake at once (errors.Join of *WiringError, each
// matching ErrInvalid): duplicate or empty names, ports consumed twice or never,
// ports from another graph, incomplete loops, bad options, Fused nodes whose
// producer cannot call them. Run calls it first.
func (g *Graph) Validate() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	errs := append([]error(nil), g.errs...)
	if len(g.nodes) == 0 {
		errs = append(errs, &WiringError{"", fmt.Sprintf("graph %q has no nodes", g.name)})
	}
	for _, n := range g.nodes {
		for _, e := range n.outs {
			if e.to == nil {
				errs = append(errs, &WiringError{n.name, fmt.Sprintf("output port %q (%v) is never consumed", e.label, e.typ)})
			}
		}
	}
	for _, l := range g.loops {
		errs = append(errs, l.check()...)
	}
	for _, n := range g.nodes {
		if n.cfg.fused {
			if err := checkFused(n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// runState is shared by every node of one run.
type runState struct {
	base   time.Time // origin of the run's clock (see now)
	ctx    context.Context
	done   <-chan struct{}
	cancel context.CancelCauseFunc
}

// fail records err as node n's error. The first failure cancels the run with the
// wrapped error as cause; errors that merely report that cancellation are dropped.
func (rs *runState) fail(n *node, err error) {
	if err == nil {
		return
	}
	if rs.ctx.Err() != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Cause(rs.ctx)) {
			return
		}
	}
	n.c.errors.Add(1)
	rs.cancel(fmt.Errorf("graph: node %q: %w", n.name, err))
}

// Run validates the graph, starts every node and blocks until all of them have
// stopped. The first node error cancels the others and is returned as
// `graph: node "name": <err>` (errors.Is sees through it); if ctx ends first, its
// cause is returned. Run returns only after every goroutine it started has exited,
// so stages must return promptly once their ctx is done.
//
// A graph runs once: a second call, even after a validation error, returns
// ErrAlreadyRun.
func (g *Graph) Run(ctx context.Context) error {
	if !g.state.CompareAndSwap(stateBuilding, stateRunning) {
		return fmt.Errorf("graph %q: %w", g.name, ErrAlreadyRun)
	}
	defer g.state.Store(stateDone)
	if err := g.Validate(); err != nil {
		return err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rs := &runState{base: time.Now(), ctx: rctx, done: rctx.Done(), cancel: cancel}
	g.mu.Lock()
	for _, n := range g.nodes {
		for _, e := range n.outs {
			if e.to.cfg.fused {
				e.fin = e.to.inline(rs)
			} else {
				e.ch, e.length = e.makeCh(e.capacity)
			}
		}
	}
	nodes := append([]*node(nil), g.nodes...)
	g.mu.Unlock()

	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.cfg.fused {
			continue // runs on its producer's goroutine
		}
		wg.Go(func() {
			g.log.Debug().Str("graph", g.name).Str("node", n.name).Str("kind", n.kind).Msg("node start")
			startFused(n)
			n.run(rs)
			g.log.Debug().Str("graph", g.name).Str("node", n.name).
				Int64("in", n.c.in.Load()).Int64("out", n.c.out.Load()).Int64("errors", n.c.errors.Load()).
				Msg("node stop")
		})
	}
	wg.Wait()
	return context.Cause(rctx)
}

// NodeStats is a snapshot of one node's counters.
type NodeStats struct {
	Name string
	Kind string // "source", "then", "sink", "broadcast", "merge", "split", "gather", "loop.enter", "loop.exit"
	// In counts items received, Out items sent (a Broadcast counts one per branch).
	In, Out int64
	// Errors counts failures of this node's own code (not cancellations caused by others).
	Errors int64
	// Busy is time spent in user code (Process, Flush, a source's generator, a sink
	// function), excluding time blocked in Emit. Summed over workers.
	Busy time.Duration
	// BlockedOnSend is time spent waiting for room downstream (backpressure).
	BlockedOnSend time.Duration
	// BlockedOnRecv is time spent waiting for input (starvation).
	BlockedOnRecv time.Duration
	Workers       int
	Capacity      int // sum of the capacities of the node's output channels (a fused consumer's edge has none)
	Queued        int // items now waiting in the node's output channels (0 unless running)
	// Fused is true for a node that runs on its producer's goroutine (see
	// Fused): its BlockedOnRecv is then 0, and its producer's Busy leaves
	// out the time spent in it.
	Fused bool
}

// Stats returns one snapshot per node, in creation order. Safe to call while running.
func (g *Graph) Stats() []NodeStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]NodeStats, 0, len(g.nodes))
	for _, n := range g.nodes {
		s := NodeStats{
			Name:          n.name,
			Kind:          n.kind,
			In:            n.c.in.Load(),
			Out:           n.c.out.Load(),
			Errors:        n.c.errors.Load(),
			Busy:          time.Duration(n.c.busy.Load()),
			BlockedOnSend: time.Duration(n.c.blockedSend.Load()),
			BlockedOnRecv: time.Duration(n.c.blockedRecv.Load()),
			Workers:       n.cfg.workers,
			Fused:         n.cfg.fused,
		}
		for _, e := range n.outs {
			if e.to != nil && e.to.cfg.fused {
				continue
			}
			s.Capacity += e.capacity
			if e.length != nil {
				s.Queued += e.length()
			}
		}
		out = append(out, s)
	}
	return out
}

// panicError turns a recovered panic into an error wrapping ErrPanic (and the panic
// value, when it is an error) with the stack in the message's tail.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w: %w\n%s", ErrPanic, err, debug.Stack())
	}
	return fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
}

// call runs f, turning a panic into an error.
func call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return f()
}
