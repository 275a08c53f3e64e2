package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// SchemaError is a JSON Schema the compiler refuses: Pointer is where in the
// schema (a JSON pointer fragment, "#" for the root), Keyword the keyword
// at fault, Msg why.
type SchemaError struct {
	Pointer, Keyword, Msg string
	Err                   error // a wrapped cause (ErrEmpty), or nil
}

func (e *SchemaError) Error() string {
	if e.Keyword == "" {
		return fmt.Sprintf("schema %s: %s", e.Pointer, e.Msg)
	}
	return fmt.Sprintf("schema %s: keyword %q: %s", e.Pointer, e.Keyword, e.Msg)
}

func (e *SchemaError) Unwrap() error { return e.Err }

// The generated JSON is compact and fixed in form. These caps are llama.cpp's:
// a number's integral part has at most 16 digits and its fraction at most
// 16; the exponent, which llama.cpp lets run to 16 digits, has at most 3
// here (the range of a float64).
const (
	maxIntDigits  = 16
	maxFracDigits = 16
	maxExpDigits  = 3
)

// Keywords that carry no constraint: ignored.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true, "$comment": true,
	"$schema": true, "$id": true, "id": true, "$anchor": true, "deprecated": true, "readOnly": true,
	"writeOnly": true, "contentEncoding": true, "contentMediaType": true, "contentSchema": true,
	"$vocabulary": true, "$dynamicAnchor": true,
	// OpenAPI's (and Pydantic's) hint beside oneOf: validation does not
	// read it; oneOf is enforced only when its branches cannot overlap.
	"discriminator": true,
}

// Keywords the compiler enforces (for some types; see genType).
var handled = map[string]bool{
	"$ref": true, "$defs": true, "definitions": true, "type": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"properties": true, "required": true, "additionalProperties": true, "minProperties": true, "maxProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true, "uniqueItems": true,
}

var typeKeywords = map[string][]string{
	"string":  {"minLength", "maxLength", "pattern", "format"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
	"object":  {"properties", "required", "additionalProperties", "minProperties", "maxProperties"},
	"array":   {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"},
}

var allTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// schemaCache holds compiled schemas by their canonical (compact) bytes.
var schemaCache = struct {
	sync.Mutex
	m map[string]*Grammar
}{m: map[string]*Grammar{}}

const maxSchemaCache = 256

// FromJSONSchema compiles a JSON Schema (draft 4 to 2020-12) to a grammar
// of the compact JSON texts that validate under it. See the package
// documentation for the keywords and the form of the output. A keyword the
// compiler cannot enforce is a *SchemaError naming it and where it is; a
// schema no value satisfies wraps ErrEmpty. Compiled schemas are cached by
// their compact bytes, so the same schema compiles once per process.
func FromJSONSchema(schema []byte) (*Grammar, error) {
	v, err := decodeOrdered(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: invalid JSON: %w", err)
	}
	key := compactString(v)
	schemaCache.Lock()
	g, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return g, nil
	}
	g, err = compileSchema(v)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if len(schemaCache.m) >= maxSchemaCache {
		clear(schemaCache.m)
	}
	schemaCache.m[key] = g
	schemaCache.Unlock()
	return g, nil
}

func compileSchema(v any) (*Grammar, error) {
	src, c, err := schemaSource(v)
	if err != nil {
		return nil, err
	}
	g, err := ParseGBNF(src)
	if err != nil {
		if errors.Is(err, ErrEmpty) {
			msg := "no JSON value satisfies the schema"
			if len(c.emptyAt) > 0 {
				msg += " (unsatisfiable: " + strings.Join(c.emptyAt, "; ") + ")"
			}
			return nil, &SchemaError{Pointer: "#", Msg: msg, Err: ErrEmpty}
		}
		return nil, fmt.Errorf("schema: internal error, generated grammar invalid: %w", err)
	}
	return g, nil
}

type compiler struct {
	root any
	// legacyRef: the schema declares draft 4, 6 or 7, where keywords beside
	// $ref are ignored; draft4: its identifiers are "id", not "$id".
	legacyRef, draft4 bool
	bases             map[string]*url.URL // schema pointer -> base URI
	resources         map[string]string   // absolute URI -> pointer of the schema with that $id
	anchors           map[string]string   // absolute URI#anchor -> pointer
	emptyAt           []string            // the first subschemas found to admit no value
	rules             []string            // "name ::= body" lines
	refs              map[string]string   // JSON pointer -> rule name
	prims             map[string]bool
	n                 int
	depth             int
}

// never is an expression with no string: an empty class. Alternatives
// that use it are pruned when the grammar is built, and a root left with
// nothing is ErrEmpty.
const never = `[^\x00-\U0010FFFF]`

func schemaSource(v any) (string, *compiler, error) {
	c := newCompiler(v)
	if o, ok := v.(*obj); ok {
		if d, ok := o.get("$schema"); ok {
			if err := knownMetaschema(d); err != nil {
				return "", nil, err
			}
		}
	}
	e, err := c.gen(v, "#")
	if err != nil {
		return "", nil, err
	}
	var sb strings.Builder
	sb.WriteString("root ::= " + e + "\n")
	for _, r := range c.rules {
		sb.WriteString(r + "\n")
	}
	return sb.String(), c, nil
}

// knownMetaschema accepts the $schema URIs of the drafts whose keywords the
// compiler knows; under another metaschema a keyword could mean anything.
func knownMetaschema(d any) error {
	ds, _ := d.(string)
	u := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(ds, "https://"), "http://"), "#")
	switch u {
	case "json-schema.org/draft-03/schema", "json-schema.org/draft-04/schema", "json-schema.org/draft-06/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema",
		"json-schema.org/schema":
		return nil
	}
	return refuse("#", "$schema", "unknown metaschema %q: its keywords' meaning cannot be known (draft 4 to 2020-12 are)", ds)
}

