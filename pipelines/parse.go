package pipelines

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/sluicehq/sluice/offload"
)

// MaxFileBytes bounds what Load reads: pipeline files are a few hundred
// bytes, and a multi-megabyte one is almost surely the wrong file.
const MaxFileBytes = 1 << 20

// Parse reads a pipeline with the Default registry.
func Parse(data []byte, source string) (*Pipeline, error) { return Default.Parse(data, source) }

// Load reads a pipeline file with the Default registry.
func Load(path string) (*Pipeline, error) { return Default.Load(path) }

// Load reads the pipeline file at path. Relative model and tokenizer paths
// in it are made relative to the file's directory, so a pipeline can sit
// beside its model.
func (r *Registry) Load(path string) (*Pipeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pipelines: load: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("pipelines: load %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{Source: path, Kind: ErrInvalid,
			Msg: fmt.Sprintf("file is larger than %d bytes; want a TOML pipeline file", MaxFileBytes)}
	}
	p, err := r.Parse(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	p.Model.Path = resolve(dir, p.Model.Path)
	p.Model.Tokenizer = resolve(dir, p.Model.Tokenizer)
	p.Cache.SpillDir = resolve(dir, p.Cache.SpillDir)
	if p.Draft != nil {
		p.Draft.Path = resolve(dir, p.Draft.Path)
		p.Draft.Tokenizer = resolve(dir, p.Draft.Tokenizer)
	}
	return p, nil
}

func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Parse decodes and validates one pipeline document. source names it in
// errors (a path, or "<preset greedy>"). Model paths are returned as written.
// All problems found are reported, in line order (see Error).
func (r *Registry) Parse(data []byte, source string) (*Pipeline, error) {
	l := &loader{reg: r, source: source, text: string(data)}
	l.ix = newLineIndex(l.text)
	p := l.parse()
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	return p, nil
}

// fileTOML holds the top-level keys undecoded, so each is decoded on its
// own and a type error names its key.
type fileTOML struct {
	Name        toml.Primitive `toml:"name"`
	Description toml.Primitive `toml:"description"`
	Timeout     toml.Primitive `toml:"timeout"`
	Model       toml.Primitive `toml:"model"`
	Draft       toml.Primitive `toml:"draft"`
	Cache       toml.Primitive `toml:"cache"`
	Stage       toml.Primitive `toml:"stage"`
}

type cacheTOML struct {
	KVBudget        any    `toml:"kv_budget"` // "64MiB", or an integer of bytes
	SpillDir        string `toml:"spill_dir"`
	KVType          string `toml:"kv_type"` // "f32" or "f16"
	PrefixCache     *bool  `toml:"prefix_cache"`
	PrefixCacheSize any    `toml:"prefix_cache_size"` // like kv_budget
}

type modelTOML struct {
	Path      string `toml:"path"`
	Tokenizer string `toml:"tokenizer"`
	// TokenizerPre forces the byte-level BPE pre-tokenizer (ModelSpec.TokenizerPre).
	TokenizerPre string `toml:"tokenizer_pre"`
	Tier         string `toml:"tier"`
	Threads      int    `toml:"threads"`
	Context      int    `toml:"context"`
	PageTokens   int    `toml:"page_tokens"`
	MemBudget    any    `toml:"mem_budget"` // "512MiB", or an integer of bytes
}

type stageTOML struct {
	ID      toml.Primitive `toml:"id"`
	Kind    toml.Primitive `toml:"kind"`
	Buffer  toml.Primitive `toml:"buffer"`
	Workers toml.Primitive `toml:"workers"`
	Fuse    toml.Primitive `toml:"fuse"`
	Params  toml.Primitive `toml:"params"`
}

type loader struct {
	reg    *Registry
	source string
	text   string
	ix     *lineIndex
	md     toml.MetaData
	errs   []*Error
}

func (l *loader) add(e *Error) {
	e.Source = l.source
	l.errs = append(l.errs, e)
}

