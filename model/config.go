// Package model holds what every architecture shares: typed access to a model
// file's metadata (Config), the hyperparameters the engine needs (Arch), the
// architecture registry, the struct-tag weight binder, the per-batch activation
// State, and Load, which opens a GGUF or llama2.c file behind an offload.Store.
package model

import (
	"fmt"
	"math"
	"strings"
)

// Config is typed, read-only access to a model's metadata with defaults, in the
// shape of ollama's fs.Config. Keys without a dot-qualified family are looked up
// under the architecture's prefix: c.Uint("block_count") reads "llama.block_count";
// keys starting with "general." or "tokenizer." are used as given.
type Config struct {
	arch string
	kv   map[string]any
}

// NewConfig wraps a metadata map (GGUF key → value).
func NewConfig(arch string, kv map[string]any) Config { return Config{arch: arch, kv: kv} }

// Architecture is general.architecture.
func (c Config) Architecture() string { return c.arch }

func (c Config) key(k string) string {
	if strings.HasPrefix(k, "general.") || strings.HasPrefix(k, "tokenizer.") || c.arch == "" {
		return k
	}
	return c.arch + "." + k
}

// Raw returns the value stored under the full key.
func (c Config) Raw(fullKey string) (any, bool) {
	v, ok := c.kv[fullKey]
	return v, ok
}

// Keys lists every metadata key.
func (c Config) Keys() []string {
	keys := make([]string, 0, len(c.kv))
	for k := range c.kv {
		keys = append(keys, k)
	}
	return keys
}

// Has reports whether the key is present.
func (c Config) Has(k string) bool { _, ok := c.kv[c.key(k)]; return ok }

// String returns the value or the first default (or "").
func (c Config) String(k string, def ...string) string {
	if s, ok := c.kv[c.key(k)].(string); ok {
		return s
	}
	if len(def) > 0 {
		return def[0]
	}
	return ""
}

// Uint returns an integer value (any integer type ≥ 0) or the first default.
func (c Config) Uint(k string, def ...uint64) uint64 {
	if v, ok := asInt(c.kv[c.key(k)]); ok && v >= 0 {
		return uint64(v)
	}
	if len(def) > 0 {
		return def[0]
	}
	return 0
}

// Float returns a float (or integer) value or the first default.
func (c Config) Float(k string, def ...float64) float64 {
	switch v := c.kv[c.key(k)].(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	if v, ok := asInt(c.kv[c.key(k)]); ok {
		return float64(v)
	}
	if len(def) > 0 {
		return def[0]
	}
	return 0
}

// Bool returns a bool value or the first default.
func (c Config) Bool(k string, def ...bool) bool {
	if b, ok := c.kv[c.key(k)].(bool); ok {
		return b
	}
	if len(def) > 0 {
		return def[0]
	}
	return false
}

// Strings returns a string array value.
func (c Config) Strings(k string) []string {
	s, _ := c.kv[c.key(k)].([]string)
	return s
}

func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	}
	return 0, false
}

// describe formats a value for error messages.
func describe(v any) string {
	if v == nil {
		return "absent"
	}
	return fmt.Sprintf("%v (%T)", v, v)
}
