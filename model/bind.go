package model

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/offload"
)

var refType = reflect.TypeFor[offload.Ref]()

// Bind fills dst, a pointer to a struct whose fields name tensors by tag, from
// the store's index (ollama's populateFields, with Refs instead of tensors):
//
//	Q      offload.Ref  `gguf:"attn_q.weight"`                       required
//	Q      offload.Ref  `gguf:"attn_q.weight,opt"`                   optional: the zero Ref when absent
//	Bias   *offload.Ref `gguf:"attn_q.bias"`                         optional: nil when absent
//	Output offload.Ref  `gguf:"output.weight,alt:token_embd.weight"` first name present wins
//	Layers []Layer      `gguf:"blk"`                                 n elements, prefixed "blk.<i>."
//	Attn   Attention                                                  untagged struct: same prefix
//
// Every missing required tensor is reported, not just the first.
func Bind(dst any, store offload.Store, layers int, file string) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("model: Bind needs a pointer to a struct, got %T", dst)
	}
	var missing []string
	bindStruct(v.Elem(), "", store, layers, &missing)
	if len(missing) > 0 {
		return fmt.Errorf("model: %s: missing tensor(s) %s", file, strings.Join(missing, ", "))
	}
	return nil
}

func bindStruct(v reflect.Value, prefix string, store offload.Store, layers int, missing *[]string) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, hasTag := f.Tag.Lookup("gguf")
		names := strings.Split(tag, ",")
		var alts []string
		opt := false
		for _, n := range names[1:] {
			if a, ok := strings.CutPrefix(n, "alt:"); ok {
				alts = append(alts, a)
			}
			opt = opt || n == "opt"
		}
		fv := v.Field(i)
		switch {
		case f.Type == refType:
			if r, ok := lookup(store, prefix, names[0], alts); ok {
				fv.Set(reflect.ValueOf(r))
			} else if !opt {
				*missing = append(*missing, prefix+names[0])
			}
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem() == refType:
			if r, ok := lookup(store, prefix, names[0], alts); ok {
				fv.Set(reflect.ValueOf(&r))
			}
		case f.Type.Kind() == reflect.Struct:
			p := prefix
			if hasTag && names[0] != "" {
				p += names[0] + "."
			}
			bindStruct(fv, p, store, layers, missing)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			s := reflect.MakeSlice(f.Type, layers, layers)
			for j := range layers {
				bindStruct(s.Index(j), fmt.Sprintf("%s%s.%d.", prefix, names[0], j), store, layers, missing)
			}
			fv.Set(s)
		}
	}
}

func lookup(store offload.Store, prefix, name string, alts []string) (offload.Ref, bool) {
	if r, ok := store.Lookup(prefix + name); ok {
		return r, true
	}
	for _, a := range alts {
		if r, ok := store.Lookup(a); ok { // alternatives are full names (tied embeddings)
			return r, true
		}
	}
	return offload.Ref{}, false
}