// maxErrors bounds how many problems one Parse reports; past that the
// file is probably not a pipeline at all.
const maxErrors = 20

// err returns the collected problems sorted by line (those without a line
// last): one *Error, or several joined.
func (l *loader) err() error {
	slices.SortStableFunc(l.errs, func(a, b *Error) int {
		return cmp.Compare(lineKey(a.Line), lineKey(b.Line))
	})
	if len(l.errs) == 1 {
		return l.errs[0]
	}
	if n := len(l.errs) - maxErrors; n > 0 {
		more := &Error{Source: l.source, Kind: l.errs[maxErrors].Kind,
			Msg: fmt.Sprintf("%d more problems not shown", n)}
		l.errs = append(l.errs[:maxErrors], more)
	}
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

func lineKey(n int) int {
	if n <= 0 {
		return int(^uint(0) >> 1)
	}
	return n
}

func (l *loader) parse() *Pipeline {
	var root toml.Primitive
	md, err := toml.Decode(l.text, &root)
	if err != nil {
		l.syntax(err)
		return nil
	}
	l.md = md
	var raw map[string]any
	var top fileTOML
	if err := md.PrimitiveDecode(root, &raw); err != nil {
		l.syntax(err)
		return nil
	}
	if err := md.PrimitiveDecode(root, &top); err != nil {
		l.syntax(err)
		return nil
	}

	p := &Pipeline{Source: l.source}
	for _, k := range sortedKeys(raw) {
		switch k {
		case "name", "description", "timeout", "stage":
		case "model", "draft":
			if m, ok := raw[k].(map[string]any); ok {
				for _, path := range unknownKeys([]string{k}, m, reflect.TypeFor[modelTOML]()) {
					l.unknownKey("", l.ix.keyLine(path), path)
				}
			}
		case "cache":
			if m, ok := raw[k].(map[string]any); ok {
				for _, path := range unknownKeys([]string{k}, m, reflect.TypeFor[cacheTOML]()) {
					l.unknownKey("", l.ix.keyLine(path), path)
				}
			}
		default:
			l.unknownKey("", l.ix.keyLine([]string{k}), []string{k})
		}
	}

	if _, ok := raw["name"]; !ok {
		l.add(&Error{Kind: ErrInvalid, Msg: `missing required key name (e.g. name = "greedy")`})
	} else if l.decodeTop(top.Name, "name", &p.Name) && strings.TrimSpace(p.Name) == "" {
		l.add(&Error{Line: l.ix.keyLine([]string{"name"}), Kind: ErrInvalid, Msg: "name is empty"})
	}
	if _, ok := raw["description"]; ok {
		l.decodeTop(top.Description, "description", &p.Description)
	}
	if _, ok := raw["timeout"]; ok {
		p.Timeout = l.timeout(top.Timeout)
	}
	if _, ok := raw["model"]; ok {
		p.Model = l.model("model", top.Model)
	}
	if _, ok := raw["draft"]; ok {
		d := l.model("draft", top.Draft)
		p.Draft = &d
	}
	if _, ok := raw["cache"]; ok {
		p.Cache = l.cache(top.Cache)
	}
	p.Stages = l.stages(raw["stage"], top.Stage)
	if len(l.errs) == 0 {
		for _, e := range l.reg.wiring(p.Stages) {
			l.add(e)
		}
	}
	p.reg = l.reg
	return p
}

// syntax reports a TOML parse error with its line and column.
func (l *loader) syntax(err error) {
	e := &Error{Kind: ErrSyntax, Cause: err, Msg: err.Error()}
	if pe, ok := errors.AsType[toml.ParseError](err); ok {
		e.Line = pe.Position.Line
		e.Col = l.ix.col(pe.Position.Line, pe.Position.Start)
		if e.Col == 0 {
			e.Col = pe.Position.Col
		}
		e.Msg = pe.Message
	}
	l.add(e)
}

// tomlErrPrefix matches the location prefix BurntSushi puts on decode-time
// type errors; we replace it with our own file:line.
var tomlErrPrefix = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "((?:[^"\\]|\\.)*)"\): `)

