package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// obj is a JSON object that remembers its key order: the order of a
// schema's "properties" is the order of the generated output.
type obj struct {
	keys []string
	vals map[string]any
}

func (o *obj) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *obj) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func newObj() *obj { return &obj{vals: map[string]any{}} }

// maxJSONDepth bounds nesting while decoding a schema, so hostile input ends
// in an error rather than a stack overflow.
const maxJSONDepth = 1000

// decodeOrdered parses one JSON value into nil, bool, json.Number, string,
// []any and *obj. A duplicate key is an error (which of the two a
// validator would honour is not defined).
func decodeOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("offset %d: expected end of input after the JSON value", d.InputOffset())
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("offset %d: nested deeper than %d", d.InputOffset(), maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return nil, fmt.Errorf("offset %d: %w", d.InputOffset(), err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObj()
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, fmt.Errorf("offset %d: %w", d.InputOffset(), err)
				}
				k := kt.(string)
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("offset %d: duplicate key %q", d.InputOffset(), k)
				}
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, fmt.Errorf("offset %d: %w", d.InputOffset(), err)
			}
			return o, nil
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, fmt.Errorf("offset %d: %w", d.InputOffset(), err)
			}
			return a, nil
		}
		return nil, fmt.Errorf("offset %d: unexpected %q", d.InputOffset(), t)
	default:
		return t, nil
	}
}

// writeCompact writes v as compact JSON, object keys in their order,
// strings escaped as encoding/json escapes them but with <, > and & kept.
func writeCompact(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case json.Number:
		sb.WriteString(x.String())
	case string:
		writeJSONString(sb, x)
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCompact(sb, e)
		}
		sb.WriteByte(']')
	case *obj:
		sb.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, k)
			sb.WriteByte(':')
			writeCompact(sb, x.vals[k])
		}
		sb.WriteByte('}')
	}
}

func compactString(v any) string {
	var sb strings.Builder
	writeCompact(&sb, v)
	return sb.String()
}

func writeJSONString(sb *strings.Builder, s string) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a Go string always encodes
	sb.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// jsonKind is the JSON Schema type of a decoded value ("integer" for
// numbers without a fractional part).
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if r, ok := new(big.Rat).SetString(x.String()); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *obj:
		return "object"
	}
	return ""
}

// constExpr is a grammar of the compact JSON texts equal to v under JSON
// Schema's equality: object keys in v's order, and a number in any
// decimal spelling of its value (1, 1.0, 1.00; 2.5, 2.50), without an
// exponent.
func constExpr(v any) string {
	switch x := v.(type) {
	case json.Number:
		return numberSpellings(x)
	case []any:
		parts := []string{`"["`}
		for i, e := range x {
			if i > 0 {
				parts = append(parts, `","`)
			}
			parts = append(parts, constExpr(e))
		}
		return strings.Join(append(parts, `"]"`), " ")
	case *obj:
		parts := []string{`"{"`}
		for i, k := range x.keys {
			var sb strings.Builder
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(&sb, k)
			sb.WriteByte(':')
			parts = append(parts, lit(sb.String()), constExpr(x.vals[k]))
		}
		return strings.Join(append(parts, `"}"`), " ")
	}
	return lit(compactString(v))
}

func numberSpellings(n json.Number) string {
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return lit(n.String())
	}
	sign := ""
	switch r.Sign() {
	case 0:
		return `"-"? "0" ( "." "0"{1,16} )?`
	case -1:
		sign = `"-" `
		r.Neg(r)
	}
	if r.IsInt() {
		return "( " + sign + lit(r.Num().String()) + ` ( "." "0"{1,16} )? )`
	}
	for prec := 1; prec <= 40; prec++ {
		f := r.FloatString(prec)
		if back, ok := new(big.Rat).SetString(f); ok && back.Cmp(r) == 0 {
			return "( " + sign + lit(f) + ` "0"{0,16} )`
		}
	}
	return lit(n.String())
}
