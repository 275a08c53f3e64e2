package graph

import "context"

// Emit sends v downstream. It blocks while the receiving buffer is full, which is
// how backpressure reaches a stage, and returns ctx.Err() once the run is cancelled.
// Emitting hands v over: the sender must not touch it again.
//
// An Emit is only valid during the call it was passed to (Process, Flush or a
// Source's generator) and on that call's goroutine.
type Emit[T any] func(ctx context.Context, v T) error

// Stage turns a stream of In into a stream of Out; Process may emit 0..n times per input.
//
// Stages start no goroutines and own no channels: the engine does, so that it can
// account for every item, cancel everything on the first error and measure where
// time goes. With Workers(n>1) the engine calls Process from n goroutines at once,
// so the stage must then be safe for concurrent use.
type Stage[In, Out any] interface {
	Process(ctx context.Context, in In, emit Emit[Out]) error
}

// StageFunc adapts a plain function to a Stage.
type StageFunc[In, Out any] func(ctx context.Context, in In, emit Emit[Out]) error

// Process calls f.
func (f StageFunc[In, Out]) Process(ctx context.Context, in In, emit Emit[Out]) error {
	return f(ctx, in, emit)
}

// Map adapts a one-in, one-out function to a Stage. It is the common case and
// saves stage authors the emit call.
func Map[In, Out any](f func(ctx context.Context, in In) (Out, error)) Stage[In, Out] {
	return StageFunc[In, Out](func(ctx context.Context, in In, emit Emit[Out]) error {
		out, err := f(ctx, in)
		if err != nil {
			return err
		}
		return emit(ctx, out)
	})
}

// The optional lifecycle methods below are found by type assertion on the value given
// to Then (Beam DoFn style), so a stage implements only the ones it needs.

// Setupper is implemented by stages that acquire resources. Setup runs once, on the
// node's goroutine, before the first Process. If it fails, Process is never called.
type Setupper interface {
	Setup(ctx context.Context) error
}

// Flusher is implemented by stages that hold items back (batchers, reorderers).
// Flush runs once after the input has closed and every Process call has returned,
// and may emit. It does not run when the graph is cancelled or failed.
type Flusher[Out any] interface {
	Flush(ctx context.Context, emit Emit[Out]) error
}

// Closer is implemented by stages that release resources. Close runs exactly once
// when the node stops, whether it finished, failed or was cancelled, and even when
// Setup failed; it runs after Flush and before the node's output is closed.
type Closer interface {
	Close() error
}
