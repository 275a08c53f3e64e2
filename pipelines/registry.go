package pipelines

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
)

// Kind is one stage kind, registered as a constructor (benthos registers its
// components the same way): its name in TOML, its params, the element types
// of its ports, its part in the decode loop, what its decoding strategy asks
// of the engine before the engine sizes itself (Needs), and the builder that
// adds its nodes to the graph or its strategy to the step
// (BuildContext.Env.Loop). A kind registered on a Registry is usable from
// TOML with no change to this package, the engine or the scheduler: a
// drafter declares its headroom and its draft cache in Needs and sets
// itself as the loop's engine strategy in Build, as draft_tree does.
type Kind struct {
	// Name is the value of kind = "..." (lower_snake).
	Name string
	// Doc is one line shown by Describe.
	Doc string
	// Stateless kinds keep nothing between inputs, so Workers > 1 is allowed.
	Stateless bool
	// Fusable kinds accept fuse = true: their nodes then run on the
	// goroutine of the node before them (graph.Fused), which pays where
	// items pass one at a time, as the decode loop's steps do, and costs
	// the overlap of a stage with its neighbours where they do not. Build
	// must then honour it: BuildContext.Options carries graph.Fused.
	Fusable bool
	// NewParams returns a pointer to a fresh params struct holding the
	// defaults; the loader decodes [stage.params] over it. The struct's
	// toml tags are the only keys accepted. If the struct has a
	// Validate() error method it is called after decoding (return a
	// *ParamError to get the key's line in the message). nil means the
	// kind takes no params and any key under [stage.params] is an error.
	NewParams func() any
	// In and Out are the element types of the stage's input and output
	// ports. Parse checks that each stage's In is the Out of the stage
	// before it; the first stage takes RequestType, the last gives
	// ResultType.
	In, Out reflect.Type
	// Loop is the stage's part in the decode loop, if any.
	Loop LoopRole
	// Needs, when set, is what the kind's decoding strategy asks of the
	// engine before it sizes its scheduler and KV cache (headroom for draft
	// rows, a draft model's share of kv_budget), from the stage's params.
	// The engine sums it over the pipeline's stages (Pipeline.Needs).
	Needs func(params any) decode.Needs
	// Build adds the stage's node(s) to b.Graph, reading b.In (whose type
	// is In), and returns the stage's output port (whose type must be Out).
	Build func(b *BuildContext) (graph.AnyPort, error)
}

// LoopRole is what a kind does to the decode loop. A pipeline has one loop:
// one stage opens it and a later one closes it; the stages between run once
// per step, inside it.
type LoopRole uint8

const (
	// LoopNone: the stage neither opens nor closes the loop.
	LoopNone LoopRole = iota
	// LoopOpen: the stage opens the loop (the scheduler). Its Build calls
	// BuildContext.OpenLoop and returns the port of steps entering the body.
	LoopOpen
	// LoopClose: the stage closes the loop (sample). Its Build calls
	// BuildContext.CloseLoop and returns the port CloseLoop gives: what
	// leaves the loop (the scheduler's retired sessions).
	LoopClose
)

func (r LoopRole) String() string {
	switch r {
	case LoopOpen:
		return "opens the loop"
	case LoopClose:
		return "closes the loop"
	}
	return "none"
}

// The types at the two ends of every pipeline: Build feeds the first stage
// requests and sinks the last stage's results.
var (
	RequestType = reflect.TypeFor[session.Request]()
	ResultType  = reflect.TypeFor[stages.Result]()
)

// BuildContext is what a Kind's Build gets: the graph being built, the
// engine's parts, the stage with its parsed settings, the port it reads and
// the decode loop. Build (the function) fills it for each stage in turn.
type BuildContext struct {
	Graph  *graph.Graph
	Env    *stages.Env
	Logger zerolog.Logger
	// Stage is the stage being built: ID, Buffer, Workers and the Params
	// its kind's NewParams made.
	Stage *StageSpec
	// In is the previous stage's output (for the first stage, the requests).
	In graph.AnyPort

	loop *DecodeLoop
}