func newCompiler(v any) *compiler {
	c := &compiler{root: v, refs: map[string]string{}, prims: map[string]bool{},
		bases: map[string]*url.URL{}, resources: map[string]string{}, anchors: map[string]string{}}
	if o, ok := v.(*obj); ok {
		if d, ok := o.get("$schema"); ok {
			ds, _ := d.(string)
			for _, old := range []string{"draft-03", "draft-04", "draft-06", "draft-07"} {
				if strings.Contains(ds, old) {
					c.legacyRef = true
					c.draft4 = c.draft4 || old == "draft-03" || old == "draft-04"
				}
			}
		}
	}
	c.resources[defaultBase.String()] = "#"
	c.index(v, "#", defaultBase)
	return c
}

// empty notes that the schema at ptr admits no value (why), for the error
// when the whole schema turns out empty, and returns never.
func (c *compiler) empty(ptr, why string) string {
	if len(c.emptyAt) < 3 {
		c.emptyAt = append(c.emptyAt, ptr+": "+why)
	}
	return never
}

func (c *compiler) rule(prefix, body string) string {
	c.n++
	name := fmt.Sprintf("%s-%d", prefix, c.n)
	c.rules = append(c.rules, name+" ::= "+body)
	return name
}

// Primitive rules, written once when first used.
var primitives = map[string]string{
	"value":    `object | array | string | number | "true" | "false" | "null"`,
	"object":   `"{" ( string ":" value ( "," string ":" value )* )? "}"`,
	"array":    `"[" ( value ( "," value )* )? "]"`,
	"string":   `"\"" char* "\""`,
	"char":     `[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" uhex )`,
	"uhex":     `( [0-9a-cA-CeEfF] [0-9a-fA-F] | [dD] [0-7] ) [0-9a-fA-F]{2}`,
	"integral": `"0" | [1-9] [0-9]{0,15}`,
	"fraction": `"." [0-9]{1,16}`,
	"exponent": `[eE] [-+]? [0-9]{1,3}`,
	"number":   `"-"? integral fraction? exponent?`,
	"integer":  `"-"? integral`,
	"boolean":  `"true" | "false"`,
	"null":     `"null"`,
	"safe":     `[^"\\\x00-\x1F]`,
	"hex":      `[0-9a-fA-F]`,
	"date":     `[0-9]{4} "-" monthday | leapyear "-02-29"`,
	"monthday": `( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )`,
	"leapyear": `[0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00"`,
	"time":     `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`,
	"uuid":     `hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}`,
	"ipv4":     `octet "." octet "." octet "." octet`,
	"octet":    `"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]`,
	// Conservative subsets: labels of at most 32 characters, so that the
	// length limits (253 for a host name, 64 and 254 for an address) hold
	// by construction; a dot-separated local part of letters, digits and
	// _%+- (no quoted forms, no IP literals).
	"label":    `[A-Za-z0-9] ( [A-Za-z0-9\x2D]{0,30} [A-Za-z0-9] )?`,
	"hostname": `label ( "." label ){0,6}`,
	"email":    `atom ( "." atom )? "@" label ( "." label ){1,3}`,
	"atom":     `[A-Za-z0-9_%+\x2D]{1,31}`,
}

var primDeps = map[string][]string{
	"value": {"object", "array", "string", "number"}, "object": {"string", "value"}, "array": {"value"},
	"string": {"char"}, "char": {"uhex"}, "number": {"integral", "fraction", "exponent"}, "integer": {"integral"},
	"date": {"monthday", "leapyear"}, "uuid": {"hex"}, "ipv4": {"octet"}, "hostname": {"label"},
	"email": {"atom", "label"},
}

func (c *compiler) prim(name string) string {
	if !c.prims[name] {
		c.prims[name] = true
		c.rules = append(c.rules, name+" ::= "+primitives[name])
		for _, d := range primDeps[name] {
			c.prim(d)
		}
	}
	return name
}