// decodeErr splits a TOML decode error into the key it concerns, the line
// BurntSushi reports (0 if none) and the bare message.
func decodeErr(err error) (key string, line int, msg string) {
	if pe, ok := errors.AsType[toml.ParseError](err); ok {
		return pe.LastKey, pe.Position.Line, pe.Message
	}
	msg = err.Error()
	if m := tomlErrPrefix.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		key = m[2]
		if k, err := strconv.Unquote(`"` + key + `"`); err == nil {
			key = k
		}
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "toml: ")
	if m := tomlTypeErr.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("got %s; want %s", word(tomlGoType, m[1]), word(tomlWant, m[2]))
	}
	return key, line, msg
}

// tomlTypeErr matches BurntSushi's type mismatch message, which names Go
// types; tomlGoType and tomlWant translate them into TOML words.
var tomlTypeErr = regexp.MustCompile(`^incompatible types: TOML value has type (.+); destination has type (.+)$`)

var tomlGoType = map[string]string{
	"string": "a string", "int64": "an integer", "float64": "a float", "bool": "a boolean",
	"time.Time": "a datetime", "map[string]any": "a table", "[]any": "an array",
	"[]map[string]any": "an array of tables",
}

func word(m map[string]string, k string) string {
	if w, ok := m[k]; ok {
		return w
	}
	return k
}

var tomlWant = map[string]string{
	"string": "a string", "integer": "an integer", "float": "a number", "boolean": "true or false",
	"map": "a table", "slice": "an array", "primitive (string-like)": "a string",
}

// decodeTop decodes a top-level value and reports a type error at its key.
func (l *loader) decodeTop(prim toml.Primitive, key string, dst any) bool {
	if err := l.md.PrimitiveDecode(prim, dst); err != nil {
		_, line, msg := decodeErr(err)
		if line == 0 {
			line = l.ix.keyLine([]string{key})
		}
		l.add(&Error{Line: line, Kind: ErrInvalid, Cause: err, Msg: key + ": " + msg})
		return false
	}
	return true
}

func (l *loader) timeout(prim toml.Primitive) time.Duration {
	var v any
	if !l.decodeTop(prim, "timeout", &v) {
		return 0
	}
	line := l.ix.keyLine([]string{"timeout"})
	bad := func(msg string) time.Duration {
		l.add(&Error{Line: line, Kind: ErrInvalid, Msg: "timeout: " + msg})
		return 0
	}
	switch v := v.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return bad(fmt.Sprintf(`invalid duration %q; want e.g. "30s", "5m" or "0" for none`, v))
		}
		if d < 0 {
			return bad(fmt.Sprintf("%q is negative; want ≥ 0 (0 = none)", v))
		}
		return d
	case int64:
		if v == 0 {
			return 0
		}
		return bad(fmt.Sprintf(`integer %d has no unit; want a duration string such as "5m" (an integer is accepted only as 0 = none)`, v))
	default:
		return bad(fmt.Sprintf(`got %s; want a duration string such as "5m"`, tomlTypeName(v)))
	}
}

