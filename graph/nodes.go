package graph

import (
	"context"
	"fmt"
	"sync"
)

const (
	kindSource    = "source"
	kindThen      = "then"
	kindSink      = "sink"
	kindBroadcast = "broadcast"
	kindMerge     = "merge"
	kindSplit     = "split"
	kindGather    = "gather"
	kindLoopEnter = "loop.enter"
	kindLoopExit  = "loop.exit"
)

// Source adds a node whose generator produces the graph's input. gen runs once on
// its own goroutine; when it returns nil the output closes and downstream nodes
// flush. gen should stop when emit returns an error (the run was cancelled).
//
//	gen ─▶ [out]
func Source[Out any](g *Graph, name string, gen func(context.Context, Emit[Out]) error, o ...NodeOption) Port[Out] {
	if g == nil {
		panic(fmt.Sprintf("graph: Source %q: nil *Graph", name))
	}
	n := g.addNode(name, kindSource, o)
	if gen == nil {
		g.errorf(name, "nil generator")
	}
	out := newEdge[Out](n, name, n.cfg.buffer)
	n.run = func(rs *runState) {
		o := outletOf[Out](out)
		defer o.close()
		e := &emitter[Out]{rs: rs, c: &n.c, out: o}
		mark := rs.now()
		err := call(func() error { return gen(rs.ctx, e.emit) })
		busy(rs, &n.c, &mark, e.blocked)
		rs.fail(n, err)
	}
	return Port[Out]{out}
}

// Then adds a node that runs s on every item of in. See Stage for the lifecycle
// (Setup, Process, Flush, Close) and Workers/Ordered for parallelism.
//
//	[in] ─▶ s.Process ─▶ [out]
//
// Then panics if in is the zero Port (a programming error); every other wiring
// mistake is reported by Validate.
func Then[In, Out any](name string, in Port[In], s Stage[In, Out], o ...NodeOption) Port[Out] {
	g := graphOf("Then", name, in.e)
	n := g.addNode(name, kindThen, o)
	g.consume(in.e, n)
	if s == nil {
		g.errorf(name, "nil stage")
	}
	out := newEdge[Out](n, name, n.cfg.buffer)
	n.run = func(rs *runState) { runThen(rs, n, in.e, out, s) }
	n.inline = func(rs *runState) fusable { return thenInline(rs, n, out, s) }
	return Port[Out]{out}
}

func runThen[In, Out any](rs *runState, n *node, inE, outE *edge, s Stage[In, Out]) {
	inCh := inE.ch.(chan In)
	outCh := outletOf[Out](outE)
	defer outCh.close()
	lifecycle(rs, n, s, func() {
		if n.cfg.ordered && n.cfg.workers > 1 {
			runOrdered(rs, n, inCh, outCh, s)
		} else {
			runWorkers(rs, n, inCh, outCh, s)
		}
		if rs.ctx.Err() != nil {
			return // a failed or cancelled run does not flush
		}
		if f, ok := s.(Flusher[Out]); ok {
			e := &emitter[Out]{rs: rs, c: &n.c, out: outCh}
			mark := rs.now()
			err := call(func() error { return f.Flush(rs.ctx, e.emit) })
			busy(rs, &n.c, &mark, e.blocked)
			rs.fail(n, err)
		}
	})
}

// parallel runs work on n goroutines (inline when n is 1) and waits for them.
func parallel(n int, work func()) {
	if n == 1 {
		work()
		return
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(work)
	}
	wg.Wait()
}

func runWorkers[In, Out any](rs *runState, n *node, inCh chan In, outCh outlet[Out], s Stage[In, Out]) {
	parallel(n.cfg.workers, func() {
		e := &emitter[Out]{rs: rs, c: &n.c, out: outCh}
		emit := Emit[Out](e.emit)
		mark := rs.now()
		for rs.ctx.Err() == nil {
			v, ok := recv(rs, &n.c, inCh, &mark)
			if !ok {
				return
			}
			e.blocked = 0
			err := process(rs.ctx, s, v, emit)
			busy(rs, &n.c, &mark, e.blocked)
			if err != nil {
				rs.fail(n, err)
				return
			}
		}
	})
}

// collector is the Emit of an ordered worker: it holds one input's outputs until
// the reorder buffer releases them in sequence.
type collector[T any] struct {
	rs    *runState
	items []T
}

func (c *collector[T]) emit(ctx context.Context, v T) error {
	if err := c.rs.ctx.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.items = append(c.items, v)
	return nil
}

