package graph

import (
	"context"
	"fmt"
	"time"
)

// Fusion runs a node on its producer's goroutine, as Beam runners fuse
// consecutive ParDos: the producer's emit calls the fused node's Process
// directly instead of sending on a channel. A chain whose items move strictly
// one at a time (the decode loop, with one step in flight) gains nothing from
// a goroutine per stage and pays a hand-off (a channel operation that wakes
// another goroutine, often another OS thread) at every edge; fused, the chain
// is a sequence of calls.
//
// What stays as it was: Setup, Process, Flush and Close run in the same order
// with the same guarantees; the output closes when the input closes; an error
// or panic fails the node it came from and cancels the run; In, Out, Busy and
// BlockedOnSend stay per node. What changes: the fused node's code runs on
// its producer's goroutine, the producer's Emit returns only after the fused
// node has handled the item (so the edge between them has no buffer and
// Queued counts nothing for it), and the fused node's BlockedOnRecv is 0: it
// never waits for input, its producer calls it.

// Fused makes a Then or Split node run on the goroutine of the node that
// produces its input: that node's emit calls it directly, with no channel in
// between. The node must have one worker and no Ordered; its producer must
// send from one goroutine (not a Broadcast, whose branches would then run one
// after another; not a Merge or a node with Workers(n>1), which would call the
// fused node from several goroutines at once). Validate reports a violation as
// a WiringError naming the node.
//
// Fused nodes chain: in Then("b", Then("a", src, a, Fused()), b, Fused()) the
// source's goroutine runs a and b. Setup runs on that goroutine before the
// producer starts, Flush and Close when the producer closes its output.
//
// Fusing into a Loop's Enter is safe: the back edge's capacity equals the
// loop's bound, so a fused chain that ends in Return never waits on it.
func Fused() NodeOption {
	return NodeOption{func(c *nodeConfig) { c.fused = true }}
}

// fusable is the part of a fused node's input the run needs before any item
// flows: Run makes one per fused node, and the producer's goroutine starts it.
type fusable interface{ start() }

// inline is the input side of a fused node: its producer calls push for each
// item and, when its output closes, finish.
type inline[T any] struct {
	rs *runState
	n  *node
	// stopped is set when Setup or a Process call failed: the node then
	// takes no more items (the run is cancelled by then) and does not flush.
	stopped bool
	open    func() error                         // resolves the node's outputs, then Setup
	handle  func(v T, mark *time.Duration) error // one item; accounts busy and moves *mark to its end
	finish  func()                               // Flush unless stopped or cancelled, Close, close outputs
	log     func(msg string)                     // the node start/stop debug event
}

// start runs on the producer's goroutine before the producer emits anything:
// the node's Setup, then the start of the nodes fused to it.
func (f *inline[T]) start() {
	f.log("node start")
	if err := f.open(); err != nil {
		f.stopped = true
		f.rs.fail(f.n, err)
	}
	startFused(f.n)
}