// model decodes the [model] or [draft] table (table names it).
func (l *loader) model(table string, prim toml.Primitive) ModelSpec {
	var m modelTOML
	if err := l.md.PrimitiveDecode(prim, &m); err != nil {
		key, line, msg := decodeErr(err)
		if line == 0 {
			line = l.ix.keyLine(strings.Split(key, "."))
		}
		l.add(&Error{Line: line, Kind: ErrInvalid, Cause: err, Msg: key + ": " + msg})
		return ModelSpec{}
	}
	bad := func(key, msg string) {
		l.add(&Error{Line: l.ix.keyLine([]string{table, key}), Kind: ErrInvalid, Msg: table + "." + key + ": " + msg})
	}
	switch m.Tier {
	case "", TierMmap, TierRAM, TierAuto, TierSSD:
	default:
		bad("tier", fmt.Sprintf("%q is not a tier; want %q, %q, %q or %q", m.Tier, TierAuto, TierRAM, TierMmap, TierSSD))
	}
	budget := byteSize(m.MemBudget, func(msg string) { bad("mem_budget", msg) })
	for _, f := range []struct {
		key string
		v   int
	}{{"threads", m.Threads}, {"context", m.Context}, {"page_tokens", m.PageTokens}} {
		if f.v < 0 {
			bad(f.key, fmt.Sprintf("%d is negative; want ≥ 0 (0 = default)", f.v))
		}
	}
	if table == "draft" {
		if m.Context != 0 {
			bad("context", "the draft follows the target's context; set it in [model]")
		}
		if m.PageTokens != 0 {
			bad("page_tokens", "the draft follows the target's KV page size; set it in [model]")
		}
	}
	return ModelSpec{Path: m.Path, Tokenizer: m.Tokenizer, TokenizerPre: m.TokenizerPre, Tier: m.Tier, Threads: m.Threads, Context: m.Context,
		PageTokens: m.PageTokens, MemBudget: budget}
}

// byteSize reads a size key: a string with a unit or an integer of bytes
// (nil = 0); bad reports a problem.
func byteSize(v any, bad func(msg string)) int64 {
	switch v := v.(type) {
	case nil:
	case string:
		n, err := offload.ParseBytes(v)
		if err != nil {
			bad(strings.TrimPrefix(err.Error(), "offload: "))
		}
		return n
	case int64:
		if v < 0 {
			bad(fmt.Sprintf("%d is negative; want ≥ 0 (0 = none)", v))
			return 0
		}
		return v
	default:
		bad(fmt.Sprintf(`got %s; want a size such as "512MiB" or "2GB", or an integer of bytes`, tomlTypeName(v)))
	}
	return 0
}

// cache decodes the [cache] table.
func (l *loader) cache(prim toml.Primitive) CacheSpec {
	var c cacheTOML
	if err := l.md.PrimitiveDecode(prim, &c); err != nil {
		key, line, msg := decodeErr(err)
		if line == 0 {
			line = l.ix.keyLine(strings.Split(key, "."))
		}
		l.add(&Error{Line: line, Kind: ErrInvalid, Cause: err, Msg: key + ": " + msg})
		return CacheSpec{}
	}
	budget := byteSize(c.KVBudget, func(msg string) {
		l.add(&Error{Line: l.ix.keyLine([]string{"cache", "kv_budget"}), Kind: ErrInvalid, Msg: "cache.kv_budget: " + msg})
	})
	if c.KVType != "" && c.KVType != "f32" && c.KVType != "f16" {
		l.add(&Error{Line: l.ix.keyLine([]string{"cache", "kv_type"}), Kind: ErrInvalid, Msg: fmt.Sprintf("cache.kv_type: %q, want \"f32\" or \"f16\"", c.KVType)})
		c.KVType = ""
	}
	size := byteSize(c.PrefixCacheSize, func(msg string) {
		l.add(&Error{Line: l.ix.keyLine([]string{"cache", "prefix_cache_size"}), Kind: ErrInvalid, Msg: "cache.prefix_cache_size: " + msg})
	})
	return CacheSpec{KVBudget: budget, SpillDir: c.SpillDir, KVType: c.KVType,
		NoPrefixCache: c.PrefixCache != nil && !*c.PrefixCache, PrefixCacheSize: size}
}