type sequenced[T any] struct {
	seq   uint64
	items []T
}

// runOrdered numbers inputs as workers take them, and a reorder goroutine emits each
// input's outputs in number order. A window of 2·workers slots, taken before an
// input is received and given back when its outputs have been sent, bounds the
// reorder buffer while one slow item holds up the sequence.
func runOrdered[In, Out any](rs *runState, n *node, inCh chan In, outCh outlet[Out], s Stage[In, Out]) {
	slots := 2 * n.cfg.workers
	window := make(chan struct{}, slots)
	results := make(chan sequenced[Out], slots)
	var (
		mu   sync.Mutex
		next uint64
	)
	var reorder sync.WaitGroup
	reorder.Go(func() {
		pending := map[uint64][]Out{}
		var want uint64
		for r := range results {
			pending[r.seq] = r.items
			for items, ok := pending[want]; ok; items, ok = pending[want] {
				delete(pending, want)
				for _, v := range items {
					if !send(rs, &n.c, outCh, v, nil) {
						return // cancelled; workers see rs.done and stop
					}
				}
				want++
				<-window
			}
		}
	})
	parallel(n.cfg.workers, func() {
		c := &collector[Out]{rs: rs}
		emit := Emit[Out](c.emit)
		for rs.ctx.Err() == nil {
			select {
			case window <- struct{}{}:
			case <-rs.done:
				return
			}
			mu.Lock()
			v, ok := recv(rs, &n.c, inCh, nil)
			seq := next
			next++
			mu.Unlock()
			if !ok {
				return
			}
			c.items = nil
			mark := rs.now() // time spent waiting for the window or the lock is idle
			err := process(rs.ctx, s, v, emit)
			busy(rs, &n.c, &mark, 0)
			if err != nil {
				rs.fail(n, err)
				return
			}
			select {
			case results <- sequenced[Out]{seq, c.items}:
			case <-rs.done:
				return
			}
		}
	})
	close(results)
	reorder.Wait()
}

// Sink adds a terminal node that calls fn on every item of in. With Workers(n), fn
// runs on n goroutines at once.
//
//	[in] ─▶ fn
func Sink[In any](name string, in Port[In], fn func(context.Context, In) error, o ...NodeOption) {
	g := graphOf("Sink", name, in.e)
	n := g.addNode(name, kindSink, o)
	g.consume(in.e, n)
	if fn == nil {
		g.errorf(name, "nil sink function")
	}
	n.run = func(rs *runState) {
		inCh := in.e.ch.(chan In)
		parallel(n.cfg.workers, func() {
			mark := rs.now()
			for rs.ctx.Err() == nil {
				v, ok := recv(rs, &n.c, inCh, &mark)
				if !ok {
					return
				}
				err := sinkCall(rs.ctx, fn, v)
				busy(rs, &n.c, &mark, 0)
				if err != nil {
					rs.fail(n, err)
					return
				}
			}
		})
	}
}

// Broadcast copies every item of in to n branches, each with its own buffer
// (Buffer option), so a slow branch stalls the others only once its own buffer is
// full. The same value goes to every branch: T must be a value type or be treated as
// read-only by all of them.
//
//	          ┌▶ [out.0]
//	[in] ─▶ ──┼▶ [out.1]
//	          └▶ [out.n-1]
func Broadcast[T any](name string, in Port[T], n int, o ...NodeOption) []Port[T] {
	g := graphOf("Broadcast", name, in.e)
	nd := g.addNode(name, kindBroadcast, o)
	g.consume(in.e, nd)
	if n < 1 {
		g.errorf(name, "Broadcast to %d branches: need at least 1", n)
		n = 0
	}
	ports := make([]Port[T], n)
	for i := range ports {
		ports[i] = Port[T]{newEdge[T](nd, fmt.Sprintf("%s.%d", name, i), nd.cfg.buffer)}
	}
	nd.run = func(rs *runState) {
		inCh := in.e.ch.(chan T)
		outs := make([]outlet[T], len(ports))
		for i, p := range ports {
			outs[i] = outletOf[T](p.e)
			defer outs[i].close()
		}
		for rs.ctx.Err() == nil {
			v, ok := recv(rs, &nd.c, inCh, nil)
			if !ok {
				return
			}
			for _, ch := range outs {
				if !send(rs, &nd.c, ch, v, nil) {
					return
				}
			}
		}
	}
	return ports
}

