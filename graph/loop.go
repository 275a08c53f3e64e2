package graph

import (
	"fmt"
	"strings"
)

// Loop is a feedback cycle with a bounded number of items inside it: the decode loop,
// where sampled sequences go back to the scheduler until they finish.
//
//	[in] ─▶ Enter ─▶ body … ─┬▶ Return ─┐   (back edge, capacity maxInFlight)
//	          ▲              │          │
//	          └──────────────┼──────────┘
//	                         └▶ Exit ─▶ [out]
//
// Enter admits a new item from in only while fewer than maxInFlight items are
// inside, so the source feels backpressure instead of the loop filling up. Every
// item that entered must reach Return or Exit exactly once (counted in T items:
// the body may change types in between, e.g. Seq → Batch → Seq). Given that,
// the loop cannot deadlock: at most maxInFlight items can be waiting on the back
// edge, which has exactly that capacity, so the body can always hand items back,
// and Exit frees a slot as soon as it receives an item. Dropping or duplicating
// items inside the loop breaks this contract: Enter then waits forever for the
// lost item (its output closes only when in has closed and the loop is empty).
type Loop[T any] struct {
	g     *Graph
	name  string
	max   int
	freed chan struct{} // Exit → Enter: one token per item that left

	enter *node
	back  *edge
	exit  *node
}

// NewLoop declares a loop; wire it with Enter, Return and Exit (each exactly once).
func NewLoop[T any](g *Graph, name string, maxInFlight int) *Loop[T] {
	if g == nil {
		panic(fmt.Sprintf("graph: NewLoop %q: nil *Graph", name))
	}
	l := &Loop[T]{g: g, name: name, max: maxInFlight}
	if maxInFlight < 1 {
		g.errorf(name, "loop with maxInFlight %d: need at least 1", maxInFlight)
		l.max = 1
	}
	l.freed = make(chan struct{}, l.max)
	g.mu.Lock()
	g.loops = append(g.loops, l)
	g.mu.Unlock()
	return l
}

func (l *Loop[T]) check() []error {
	var errs []error
	for _, part := range []struct {
		what  string
		wired bool
	}{{"Enter", l.enter != nil}, {"Return", l.back != nil}, {"Exit", l.exit != nil}} {
		if !part.wired {
			errs = append(errs, &WiringError{l.name, fmt.Sprintf("loop %s is never called", part.what)})
		}
	}
	return errs
}

// MaxInFlight returns the loop's bound.
func (l *Loop[T]) MaxInFlight() int { return l.max }

// Enter adds the node "<loop>.enter", which merges new items from in with the items
// coming back through Return and feeds them to the body. Returned items go first,
// so sequences already being decoded are not starved by new ones. Its output closes
// when in has closed and no item is inside the loop.
func (l *Loop[T]) Enter(in Port[T], o ...NodeOption) Port[T] {
	n, name := endpoint(l, "Enter", kindLoopEnter, &l.enter, in.e, o)
	out := newEdge[T](n, name, n.cfg.buffer)
	n.run = func(rs *runState) {
		outCh := outletOf[T](out)
		defer outCh.close()
		l.runEnter(rs, n, in.e.ch.(chan T), l.back.ch.(chan T), outCh)
	}
	return Port[T]{out}
}

func (l *Loop[T]) runEnter(rs *runState, n *node, inCh, backCh chan T, outCh outlet[T]) {
	inflight, inClosed := 0, false
	for rs.ctx.Err() == nil {
		if inClosed && inflight == 0 {
			return
		}
		// Items coming back have priority over new admissions.
		select {
		case v, ok := <-backCh:
			if !ok {
				backCh = nil
				continue
			}
			n.c.in.Add(1)
			if !send(rs, &n.c, outCh, v, nil) {
				return
			}
			continue
		default:
		}
		var admit chan T
		if !inClosed && inflight < l.max {
			admit = inCh
		}
		t0 := rs.now()
		select {
		case v, ok := <-backCh:
			n.c.blockedRecv.Add(int64(rs.now() - t0))
			if !ok {
				backCh = nil
				continue
			}
			n.c.in.Add(1)
			if !send(rs, &n.c, outCh, v, nil) {
				return
			}
		case v, ok := <-admit:
			n.c.blockedRecv.Add(int64(rs.now() - t0))
			if !ok {
				inClosed = true
				continue
			}
			n.c.in.Add(1)
			inflight++
			if !send(rs, &n.c, outCh, v, nil) {
				return
			}
		case <-l.freed:
			n.c.blockedRecv.Add(int64(rs.now() - t0))
			inflight--
		case <-rs.done:
			return
		}
	}
}

// Return wires the back edge: items of in go back to Enter. Its channel has capacity
// maxInFlight (overriding the producer's Buffer), so sending to it never blocks for long.
func (l *Loop[T]) Return(in Port[T]) {
	if l.back != nil {
		l.g.errorf(l.name, "loop Return called twice")
		return
	}
	if in.e == nil {
		l.g.errorf(l.name, "loop Return of the zero Port")
		return
	}
	if l.enter == nil {
		l.g.errorf(l.name, "loop Return before Enter")
		return
	}
	l.g.consume(in.e, l.enter)
	if in.e.to == l.enter {
		in.e.capacity = l.max
		l.back = in.e
	}
}

// endpoint adds the loop's Enter or Exit node ("<loop>.enter", "<loop>.exit"),
// records it in *slot (once: a second call is a wiring error) and makes it the
// consumer of the input edge.
func endpoint[T any](l *Loop[T], method string, kind string, slot **node, in *edge, o []NodeOption) (*node, string) {
	name := l.name + strings.TrimPrefix(kind, "loop") // "<loop>.enter", "<loop>.exit"
	n := l.g.addNode(name, kind, o)
	if *slot != nil {
		l.g.errorf(l.name, "loop %s called twice", method)
	} else {
		*slot = n
	}
	if in == nil {
		l.g.errorf(name, "input is the zero Port")
	} else {
		l.g.consume(in, n)
	}
	return n, name
}

// Exit adds the node "<loop>.exit": items of in leave the loop through it, and each
// one frees a slot for a new admission as soon as Exit receives it.
func (l *Loop[T]) Exit(in Port[T], o ...NodeOption) Port[T] {
	n, name := endpoint(l, "Exit", kindLoopExit, &l.exit, in.e, o)
	out := newEdge[T](n, name, n.cfg.buffer)
	n.run = func(rs *runState) {
		inCh := in.e.ch.(chan T)
		outCh := outletOf[T](out)
		defer outCh.close()
		for rs.ctx.Err() == nil {
			v, ok := recv(rs, &n.c, inCh, nil)
			if !ok {
				return
			}
			select {
			case l.freed <- struct{}{}:
			case <-rs.done:
				return
			}
			if !send(rs, &n.c, outCh, v, nil) {
				return
			}
		}
	}
	return Port[T]{out}
}