// DecodeLoop is the decode loop being built: one *sched.Step circulates in
// it, one turn per forward pass.
type DecodeLoop struct {
	Steps  *graph.Loop[*sched.Step]
	Opener *StageSpec // the stage that opened it
	after  func() graph.AnyPort
	closed bool
}

// Options returns graph.Buffer and graph.Workers for the stage's settings,
// and graph.Fused when it has fuse = true.
func (b *BuildContext) Options() []graph.NodeOption {
	o := []graph.NodeOption{graph.Buffer(b.Stage.Buffer), graph.Workers(b.Stage.Workers)}
	if b.Stage.Fuse {
		o = append(o, graph.Fused())
	}
	return o
}

// Loop returns the decode loop while it is open, else nil.
func (b *BuildContext) Loop() *DecodeLoop {
	if b.loop == nil || b.loop.closed {
		return nil
	}
	return b.loop
}

// OpenLoop records the loop a LoopOpen stage made (it wires the loop's Enter
// and Exit itself). after makes the port the loop's closer returns, what
// leaves the loop; it runs when the loop closes, so its nodes come after the
// loop's in the graph.
func (b *BuildContext) OpenLoop(l *graph.Loop[*sched.Step], after func() graph.AnyPort) error {
	if b.loop != nil {
		return fmt.Errorf("the decode loop is already opened by stage %q", b.loop.Opener.ID)
	}
	b.loop = &DecodeLoop{Steps: l, Opener: b.Stage, after: after}
	return nil
}

// CloseLoop returns last to the loop's start and returns what leaves the loop.
func (b *BuildContext) CloseLoop(last graph.Port[*sched.Step]) (graph.AnyPort, error) {
	l := b.Loop()
	if l == nil {
		return graph.AnyPort{}, fmt.Errorf("no decode loop is open")
	}
	l.Steps.Return(last)
	l.closed = true
	return l.after(), nil
}

// Registry holds stage kinds. The zero value is an empty registry ready to
// use; it is safe for concurrent use. A pipeline remembers the registry that
// parsed it, and Build uses the same one.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]Kind
	order []string // registration order, for messages
}

// Default holds the built-in kinds; the package-level Parse, Load and Preset
// use it.
var Default = Builtin()

// Register adds a kind. A second kind with the same name is ErrDuplicateKind.
func (r *Registry) Register(k Kind) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("pipelines: register kind %q: %s: %w", k.Name, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if !isLowerSnake(k.Name) {
		return bad("want a lower_snake name")
	}
	if k.NewParams != nil {
		p := k.NewParams()
		if t := reflect.TypeOf(p); t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			return bad("NewParams returns %T, want a pointer to a struct", p)
		}
	}
	if k.In == nil || k.Out == nil || k.Build == nil {
		return bad("want In, Out and Build")
	}
	if k.Loop > LoopClose {
		return bad("Loop = %d is not a LoopRole", k.Loop)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[k.Name]; dup {
		return fmt.Errorf("pipelines: register kind %q: %w", k.Name, ErrDuplicateKind)
	}
	if r.kinds == nil {
		r.kinds = make(map[string]Kind)
	}
	r.kinds[k.Name] = k
	r.order = append(r.order, k.Name)
	return nil
}

// MustRegister is Register for package initialisation; it panics on error.
func (r *Registry) MustRegister(k Kind) {
	if err := r.Register(k); err != nil {
		panic(err)
	}
}

// Lookup returns the kind registered under name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

// Kinds lists the registered kind names in registration order.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// kindsWhere lists, for a message, the kinds for which keep is true.
func (r *Registry) kindsWhere(keep func(Kind) bool) string {
	var names []string
	for _, n := range r.Kinds() {
		if k, _ := r.Lookup(n); keep(k) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none registered"
	}
	return kindList(names)
}

func isLowerSnake(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// kindList renders the known kinds for an error message.
func kindList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