// Merge interleaves several ports of one graph into one (fan-in). Its output closes
// when every input has closed. Items keep their order per input only.
//
//	[in.0] ──┐
//	[in.1] ──┼─▶ [out]
//	[in.k] ──┘
//
// Merge panics when given no inputs or a zero first Port.
func Merge[T any](name string, ins ...Port[T]) Port[T] {
	if len(ins) == 0 {
		panic(fmt.Sprintf("graph: Merge %q: no inputs", name))
	}
	g := graphOf("Merge", name, ins[0].e)
	n := g.addNode(name, kindMerge, nil)
	for i, in := range ins {
		if in.e == nil {
			g.errorf(name, "input %d is the zero Port", i)
			continue
		}
		g.consume(in.e, n)
	}
	out := newEdge[T](n, name, n.cfg.buffer)
	n.run = func(rs *runState) {
		outCh := outletOf[T](out)
		defer outCh.close()
		var wg sync.WaitGroup
		for _, e := range n.ins {
			inCh := e.ch.(chan T)
			wg.Go(func() {
				for rs.ctx.Err() == nil {
					v, ok := recv(rs, &n.c, inCh, nil)
					if !ok || !send(rs, &n.c, outCh, v, nil) {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	return Port[T]{out}
}

// Split routes each item of in to yes when pred(item) is true and to no otherwise.
// pred runs on the node's goroutine; a panic in it fails the node. Buffer sets the
// capacity of both branches.
//
//	[in] ─▶ pred ─┬▶ [yes]
//	              └▶ [no]
func Split[T any](name string, in Port[T], pred func(T) bool, o ...NodeOption) (yes, no Port[T]) {
	g := graphOf("Split", name, in.e)
	n := g.addNode(name, kindSplit, o)
	g.consume(in.e, n)
	if pred == nil {
		g.errorf(name, "nil predicate")
	}
	yes = Port[T]{newEdge[T](n, name+".yes", n.cfg.buffer)}
	no = Port[T]{newEdge[T](n, name+".no", n.cfg.buffer)}
	n.inline = func(rs *runState) fusable { return splitInline(rs, n, yes.e, no.e, pred) }
	n.run = func(rs *runState) {
		inCh := in.e.ch.(chan T)
		yesCh, noCh := outletOf[T](yes.e), outletOf[T](no.e)
		defer yesCh.close()
		defer noCh.close()
		mark := rs.now()
		for rs.ctx.Err() == nil {
			v, ok := recv(rs, &n.c, inCh, &mark)
			if !ok {
				return
			}
			b, err := predCall(pred, v)
			busy(rs, &n.c, &mark, 0)
			if err != nil {
				rs.fail(n, err)
				return
			}
			ch := noCh
			if b {
				ch = yesCh
			}
			if !send(rs, &n.c, ch, v, &mark) {
				return
			}
		}
	}
	return yes, no
}

// Gather groups items into slices of at most maxItems without waiting for more: it
// blocks for the first item, then takes only what is already queued in its input
// channel. This is continuous batching: under load batches fill up, when idle a
// lone item goes through at once. Give the upstream node Buffer(maxItems) so that up
// to maxItems items can queue.
//
//	[in] ─▶ a,b,c ─▶ [[a b c]]
func Gather[T any](name string, in Port[T], maxItems int, o ...NodeOption) Port[[]T] {
	g := graphOf("Gather", name, in.e)
	n := g.addNode(name, kindGather, o)
	g.consume(in.e, n)
	if maxItems < 1 {
		g.errorf(name, "Gather of at most %d items: need at least 1", maxItems)
	}
	out := newEdge[[]T](n, name, n.cfg.buffer)
	n.run = func(rs *runState) {
		inCh := in.e.ch.(chan T)
		outCh := outletOf[[]T](out)
		defer outCh.close()
		for rs.ctx.Err() == nil {
			v, ok := recv(rs, &n.c, inCh, nil)
			if !ok {
				return
			}
			batch := make([]T, 1, maxItems)
			batch[0] = v
			closed := false
		fill:
			for len(batch) < maxItems {
				select {
				case v, ok := <-inCh:
					if !ok {
						closed = true
						break fill
					}
					n.c.in.Add(1)
					batch = append(batch, v)
				default:
					break fill
				}
			}
			if !send(rs, &n.c, outCh, batch, nil) || closed {
				return
			}
		}
	}
	return Port[[]T]{out}
}
