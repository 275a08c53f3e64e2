package graph

import (
	"context"
	"time"
)

// The per-item hot path. Both directions try a non-blocking channel operation
// first and read the clock only when they have to wait. Worker loops keep a mark,
// the time their previous item ended, so user code costs one clock read per item:
// an uncontended hop is a channel operation plus that read. The clock is
// time.Since(base), which reads only the monotonic clock (and synctest's fake one
// inside a bubble).

func (rs *runState) now() time.Duration { return time.Since(rs.base) }

// emitter is the engine side of an Emit: one per worker goroutine.
type emitter[T any] struct {
	rs  *runState
	c   *counters
	out outlet[T]
	// blocked is the time since the worker last reset it that is not the
	// node's own work (for Busy): waiting for room downstream, and the time
	// a fused consumer spent on the items emitted.
	blocked time.Duration
}

func (e *emitter[T]) emit(ctx context.Context, v T) error {
	if e.out.in != nil {
		d, err := e.out.in.push(ctx, v, e.c)
		e.blocked += d
		return err
	}
	select {
	case e.out.ch <- v:
		e.c.out.Add(1)
		return nil
	default:
	}
	return e.emitSlow(ctx, v)
}

func (e *emitter[T]) emitSlow(ctx context.Context, v T) error {
	t0 := e.rs.now()
	var err error
	if ctx == e.rs.ctx || ctx == nil {
		select {
		case e.out.ch <- v:
		case <-e.rs.done:
			err = e.rs.ctx.Err()
		}
	} else {
		select {
		case e.out.ch <- v:
		case <-e.rs.done:
			err = e.rs.ctx.Err()
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	d := e.rs.now() - t0
	e.blocked += d
	e.c.blockedSend.Add(int64(d))
	if err == nil {
		e.c.out.Add(1)
	}
	return err
}

// send is emit for engine-owned nodes; false means the run was cancelled. If send
// has to wait and mark is not nil, *mark becomes the time the wait ended; a
// fused consumer's time moves *mark on by as much.
func send[T any](rs *runState, c *counters, o outlet[T], v T, mark *time.Duration) bool {
	if o.in != nil {
		d, err := o.in.push(rs.ctx, v, c)
		if mark != nil {
			*mark += d
		}
		return err == nil
	}
	ch := o.ch
	select {
	case ch <- v:
		c.out.Add(1)
		return true
	default:
	}
	t0 := rs.now()
	ok := true
	select {
	case ch <- v:
		c.out.Add(1)
	case <-rs.done:
		ok = false
	}
	now := rs.now()
	c.blockedSend.Add(int64(now - t0))
	if mark != nil {
		*mark = now
	}
	return ok
}

// recv takes the next input. ok is false when the input has closed or the run
// was cancelled; the caller tells them apart with rs.ctx.Err(). A worker passes
// its mark, which must be fresh (set just before): the wait is then measured from
// it, saving a clock read, and *mark becomes the time the wait ended.
func recv[T any](rs *runState, c *counters, ch chan T, mark *time.Duration) (v T, ok bool) {
	select {
	case v, ok = <-ch:
		if ok {
			c.in.Add(1)
		}
		return v, ok
	default:
	}
	var t0 time.Duration
	if mark != nil {
		t0 = *mark
	} else {
		t0 = rs.now()
	}
	select {
	case v, ok = <-ch:
	case <-rs.done:
	}
	now := rs.now()
	c.blockedRecv.Add(int64(now - t0))
	if mark != nil {
		*mark = now
	}
	if ok {
		c.in.Add(1)
	}
	return v, ok
}

// busy adds the user-code time from *mark to now, minus the part spent blocked in
// emit, and moves the mark to now.
func busy(rs *runState, c *counters, mark *time.Duration, blocked time.Duration) {
	now := rs.now()
	if d := now - *mark - blocked; d > 0 {
		c.busy.Add(int64(d))
	}
	*mark = now
}

// process calls s.Process, turning a panic into an error. It is a named function
// rather than a closure so the hot path does not allocate.
func process[In, Out any](ctx context.Context, s Stage[In, Out], v In, emit Emit[Out]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return s.Process(ctx, v, emit)
}

func sinkCall[In any](ctx context.Context, fn func(context.Context, In) error, v In) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return fn(ctx, v)
}

func predCall[T any](pred func(T) bool, v T) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return pred(v), nil
}

// lifecycle runs Setup (if any), body, then Close (if any) always, reporting every
// error through rs.fail. body runs only when Setup succeeded.
func lifecycle(rs *runState, n *node, stage any, body func()) {
	if c, ok := stage.(Closer); ok {
		defer func() { rs.fail(n, call(c.Close)) }()
	}
	if s, ok := stage.(Setupper); ok {
		if err := call(func() error { return s.Setup(rs.ctx) }); err != nil {
			rs.fail(n, err)
			return
		}
	}
	body()
}