// lit is a GBNF literal for s.
func lit(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02X`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

func alt(parts []string) string {
	switch len(parts) {
	case 0:
		return never
	case 1:
		return parts[0]
	}
	return "( " + strings.Join(parts, " | ") + " )"
}

func ptrJoin(ptr string, keys ...string) string {
	for _, k := range keys {
		k = strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		ptr += "/" + k
	}
	return ptr
}

func refuse(ptr, kw, format string, args ...any) error {
	return &SchemaError{Pointer: ptr, Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

// gen returns a GBNF expression for the values valid under schema s.
func (c *compiler) gen(s any, ptr string) (string, error) {
	if c.depth++; c.depth > 200 {
		return "", refuse(ptr, "", "schema nested deeper than 200 levels")
	}
	defer func() { c.depth-- }()
	switch x := s.(type) {
	case bool:
		if x {
			return c.prim("value"), nil
		}
		return c.empty(ptr, "the schema is false (or a combination that nothing satisfies)"), nil
	case *obj:
		return c.genObj(x, ptr)
	}
	return "", refuse(ptr, "", "expected a schema (an object or a boolean), found %s", jsonKind(s))
}

func without(o *obj, drop ...string) *obj {
	r := newObj()
	for _, k := range o.keys {
		if !slices.Contains(drop, k) {
			r.set(k, o.vals[k])
		}
	}
	return r
}

// hasAssertions reports whether o has keywords other than annotations and
// definitions.
func hasAssertions(o *obj) bool {
	for _, k := range o.keys {
		if !annotations[k] && k != "$defs" && k != "definitions" {
			return true
		}
	}
	return false
}

func (c *compiler) genObj(o *obj, ptr string) (string, error) {
	for _, k := range o.keys {
		if !annotations[k] && !handled[k] {
			return "", refuse(ptr, k, "not supported (it cannot be enforced by the grammar)")
		}
	}
	if r, ok := o.get("$ref"); ok {
		rs, ok := r.(string)
		if !ok {
			return "", refuse(ptr, "$ref", "expected a string")
		}
		rest := without(o, "$ref")
		if !hasAssertions(rest) || c.legacyRef {
			target, tptr, err := c.resolve(rs, ptr)
			if err != nil {
				return "", err
			}
			return c.refRule(target, tptr)
		}
		// Keywords beside $ref apply too from draft 2019-09 on (a schema
		// that declares draft 4-7 by $schema ignores them, as those drafts
		// say): merge them in.
		m, err := c.merge(newObjWith("$ref", rs), rest, ptr, "$ref", 0)
		if err != nil {
			return "", err
		}
		return c.gen(m, ptr)
	}
	if a, ok := o.get("allOf"); ok {
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return "", refuse(ptr, "allOf", "expected a non-empty array of schemas")
		}
		m, err := c.mergeAll(without(o, "allOf"), list, ptr, "allOf")
		if err != nil {
			return "", err
		}
		return c.gen(m, ptr)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		a, ok := o.get(kw)
		if !ok {
			continue
		}
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return "", refuse(ptr, kw, "expected a non-empty array of schemas")
		}
		base := without(o, kw)
		var branches []any
		for i, b := range list {
			bp := ptrJoin(ptr, kw, strconv.Itoa(i))
			if !hasAssertions(base) {
				branches = append(branches, b)
				continue
			}
			m, err := c.mergeAll(base, []any{b}, bp, kw)
			if err != nil {
				return "", err
			}
			branches = append(branches, m)
		}
		if kw == "oneOf" {
			if err := c.disjoint(branches, ptr); err != nil {
				return "", err
			}
		}
		var parts []string
		for i, b := range branches {
			e, err := c.gen(b, ptrJoin(ptr, kw, strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			parts = append(parts, e)
		}
		return alt(parts), nil
	}
	types, err := schemaTypes(o, ptr)
	if err != nil {
		return "", err
	}
	if vals, kw, ok, err := enumValues(o, ptr); err != nil {
		return "", err
	} else if ok {
		for _, k := range o.keys {
			if !annotations[k] && k != "enum" && k != "const" && k != "type" && k != "$defs" && k != "definitions" {
				if applies(k, types) {
					return "", refuse(ptr, k, "not supported together with %q", kw)
				}
			}
		}
		var parts, plain []string
		seen := map[string]bool{}
		for _, v := range vals {
			k := jsonKind(v)
			if !slices.Contains(types, k) && !(k == "integer" && slices.Contains(types, "number")) {
				continue
			}
			s := compactString(v)
			if seen[s] {
				continue
			}
			seen[s] = true
			switch v.(type) {
			case string, bool, nil:
				plain = append(plain, s)
			default:
				parts = append(parts, constExpr(v))
			}
		}
		if len(plain) > 0 {
			parts = append(parts, literalTrie(plain))
		}
		if len(parts) == 0 {
			return c.empty(ptr, "no "+kw+" value has an allowed type"), nil
		}
		return alt(parts), nil
	}
	var parts []string
	for _, t := range types {
		if t == "integer" && slices.Contains(types, "number") {
			continue // a number's grammar has the integers
		}
		e, err := c.genType(t, o, ptr)
		if err != nil {
			return "", err
		}
		parts = append(parts, e)
	}
	return alt(parts), nil
}

// literalTrie is the alternation of the literals ss with common prefixes
// factored out, so that a long enum costs one parse stack per distinct
// prefix rather than one per value.
func literalTrie(ss []string) string {
	slices.Sort(ss)
	var node func(ss []string, depth int) string
	node = func(ss []string, depth int) string {
		var parts []string
		for i := 0; i < len(ss); {
			if len(ss[i]) == depth {
				parts = append(parts, `""`)
				i++
				continue
			}
			r, n := utf8.DecodeRuneInString(ss[i][depth:])
			j := i + 1
			for j < len(ss) && len(ss[j]) > depth && strings.HasPrefix(ss[j][depth:], string(r)) {
				j++
			}
			// Extend the shared run as far as every string of the group goes.
			end := depth + n
			for {
				if len(ss[i]) <= end {
					break
				}
				_, m := utf8.DecodeRuneInString(ss[i][end:])
				ok := true
				for _, t := range ss[i+1 : j] {
					if len(t) < end+m || t[end:end+m] != ss[i][end:end+m] {
						ok = false
						break
					}
				}
				if !ok {
					break
				}
				end += m
			}
			parts = append(parts, strings.TrimSpace(lit(ss[i][depth:end])+" "+node(ss[i:j], end)))
			i = j
		}
		if len(parts) == 1 {
			if parts[0] == `""` {
				return ""
			}
			return parts[0]
		}
		return "( " + strings.Join(parts, " | ") + " )"
	}
	return node(ss, 0)
}

func newObjWith(k string, v any) *obj {
	o := newObj()
	o.set(k, v)
	return o
}

// applies reports whether keyword k constrains one of types.
func applies(k string, types []string) bool {
	for _, t := range types {
		if slices.Contains(typeKeywords[t], k) {
			return true
		}
	}
	return false
}

func schemaTypes(o *obj, ptr string) ([]string, error) {
	tv, ok := o.get("type")
	if !ok {
		return allTypes, nil
	}
	var ts []string
	switch x := tv.(type) {
	case string:
		ts = []string{x}
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, refuse(ptr, "type", "expected type names, found %s", jsonKind(e))
			}
			ts = append(ts, s)
		}
	default:
		return nil, refuse(ptr, "type", "expected a type name or an array of them")
	}
	for _, t := range ts {
		if !slices.Contains(allTypes, t) {
			return nil, refuse(ptr, "type", "unknown type %q", t)
		}
	}
	return ts, nil
}

func enumValues(o *obj, ptr string) (vals []any, kw string, ok bool, err error) {
	if v, has := o.get("const"); has {
		vals, kw, ok = []any{v}, "const", true
	}
	if e, has := o.get("enum"); has {
		list, isList := e.([]any)
		if !isList {
			return nil, "", false, refuse(ptr, "enum", "expected an array")
		}
		if len(list) == 0 {
			return nil, "", false, &SchemaError{Pointer: ptr, Keyword: "enum", Msg: "empty: no value can satisfy it", Err: ErrEmpty}
		}
		if ok { // const and enum: the const if it is listed
			cs := compactString(vals[0])
			if !slices.ContainsFunc(list, func(v any) bool { return compactString(v) == cs }) {
				vals = nil
			}
		} else {
			vals = list
		}
		kw, ok = "enum", true
	}
	return vals, kw, ok, nil
}

// defaultBase is the base URI of a schema without $id: a name that is never
// fetched, only used to resolve relative $id and $ref against.
var defaultBase = &url.URL{Scheme: "https", Host: "schema.invalid", Path: "/root.json"}

// index records, for every subschema, its base URI, and the resources
// ($id) and anchors ($anchor, draft 6-7 "#name" ids) it defines, so that a
// $ref can be resolved the way the drafts specify.
func (c *compiler) index(s any, ptr string, base *url.URL) {
	o, ok := s.(*obj)
	if !ok {
		return
	}
	_, hasRef := o.get("$ref")
	idKey := "$id"
	if c.draft4 {
		idKey = "id"
	}
	if id, ok := o.vals[idKey].(string); ok && !(hasRef && c.legacyRef) {
		if u, err := base.Parse(id); err == nil {
			if strings.HasPrefix(id, "#") && u.Fragment != "" {
				c.anchors[noFragment(base)+"#"+u.Fragment] = ptr
			} else {
				u.Fragment = ""
				base = u
				c.resources[base.String()] = ptr
			}
		}
	}
	for _, k := range []string{"$anchor", "$dynamicAnchor"} {
		if a, ok := o.vals[k].(string); ok {
			c.anchors[noFragment(base)+"#"+a] = ptr
		}
	}
	c.bases[ptr] = base
	for _, k := range o.keys {
		v := o.vals[k]
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			if m, ok := v.(*obj); ok {
				for _, pk := range m.keys {
					c.index(m.vals[pk], ptrJoin(ptr, k, pk), base)
				}
			}
		case "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
			"propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items":
			if l, ok := v.([]any); ok && k == "items" {
				for i, e := range l {
					c.index(e, ptrJoin(ptr, k, strconv.Itoa(i)), base)
				}
				continue
			}
			c.index(v, ptrJoin(ptr, k), base)
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if l, ok := v.([]any); ok {
				for i, e := range l {
					c.index(e, ptrJoin(ptr, k, strconv.Itoa(i)), base)
				}
			}
		}
	}
}

func noFragment(u *url.URL) string {
	v := *u
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// baseAt is the base URI in force at ptr (the nearest indexed schema at or
// above it).
func (c *compiler) baseAt(ptr string) *url.URL {
	for p := ptr; ; {
		if b, ok := c.bases[p]; ok {
			return b
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return defaultBase
		}
		p = p[:i]
	}
}

// resolve finds the schema a $ref points to: a JSON pointer or an anchor,
// in this schema or in a resource it embeds by $id. Anything else would
// have to be fetched and is refused.
func (c *compiler) resolve(ref, ptr string) (any, string, error) {
	u, err := c.baseAt(ptr).Parse(ref)
	if err != nil {
		return nil, "", refuse(ptr, "$ref", "%q: %v", ref, err)
	}
	frag := u.Fragment
	doc := noFragment(u)
	root, ok := c.resources[doc]
	if !ok {
		return nil, "", refuse(ptr, "$ref", "%q resolves to %s, outside the schema (remote references are not supported)", ref, doc)
	}
	target := root
	switch {
	case frag == "":
	case strings.HasPrefix(frag, "/"):
		target = root + frag // a JSON pointer, its tokens ~-escaped
	default:
		a, ok := c.anchors[doc+"#"+frag]
		if !ok {
			return nil, "", refuse(ptr, "$ref", "%q: no anchor %q in the schema", ref, frag)
		}
		target = a
	}
	cur := c.root
	if target != "#" {
		for _, tok := range strings.Split(target[2:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := cur.(type) {
			case *obj:
				v, ok := x.get(tok)
				if !ok {
					return nil, "", refuse(ptr, "$ref", "%q: no %q in the schema", ref, tok)
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil, "", refuse(ptr, "$ref", "%q: no element %q", ref, tok)
				}
				cur = x[i]
			default:
				return nil, "", refuse(ptr, "$ref", "%q: %q is not inside an object or array", ref, tok)
			}
		}
	}
	return cur, target, nil
}

// refRule returns the rule for the schema at pointer tptr, making it on
// first use; a reference back to a schema being compiled is recursion in
// the grammar.
func (c *compiler) refRule(target any, tptr string) (string, error) {
	if name, ok := c.refs[tptr]; ok {
		return name, nil
	}
	c.n++
	name := fmt.Sprintf("ref-%d", c.n)
	c.refs[tptr] = name
	e, err := c.gen(target, tptr)
	if err != nil {
		return "", err
	}
	c.rules = append(c.rules, name+" ::= "+e)
	return name, nil
}

// deref replaces a top-level $ref of s by the schema it points to, merged
// with the keywords beside it, so schemas can be merged keyword by keyword.
func (c *compiler) deref(s any, ptr string, depth int) (any, error) {
	o, ok := s.(*obj)
	if !ok {
		return s, nil
	}
	r, ok := o.get("$ref")
	if !ok {
		return s, nil
	}
	if depth > 32 {
		return nil, refuse(ptr, "$ref", "recursion through allOf/anyOf cannot be merged")
	}
	rs, ok := r.(string)
	if !ok {
		return nil, refuse(ptr, "$ref", "expected a string")
	}
	t, tptr, err := c.resolve(rs, ptr)
	if err != nil {
		return nil, err
	}
	t, err = c.deref(t, tptr, depth+1)
	if err != nil {
		return nil, err
	}
	rest := without(o, "$ref")
	if !hasAssertions(rest) || c.legacyRef {
		return t, nil
	}
	return c.merge(t, rest, ptr, "$ref", depth+1)
}

// mergeAll merges base with every schema of list (allOf).
func (c *compiler) mergeAll(base *obj, list []any, ptr, kw string) (any, error) {
	var acc any = base
	for i, s := range list {
		var err error
		acc, err = c.merge(acc, s, ptrJoin(ptr, kw, strconv.Itoa(i)), kw, 0)
		if err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// merge returns one schema equivalent to both a and b (their allOf), or
// refuses naming the keyword it cannot merge.
func (c *compiler) merge(a, b any, ptr, kw string, depth int) (any, error) {
	var err error
	if a, err = c.deref(a, ptr, depth); err != nil {
		return nil, err
	}
	if b, err = c.deref(b, ptr, depth); err != nil {
		return nil, err
	}
	if ab, ok := a.(bool); ok {
		if !ab {
			return false, nil
		}
		return b, nil
	}
	if bb, ok := b.(bool); ok {
		if !bb {
			return false, nil
		}
		return a, nil
	}
	ao, ok1 := a.(*obj)
	bo, ok2 := b.(*obj)
	if !ok1 || !ok2 {
		return nil, refuse(ptr, kw, "expected schemas")
	}
	for _, o := range []*obj{ao, bo} {
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if _, ok := o.get(k); ok && depth < 8 {
				// Normalise nested combinators first.
				inner, err := c.flatten(o, ptr, depth+1)
				if err != nil {
					return nil, err
				}
				if o == ao {
					ao = inner
				} else {
					bo = inner
				}
				break
			}
		}
	}
	if tupleConflict(ao, bo) {
		return nil, refuse(ptr, "prefixItems", "cannot merge items/prefixItems/additionalItems of two schemas (each constrains positions the other's items keyword counts from)")
	}
	r := without(ao)
	for _, k := range bo.keys {
		bv := bo.vals[k]
		av, has := r.get(k)
		if annotations[k] || k == "$defs" || k == "definitions" {
			if !has {
				r.set(k, bv)
			}
			continue
		}
		if !has {
			r.set(k, bv)
			continue
		}
		if compactString(av) == compactString(bv) {
			continue
		}
		switch k {
		case "properties":
			ap, ok1 := av.(*obj)
			bp, ok2 := bv.(*obj)
			if !ok1 || !ok2 {
				return nil, refuse(ptr, k, "expected an object")
			}
			m := without(ap)
			for _, pk := range bp.keys {
				if x, ok := m.get(pk); ok {
					m.set(pk, newObjWith("allOf", []any{x, bp.vals[pk]}))
				} else {
					m.set(pk, bp.vals[pk])
				}
			}
			r.set(k, m)
		case "required":
			al, _ := av.([]any)
			bl, _ := bv.([]any)
			u := slices.Clone(al)
			for _, x := range bl {
				if !slices.ContainsFunc(u, func(y any) bool { return y == x }) {
					u = append(u, x)
				}
			}
			r.set(k, u)
		case "type":
			at, err := schemaTypes(newObjWith("type", av), ptr)
			if err != nil {
				return nil, err
			}
			bt, err := schemaTypes(newObjWith("type", bv), ptr)
			if err != nil {
				return nil, err
			}
			var both []any
			for _, t := range at {
				switch {
				case slices.Contains(bt, t):
					both = append(both, t)
				case t == "number" && slices.Contains(bt, "integer"), t == "integer" && slices.Contains(bt, "number"):
					both = append(both, "integer")
				}
			}
			if len(both) == 0 {
				return false, nil
			}
			r.set(k, both)
		case "enum":
			al, _ := av.([]any)
			bl, _ := bv.([]any)
			var both []any
			for _, x := range al {
				xs := compactString(x)
				if slices.ContainsFunc(bl, func(y any) bool { return compactString(y) == xs }) {
					both = append(both, x)
				}
			}
			if len(both) == 0 {
				return false, nil
			}
			r.set(k, both)
		case "const":
			return false, nil // two different constants
		case "minLength", "minItems", "minProperties", "minimum":
			if numLess(av, bv) {
				r.set(k, bv)
			}
		case "maxLength", "maxItems", "maxProperties", "maximum":
			if numLess(bv, av) {
				r.set(k, bv)
			}
		case "exclusiveMinimum", "exclusiveMaximum":
			_, ab := av.(bool)
			_, bb := bv.(bool)
			if ab || bb {
				return nil, refuse(ptr, k, "cannot merge draft-4 boolean %s with a different value", k)
			}
			if (k == "exclusiveMinimum") == numLess(av, bv) {
				r.set(k, bv)
			}
		case "items", "additionalProperties":
			if _, isList := av.([]any); isList {
				return nil, refuse(ptr, k, "cannot merge two different array-valued %s", k)
			}
			if k == "additionalProperties" {
				return nil, refuse(ptr, k, "cannot merge two different additionalProperties")
			}
			r.set(k, newObjWith("allOf", []any{av, bv}))
		default:
			return nil, refuse(ptr, k, "cannot merge two different values of %s (in %s)", k, kw)
		}
	}
	// additionalProperties of one side constrains the properties the other
	// side declares: only merge when the declared names agree.
	for _, pair := range [][2]*obj{{ao, bo}, {bo, ao}} {
		if ap, ok := pair[0].get("additionalProperties"); ok && compactString(ap) != "true" {
			mine, _ := pair[0].get("properties")
			theirs, _ := pair[1].get("properties")
			if to, ok := theirs.(*obj); ok {
				mo, _ := mine.(*obj)
				for _, k := range to.keys {
					if _, ok := mo.get(k); !ok {
						return nil, refuse(ptr, "additionalProperties", "cannot merge: it restricts property %q another schema declares", k)
					}
				}
			}
		}
	}
	return r, nil
}

// flatten turns a schema whose combinators can be merged away (an allOf) into
// one without them; anyOf/oneOf cannot be merged into another schema.
func (c *compiler) flatten(o *obj, ptr string, depth int) (*obj, error) {
	if a, ok := o.get("allOf"); ok {
		list, _ := a.([]any)
		var acc any = without(o, "allOf")
		for i, s := range list {
			var err error
			acc, err = c.merge(acc, s, ptrJoin(ptr, "allOf", strconv.Itoa(i)), "allOf", depth)
			if err != nil {
				return nil, err
			}
		}
		if ao, ok := acc.(*obj); ok {
			return ao, nil
		}
		if acc == false {
			return newObjWith("type", []any{}), nil
		}
		return newObj(), nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if _, ok := o.get(k); ok {
			return nil, refuse(ptr, k, "cannot be merged with another schema (allOf, $ref siblings, or a second anyOf/oneOf)")
		}
	}
	return o, nil
}

// tupleConflict reports whether a and b both constrain array items and one
// of them by position: merged into one schema, one's items would start
// after the other's prefix, which is not what allOf means.
func tupleConflict(a, b *obj) bool {
	has := func(o *obj) (some, tuple bool) {
		for _, k := range []string{"items", "prefixItems", "additionalItems"} {
			if v, ok := o.get(k); ok {
				some = true
				if _, isList := v.([]any); isList || k != "items" {
					tuple = true
				}
			}
		}
		return some, tuple
	}
	aa, at := has(a)
	ba, bt := has(b)
	if !aa || !ba || !at && !bt {
		return false
	}
	for _, k := range []string{"items", "prefixItems", "additionalItems"} {
		av, _ := a.get(k)
		bv, _ := b.get(k)
		if compactString(av) != compactString(bv) {
			return true
		}
	}
	return false
}

func numLess(a, b any) bool {
	x, _ := toFloat(a)
	y, _ := toFloat(b)
	return x < y
}

func toFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// disjoint checks that no value can match two oneOf branches, which is when
// oneOf means the same as anyOf: branches of different types, different
// constants, or objects with a required property whose constants differ.
func (c *compiler) disjoint(branches []any, ptr string) error {
	type sig struct {
		types    []string
		consts   map[string]bool // nil: any value of types
		disc     map[string]map[string]bool
		closed   bool // additionalProperties false
		declared map[string]bool
		required []string
	}
	sigs := make([]sig, len(branches))
	for i, b := range branches {
		b, err := c.deref(b, ptr, 0)
		if err != nil {
			return err
		}
		o, ok := b.(*obj)
		if !ok {
			if b == false {
				sigs[i] = sig{types: nil}
				continue
			}
			return refuse(ptr, "oneOf", "branch %d accepts every value: it overlaps the others", i)
		}
		ts, err := schemaTypes(o, ptr)
		if err != nil {
			return err
		}
		if slices.Contains(ts, "number") && !slices.Contains(ts, "integer") {
			ts = append(ts, "integer")
		}
		s := sig{types: ts}
		if vals, _, ok, _ := enumValues(o, ptr); ok {
			s.consts = map[string]bool{}
			for _, v := range vals {
				s.consts[compactString(v)] = true
			}
		}
		if ap, ok := o.get("additionalProperties"); ok && ap == false {
			s.closed = true
		}
		if props, ok := o.vals["properties"].(*obj); ok {
			s.declared = map[string]bool{}
			for _, k := range props.keys {
				s.declared[k] = true
			}
		}
		if rl, ok := o.vals["required"].([]any); ok {
			for _, r := range rl {
				if name, ok := r.(string); ok {
					s.required = append(s.required, name)
				}
			}
		}
		// A discriminator: required properties with const/enum values.
		if props, ok := o.get("properties"); ok {
			req, _ := o.get("required")
			rl, _ := req.([]any)
			po, _ := props.(*obj)
			for _, r := range rl {
				name, _ := r.(string)
				pv, ok := po.get(name)
				if !ok {
					continue
				}
				pd, err := c.deref(pv, ptr, 0)
				if err != nil {
					return err
				}
				if pob, ok := pd.(*obj); ok {
					if vals, _, ok, _ := enumValues(pob, ptr); ok {
						if s.disc == nil {
							s.disc = map[string]map[string]bool{}
						}
						s.disc[name] = map[string]bool{}
						for _, v := range vals {
							s.disc[name][compactString(v)] = true
						}
					}
				}
			}
		}
		sigs[i] = s
	}
	for i := range sigs {
		for j := i + 1; j < len(sigs); j++ {
			a, b := sigs[i], sigs[j]
			shared := false
			for _, t := range a.types {
				if slices.Contains(b.types, t) {
					shared = true
				}
			}
			if !shared {
				continue
			}
			if a.consts != nil && b.consts != nil && !meets(a.consts, b.consts) {
				continue
			}
			onlyObjects := len(a.types) == 1 && a.types[0] == "object" || len(b.types) == 1 && b.types[0] == "object"
			discriminated := false
			for name, av := range a.disc {
				if bv, ok := b.disc[name]; ok && !meets(av, bv) {
					discriminated = true
				}
			}
			// A closed object cannot have a property the other requires
			// and it does not declare.
			excludes := func(x, y sig) bool {
				if !x.closed {
					return false
				}
				for _, r := range y.required {
					if !x.declared[r] {
						return true
					}
				}
				return false
			}
			if onlyObjects && (discriminated || excludes(a, b) || excludes(b, a)) {
				continue
			}
			return refuse(ptr, "oneOf", "branches %d and %d may both match a value (only oneOf over different types, constants, a required const property, or closed objects with different required properties is enforced)", i, j)
		}
	}
	return nil
}

func meets(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func (c *compiler) genType(t string, o *obj, ptr string) (string, error) {
	switch t {
	case "null":
		return c.prim("null"), nil
	case "boolean":
		return c.prim("boolean"), nil
	case "string":
		return c.genString(o, ptr)
	case "integer", "number":
		return c.genNumber(t == "integer", o, ptr)
	case "object":
		return c.genObject(o, ptr)
	case "array":
		return c.genArray(o, ptr)
	}
	return "", refuse(ptr, "type", "unknown type %q", t)
}

// nonNegInt reads a count keyword (minLength, maxItems, ...).
func nonNegInt(o *obj, k, ptr string) (int, bool, error) {
	v, ok := o.get(k)
	if !ok {
		return 0, false, nil
	}
	f, isNum := toFloat(v)
	if !isNum || f < 0 || f != math.Trunc(f) {
		return 0, false, refuse(ptr, k, "expected a non-negative integer")
	}
	if f > maxRepeat {
		return 0, false, refuse(ptr, k, "%v is beyond the largest count enforced, %d", f, maxRepeat)
	}
	return int(f), true, nil
}

func (c *compiler) genString(o *obj, ptr string) (string, error) {
	minL, hasMin, err := nonNegInt(o, "minLength", ptr)
	if err != nil {
		return "", err
	}
	maxL, hasMax, err := nonNegInt(o, "maxLength", ptr)
	if err != nil {
		return "", err
	}
	if f, ok := o.get("format"); ok {
		fs, _ := f.(string)
		var body string
		switch fs {
		case "date", "time", "uuid", "ipv4", "hostname", "email":
			body = c.prim(fs)
		case "date-time":
			body = c.prim("date") + ` "T" ` + c.prim("time")
		default:
			return "", refuse(ptr, "format", "%q is not supported (date, time, date-time, uuid, ipv4, hostname and email are)", fs)
		}
		for _, k := range []string{"pattern", "minLength", "maxLength"} {
			if _, ok := o.get(k); ok {
				return "", refuse(ptr, k, "not supported together with format")
			}
		}
		return `"\"" ` + body + ` "\""`, nil
	}
	if p, ok := o.get("pattern"); ok {
		ps, ok := p.(string)
		if !ok {
			return "", refuse(ptr, "pattern", "expected a string")
		}
		if hasMin || hasMax {
			k := "minLength"
			if hasMax {
				k = "maxLength"
			}
			return "", refuse(ptr, k, "not supported together with pattern")
		}
		e, err := c.regex(ps)
		if err != nil {
			return "", refuse(ptr, "pattern", "%v", err)
		}
		return `"\"" ` + e + ` "\""`, nil
	}
	if !hasMin && !hasMax {
		return c.prim("string"), nil
	}
	if hasMax && maxL < minL {
		return c.empty(ptr, "maxLength is below minLength"), nil
	}
	// One rule per pair of bounds, shared by every string that has them:
	// the rule's closing quote is then the same position for all of them,
	// so the matcher's frame windows inside their bodies are shared too
	// (inline, each property's string would have windows of its own).
	name := fmt.Sprintf("strlen-%d-", minL)
	rep := fmt.Sprintf("{%d,}", minL)
	if hasMax {
		name += strconv.Itoa(maxL)
		rep = fmt.Sprintf("{%d,%d}", minL, maxL)
	}
	if !c.prims[name] {
		c.prims[name] = true
		c.rules = append(c.rules, name+` ::= "\"" `+c.prim("char")+rep+` "\""`)
	}
	return name, nil
}
