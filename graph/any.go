package graph

import (
	"fmt"
	"reflect"
)

// The type-erased twin of Then, for code that wires stages chosen at run time (the
// TOML pipeline loader). Types are compared when wiring, with reflect.Type equality,
// so a mismatch is an error before Run, never a panic inside it. Channels stay typed.

// AnyPort is a Port whose item type is known only as a reflect.Type.
type AnyPort struct{ e *edge }

// Any erases p's type.
func (p Port[T]) Any() AnyPort { return AnyPort{p.e} }

// Type returns the type of the port's items, or nil for the zero AnyPort.
func (p AnyPort) Type() reflect.Type {
	if p.e == nil {
		return nil
	}
	return p.e.typ
}

// Name returns the port's name (see Port.Name).
func (p AnyPort) Name() string {
	if p.e == nil {
		return ""
	}
	return p.e.label
}

// PortOf restores the typed Port, or fails with ErrTypeMismatch.
func PortOf[T any](p AnyPort) (Port[T], error) {
	want := reflect.TypeFor[T]()
	if p.e == nil {
		return Port[T]{}, fmt.Errorf("graph: PortOf[%v]: zero AnyPort", want)
	}
	if p.e.typ != want {
		return Port[T]{}, fmt.Errorf("graph: port %q: %w: carries %v, want %v", p.e.label, ErrTypeMismatch, p.e.typ, want)
	}
	return Port[T]{p.e}, nil
}

// AnyStage is a Stage whose item types are known only as reflect.Types. Only Erase
// makes one.
type AnyStage interface {
	In() reflect.Type
	Out() reflect.Type
	// Stage returns the wrapped Stage[In, Out].
	Stage() any
	then(name string, in *edge, o []NodeOption) AnyPort
}

type erased[In, Out any] struct{ s Stage[In, Out] }

// Erase hides s's types behind an AnyStage.
func Erase[In, Out any](s Stage[In, Out]) AnyStage { return erased[In, Out]{s} }

func (e erased[In, Out]) In() reflect.Type  { return reflect.TypeFor[In]() }
func (e erased[In, Out]) Out() reflect.Type { return reflect.TypeFor[Out]() }
func (e erased[In, Out]) Stage() any        { return e.s }
func (e erased[In, Out]) then(name string, in *edge, o []NodeOption) AnyPort {
	return Then(name, Port[In]{in}, e.s, o...).Any()
}

// ThenAny is Then for erased ports and stages. A type mismatch is an error naming
// the node and both types, returned here rather than at Run.
func ThenAny(name string, in AnyPort, s AnyStage, o ...NodeOption) (AnyPort, error) {
	switch {
	case in.e == nil:
		return AnyPort{}, fmt.Errorf("graph: node %q: input is the zero AnyPort", name)
	case s == nil:
		return AnyPort{}, fmt.Errorf("graph: node %q: nil AnyStage", name)
	case in.e.typ != s.In():
		return AnyPort{}, fmt.Errorf("graph: node %q: %w: port %q carries %v, stage takes %v",
			name, ErrTypeMismatch, in.e.label, in.e.typ, s.In())
	}
	return s.then(name, in.e, o), nil
}
