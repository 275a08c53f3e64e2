package pipelines

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Kind describes one stage kind: its name in TOML, whether it may run with
// several workers, and its params type.
type Kind struct {
	// Name is the value of kind = "..." (lower_snake).
	Name string
	// Doc is one line shown by Describe.
	Doc string
	// Stateless kinds keep nothing between inputs, so Workers > 1 is allowed.
	Stateless bool
	// NewParams returns a pointer to a fresh params struct holding the
	// defaults; the loader decodes [stage.params] over it. The struct's
	// toml tags are the only keys accepted. If the struct has a
	// Validate() error method it is called after decoding (return a
	// *ParamError to get the key's line in the message). nil means the
	// kind takes no params and any key under [stage.params] is an error.
	NewParams func() any
}

// Chain is one accepted sequence of stage kinds: a pipeline must contain
// exactly these kinds, each once, in this order.
type Chain struct {
	Name  string
	Kinds []string
}

func (c Chain) String() string { return strings.Join(c.Kinds, " → ") }

// Registry holds stage kinds and chains. The zero value is an empty registry
// ready to use; it is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	kinds  map[string]Kind
	order  []string // registration order, for messages
	chains []Chain
}

// Default holds the built-in kinds; the package-level Parse, Load and Preset
// use it.
var Default = Builtin()

// Register adds a kind. A second kind with the same name is ErrDuplicateKind.
func (r *Registry) Register(k Kind) error {
	if !isLowerSnake(k.Name) {
		return fmt.Errorf("pipelines: register kind %q: want a lower_snake name: %w", k.Name, ErrInvalid)
	}
	if k.NewParams != nil {
		p := k.NewParams()
		if t := reflect.TypeOf(p); t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			return fmt.Errorf("pipelines: register kind %q: NewParams returns %T, want a pointer to a struct: %w", k.Name, p, ErrInvalid)
		}
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

// RegisterChain adds an accepted order of kinds. Every kind must already be
// registered and appear once; a second chain with the same name is
// ErrDuplicateKind.
func (r *Registry) RegisterChain(c Chain) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Name == "" || len(c.Kinds) == 0 {
		return fmt.Errorf("pipelines: register chain %q: want a name and at least one kind: %w", c.Name, ErrInvalid)
	}
	for _, old := range r.chains {
		if old.Name == c.Name {
			return fmt.Errorf("pipelines: register chain %q: %w", c.Name, ErrDuplicateKind)
		}
	}
	seen := map[string]bool{}
	for _, k := range c.Kinds {
		if _, ok := r.kinds[k]; !ok {
			return fmt.Errorf("pipelines: register chain %q: kind %q is not registered: %w", c.Name, k, ErrUnknownKind)
		}
		if seen[k] {
			return fmt.Errorf("pipelines: register chain %q: kind %q appears twice: %w", c.Name, k, ErrInvalid)
		}
		seen[k] = true
	}
	r.chains = append(r.chains, Chain{Name: c.Name, Kinds: slices.Clone(c.Kinds)})
	return nil
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

// Chains lists the registered chains in registration order.
func (r *Registry) Chains() []Chain {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Chain, len(r.chains))
	for i, c := range r.chains {
		out[i] = Chain{Name: c.Name, Kinds: slices.Clone(c.Kinds)}
	}
	return out
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