// push hands v to the fused node and returns the time spent in it (and in
// whatever it called downstream), which the producer leaves out of its own
// Busy. from is the producer's counters: its Out counts v once the node
// takes it. A non-nil error means v was not handled because the run is
// cancelled (or ctx, the producer's, is done); it is never the node's own
// error, which fails the node here.
func (f *inline[T]) push(ctx context.Context, v T, from *counters) (time.Duration, error) {
	rs := f.rs
	if err := rs.ctx.Err(); err != nil {
		return 0, err
	}
	if ctx != nil && ctx != rs.ctx {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
	if f.stopped {
		return 0, context.Canceled // unreachable: a failure has cancelled rs.ctx
	}
	from.out.Add(1)
	f.n.c.in.Add(1)
	t0 := rs.now()
	mark := t0
	err := f.handle(v, &mark)
	d := mark - t0
	if err != nil {
		f.stopped = true
		rs.fail(f.n, err)
		if cerr := rs.ctx.Err(); cerr != nil {
			return d, cerr
		}
		return d, context.Canceled
	}
	return d, nil
}

// startFused starts the fused nodes fed by n's outputs, on the calling goroutine.
func startFused(n *node) {
	for _, e := range n.outs {
		if e.fin != nil {
			e.fin.start()
		}
	}
}

// outlet is the sending side of an edge during a run: its channel, or the
// fused node that consumes it.
type outlet[T any] struct {
	ch chan T
	in *inline[T]
}

// outletOf returns e's sending side; Run has made its channel or, for a fused
// consumer, its inline.
func outletOf[T any](e *edge) outlet[T] {
	if e.fin != nil {
		return outlet[T]{in: e.fin.(*inline[T])}
	}
	return outlet[T]{ch: e.ch.(chan T)}
}

// close ends the edge: closes the channel, or finishes the fused consumer.
func (o outlet[T]) close() {
	if o.in != nil {
		o.in.finish()
		return
	}
	close(o.ch)
}

func newInline[T any](rs *runState, n *node) *inline[T] {
	g := n.g
	// The same events as Run logs for the other nodes, plus "fused".
	return &inline[T]{rs: rs, n: n, log: func(msg string) {
		ev := g.log.Debug().Str("graph", g.name).Str("node", n.name)
		if msg == "node stop" {
			ev = ev.Int64("in", n.c.in.Load()).Int64("out", n.c.out.Load()).Int64("errors", n.c.errors.Load())
		} else {
			ev = ev.Str("kind", n.kind).Bool("fused", true)
		}
		ev.Msg(msg)
	}}
}

// thenInline is a fused Then node: runThen's lifecycle, driven by the producer.
func thenInline[In, Out any](rs *runState, n *node, outE *edge, s Stage[In, Out]) *inline[In] {
	f := newInline[In](rs, n)
	e := &emitter[Out]{rs: rs, c: &n.c}
	emit := Emit[Out](e.emit)
	f.open = func() error {
		e.out = outletOf[Out](outE)
		if st, ok := s.(Setupper); ok {
			return call(func() error { return st.Setup(rs.ctx) })
		}
		return nil
	}
	f.handle = func(v In, mark *time.Duration) error {
		e.blocked = 0
		err := process(rs.ctx, s, v, emit)
		busy(rs, &n.c, mark, e.blocked)
		return err
	}
	f.finish = func() {
		defer f.log("node stop")
		defer e.out.close()
		if !f.stopped && rs.ctx.Err() == nil {
			if fl, ok := s.(Flusher[Out]); ok {
				e.blocked = 0
				mark := rs.now()
				err := call(func() error { return fl.Flush(rs.ctx, emit) })
				busy(rs, &n.c, &mark, e.blocked)
				rs.fail(n, err)
			}
		}
		if c, ok := s.(Closer); ok {
			rs.fail(n, call(c.Close))
		}
	}
	return f
}

// splitInline is a fused Split node.
func splitInline[T any](rs *runState, n *node, yesE, noE *edge, pred func(T) bool) *inline[T] {
	f := newInline[T](rs, n)
	var yes, no outlet[T]
	f.open = func() error {
		yes, no = outletOf[T](yesE), outletOf[T](noE)
		return nil
	}
	f.handle = func(v T, mark *time.Duration) error {
		b, err := predCall(pred, v)
		busy(rs, &n.c, mark, 0)
		if err != nil {
			return err
		}
		o := no
		if b {
			o = yes
		}
		if !send(rs, &n.c, o, v, mark) {
			return rs.ctx.Err()
		}
		return nil
	}
	f.finish = func() {
		defer f.log("node stop")
		defer yes.close()
		no.close()
	}
	return f
}

// checkFused reports why n, marked Fused, cannot run on its producer's
// goroutine (nil when it can). The node's own options were checked when it
// was added.
func checkFused(n *node) error {
	if len(n.ins) != 1 {
		return nil // its input was not wired; that error is already recorded
	}
	p := n.ins[0].from
	switch {
	case p.kind == kindBroadcast:
		return &WiringError{n.name, fmt.Sprintf("Fused: its producer %q is a broadcast, whose branches would then run one after another on its goroutine (a slow branch would stall the others)", p.name)}
	case p.kind == kindMerge:
		return &WiringError{n.name, fmt.Sprintf("Fused: its producer %q is a merge, which sends from one goroutine per input, so the node would run on several goroutines at once", p.name)}
	case p.cfg.workers > 1:
		return &WiringError{n.name, fmt.Sprintf("Fused: its producer %q has Workers(%d), so the node would run on several goroutines at once", p.name, p.cfg.workers)}
	}
	return nil
}