// stages decodes every [[stage]]; raw is the generic value of "stage".
func (l *loader) stages(raw any, prim toml.Primitive) []StageSpec {
	if raw == nil {
		return nil
	}
	elems, ok := raw.([]map[string]any)
	if arr, isArr := raw.([]any); isArr {
		// stage = [{...}, {...}]: an inline array of tables.
		elems, ok = make([]map[string]any, len(arr)), true
		for i, v := range arr {
			if elems[i], ok = v.(map[string]any); !ok {
				break
			}
		}
	}
	if !ok {
		l.add(&Error{Line: l.ix.keyLine([]string{"stage"}), Kind: ErrInvalid,
			Msg: fmt.Sprintf("stage: got %s; want an array of tables, written [[stage]]", tomlTypeName(raw))})
		return nil
	}
	var prims []toml.Primitive
	if err := l.md.PrimitiveDecode(prim, &prims); err != nil || len(prims) != len(elems) {
		l.add(&Error{Kind: ErrInvalid, Cause: err, Msg: "stage: want an array of tables, written [[stage]]"})
		return nil
	}
	out := make([]StageSpec, len(elems))
	firstByID := map[string]int{}
	for i := range elems {
		out[i] = l.stage(i, len(elems), elems[i], prims[i])
		if id := out[i].ID; id != "" {
			if j, dup := firstByID[id]; dup {
				l.add(&Error{Line: out[i].Line, Stage: id, Kind: ErrDuplicateID,
					Msg: fmt.Sprintf("duplicate id: stage #%d%s already uses it; ids must be unique", j+1, atLine(out[j].Line))})
			} else {
				firstByID[id] = i
			}
		}
	}
	return out
}

// atLine is " (line n)", or "" when n is unknown.
func atLine(n int) string {
	if n > 0 {
		return fmt.Sprintf(" (line %d)", n)
	}
	return ""
}

// commaLine is ", line n", or "" when n is unknown.
func commaLine(n int) string {
	if n > 0 {
		return fmt.Sprintf(", line %d", n)
	}
	return ""
}

// stageCtx reports problems of one stage.
type stageCtx struct {
	l         *loader
	n, total  int
	id, label string // label prefixes Msg when the stage has no id
}

func (c *stageCtx) add(kind error, cause error, sub []string, msg string) {
	c.l.add(&Error{
		Line:  c.l.ix.stageKeyLine(c.n, c.total, sub),
		Stage: c.id, Kind: kind, Cause: cause, Msg: c.label + msg,
	})
}

// decode decodes one value of the stage and reports a type error at its key.
func (c *stageCtx) decode(prim toml.Primitive, sub []string, dst any) bool {
	if err := c.l.md.PrimitiveDecode(prim, dst); err != nil {
		key, _, msg := decodeErr(err)
		// BurntSushi's line is of the last stage with this key: find our own.
		path := strings.Split(key, ".")
		if len(path) > 1 && path[0] == "stage" {
			path = path[1:]
		} else {
			path = sub
		}
		c.add(ErrInvalid, err, path, strings.Join(path, ".")+": "+msg)
		return false
	}
	return true
}

func (l *loader) stage(n, total int, raw map[string]any, prim toml.Primitive) StageSpec {
	st := StageSpec{Buffer: 1, Workers: 1, Line: l.ix.stageHeader(n, total)}
	c := &stageCtx{l: l, n: n, total: total, label: fmt.Sprintf("stage #%d: ", n+1)}
	var f stageTOML
	if !c.decode(prim, nil, &f) {
		return st
	}
	if _, ok := raw["id"]; ok && c.decode(f.ID, []string{"id"}, &st.ID) && st.ID != "" {
		c.id, c.label = st.ID, ""
	}
	if id, ok := raw["id"]; !ok || id == "" {
		c.add(ErrInvalid, nil, []string{"id"}, `missing id (e.g. id = "sample"); every stage needs a unique id`)
	}
	for _, k := range sortedKeys(raw) {
		switch k {
		case "id", "kind", "buffer", "workers", "fuse", "params":
		default:
			c.add(ErrUnknownKey, nil, []string{k}, "unknown key "+toml.Key{"stage", k}.String())
		}
	}

	var kind Kind
	known := false
	if _, ok := raw["kind"]; !ok {
		c.add(ErrInvalid, nil, nil, "missing kind; known kinds: "+kindList(l.reg.Kinds()))
	} else if c.decode(f.Kind, []string{"kind"}, &st.Kind) {
		if kind, known = l.reg.Lookup(st.Kind); !known {
			c.add(ErrUnknownKind, nil, []string{"kind"},
				fmt.Sprintf("unknown kind %q; known kinds: %s", st.Kind, kindList(l.reg.Kinds())))
		}
	}

	for _, q := range []struct {
		key  string
		prim toml.Primitive
		dst  *int
	}{{"buffer", f.Buffer, &st.Buffer}, {"workers", f.Workers, &st.Workers}} {
		if _, ok := raw[q.key]; !ok {
			continue
		}
		if c.decode(q.prim, []string{q.key}, q.dst) && *q.dst < 1 {
			c.add(ErrInvalid, nil, []string{q.key}, fmt.Sprintf("%s: %d is less than 1", q.key, *q.dst))
			*q.dst = 1
		}
	}
	if known && st.Workers > 1 && !kind.Stateless {
		c.add(ErrInvalid, nil, []string{"workers"},
			fmt.Sprintf("workers: %d, but kind %q keeps state between inputs; only stateless kinds may have workers > 1", st.Workers, st.Kind))
	}
	if _, ok := raw["fuse"]; ok && c.decode(f.Fuse, []string{"fuse"}, &st.Fuse) && st.Fuse {
		switch {
		case known && !kind.Fusable:
			c.add(ErrInvalid, nil, []string{"fuse"},
				fmt.Sprintf("fuse = true, but kind %q cannot run on the goroutine of the stage before it; kinds that can: %s",
					st.Kind, l.reg.kindsWhere(func(k Kind) bool { return k.Fusable })))
		case st.Workers > 1:
			c.add(ErrInvalid, nil, []string{"fuse"},
				fmt.Sprintf("fuse = true runs the stage on the goroutine of the stage before it, so it takes one worker, not workers = %d", st.Workers))
		}
	}

	rawParams, hasParams := raw["params"]
	paramMap, isMap := rawParams.(map[string]any)
	if hasParams && !isMap {
		c.add(ErrInvalid, nil, []string{"params"},
			fmt.Sprintf("params: got %s; want a table, written [stage.params]", tomlTypeName(rawParams)))
		return st
	}
	if !known {
		return st
	}
	if kind.NewParams == nil {
		for _, k := range sortedKeys(paramMap) {
			c.add(ErrUnknownKey, nil, []string{"params", k},
				fmt.Sprintf("unknown key %s: kind %q takes no params", toml.Key{"stage", "params", k}, st.Kind))
		}
		return st
	}
	params := kind.NewParams()
	for _, path := range unknownKeys([]string{"stage", "params"}, paramMap, reflect.TypeOf(params)) {
		c.add(ErrUnknownKey, nil, path[1:], "unknown key "+toml.Key(path).String())
	}
	if hasParams && !c.decode(f.Params, []string{"params"}, params) {
		return st
	}
	if v, ok := params.(interface{ Validate() error }); ok {
		for _, err := range flatten(v.Validate()) {
			sub := []string{"params"}
			msg := err.Error()
			if pe, ok := errors.AsType[*ParamError](err); ok {
				sub = append(sub, pe.Key)
				msg = pe.Key + ": " + pe.Msg
			}
			c.add(ErrInvalid, err, sub, msg)
		}
	}
	st.Params = params
	return st
}

// flatten unpacks an errors.Join tree into its leaves.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func (l *loader) unknownKey(stage string, line int, path []string) {
	l.add(&Error{Line: line, Stage: stage, Kind: ErrUnknownKey, Msg: "unknown key " + toml.Key(path).String()})
}

// wiring checks that the stages connect: the first takes RequestType, each
// takes what the one before it gives, the last gives ResultType, and one
// stage opens the decode loop before another closes it. Build runs it too,
// for pipelines edited after parsing.
func (r *Registry) wiring(ss []StageSpec) []*Error {
	var errs []*Error
	add := func(s *StageSpec, format string, args ...any) {
		e := &Error{Kind: ErrStageOrder, Msg: fmt.Sprintf(format, args...)}
		if s != nil {
			e.Line, e.Stage = s.Line, s.ID
		}
		errs = append(errs, e)
	}
	takes := func(t reflect.Type) string { return r.kindsWhere(func(k Kind) bool { return k.In == t }) }
	if len(ss) == 0 {
		add(nil, "no [[stage]] entries; want stages from %v to %v that open and close the decode loop, as in the greedy preset", RequestType, ResultType)
		return errs
	}
	var prev, opener, closer *StageSpec
	out := RequestType
	for i := range ss {
		s := &ss[i]
		k, ok := r.Lookup(s.Kind)
		if !ok {
			add(s, "unknown kind %q; known kinds: %s", s.Kind, kindList(r.Kinds()))
			errs[len(errs)-1].Kind = ErrUnknownKind
			return errs
		}
		switch {
		case k.In == out:
		case prev == nil:
			add(s, "kind %q takes %v, but the first stage takes the requests, %v; kinds that take it: %s", s.Kind, k.In, out, takes(out))
		default:
			add(s, "kind %q takes %v, but the stage before it, %q (kind %q%s), gives %v; kinds that take %v: %s",
				s.Kind, k.In, prev.ID, prev.Kind, commaLine(prev.Line), out, out, takes(out))
		}
		switch {
		case k.Loop == LoopOpen && opener != nil:
			add(s, "kind %q opens the decode loop, but stage %q (kind %q%s) opened it already; a pipeline has one loop", s.Kind, opener.ID, opener.Kind, commaLine(opener.Line))
		case k.Loop == LoopOpen:
			opener = s
		case k.Loop == LoopClose && opener == nil:
			add(s, "kind %q closes the decode loop, but no stage before it opens it; kinds that open it: %s",
				s.Kind, r.kindsWhere(func(k Kind) bool { return k.Loop == LoopOpen }))
		case k.Loop == LoopClose && closer != nil:
			add(s, "kind %q closes the decode loop, but stage %q (kind %q%s) closed it already; a pipeline has one loop", s.Kind, closer.ID, closer.Kind, commaLine(closer.Line))
		case k.Loop == LoopClose:
			closer = s
		}
		prev, out = s, k.Out
	}
	if out != ResultType {
		add(prev, "kind %q gives %v, but the last stage must give the results, %v; kinds that give them: %s",
			prev.Kind, out, ResultType, r.kindsWhere(func(k Kind) bool { return k.Out == ResultType }))
	}
	switch {
	case opener == nil:
		add(nil, "no stage opens the decode loop; kinds that open it: %s", r.kindsWhere(func(k Kind) bool { return k.Loop == LoopOpen }))
	case closer == nil:
		add(opener, "kind %q opens the decode loop, but no stage after it closes it; kinds that close it: %s",
			opener.Kind, r.kindsWhere(func(k Kind) bool { return k.Loop == LoopClose }))
	}
	return errs
}

// unknownKeys lists the keys of m (at prefix) that t, a struct or pointer
// to one, has no toml tag for, recursing into sub-tables of struct fields.
// Matching is exact: BurntSushi would also accept "Top_K" for top_k, but
// pipeline keys are lower_snake.
func unknownKeys(prefix []string, m map[string]any, t reflect.Type) [][]string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	var out [][]string
	for _, k := range sortedKeys(m) {
		path := append(slices.Clone(prefix), k)
		ft, ok := fields[k]
		if !ok {
			out = append(out, path)
			continue
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft == primitiveType {
			continue // decoded later by whoever owns it; it checks its own keys
		}
		switch v := m[k].(type) {
		case map[string]any:
			out = append(out, unknownKeys(path, v, ft)...)
		case []map[string]any:
			if ft.Kind() == reflect.Slice {
				for _, e := range v {
					out = append(out, unknownKeys(path, e, ft.Elem())...)
				}
			}
		}
	}
	return out
}

var primitiveType = reflect.TypeFor[toml.Primitive]()

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tomlTypeName names a decoded TOML value for messages.
func tomlTypeName(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case time.Time:
		return "a datetime"
	default:
		return fmt.Sprintf("%T", v)
	}
}
