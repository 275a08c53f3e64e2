package grammar

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// intCap is the largest magnitude an integer may have in the output: 16
// digits, llama.cpp's cap.
const intCap = 9999999999999999

// bound is one side of a numeric range.
type bound struct {
	v    float64
	s    string // the number as written
	excl bool
	set  bool
}

// numBounds reads minimum/maximum and both forms of the exclusive keywords
// (draft 4's booleans modifying minimum/maximum, later drafts' numbers).
func numBounds(o *obj, ptr string) (lo, hi bound, err error) {
	read := func(k string) (bound, error) {
		v, ok := o.get(k)
		if !ok {
			return bound{}, nil
		}
		f, isNum := toFloat(v)
		if !isNum || math.IsInf(f, 0) {
			return bound{}, refuse(ptr, k, "expected a finite number")
		}
		return bound{v: f, s: v.(json.Number).String(), set: true}, nil
	}
	if lo, err = read("minimum"); err != nil {
		return
	}
	if hi, err = read("maximum"); err != nil {
		return
	}
	for _, side := range []struct {
		k     string
		b     *bound
		lower bool
	}{{"exclusiveMinimum", &lo, true}, {"exclusiveMaximum", &hi, false}} {
		v, has := o.get(side.k)
		if !has {
			continue
		}
		if bv, isBool := v.(bool); isBool {
			// Draft 4: a flag on minimum/maximum.
			if bv {
				if !side.b.set {
					return lo, hi, refuse(ptr, side.k, "true without %s (draft 4 form): nothing to make exclusive", map[bool]string{true: "minimum", false: "maximum"}[side.lower])
				}
				side.b.excl = true
			}
			continue
		}
		f, isNum := toFloat(v)
		if !isNum {
			return lo, hi, refuse(ptr, side.k, "expected a number or (draft 4) a boolean")
		}
		tighter := !side.b.set || (side.lower && f >= side.b.v) || (!side.lower && f <= side.b.v)
		if tighter {
			*side.b = bound{v: f, s: v.(json.Number).String(), excl: true, set: true}
		}
	}
	return lo, hi, nil
}

func (c *compiler) genNumber(isInt bool, o *obj, ptr string) (string, error) {
	if m, ok := o.get("multipleOf"); ok {
		f, _ := toFloat(m)
		if f != 1 {
			return "", refuse(ptr, "multipleOf", "only multipleOf 1 (an integer) is enforced, not %s", compactString(m))
		}
		isInt = true
	}
	lo, hi, err := numBounds(o, ptr)
	if err != nil {
		return "", err
	}
	if !lo.set && !hi.set {
		if isInt {
			return c.prim("integer"), nil
		}
		return c.prim("number"), nil
	}
	if isInt {
		l, h := int64(-intCap), int64(intCap)
		if lo.set {
			f := math.Ceil(lo.v)
			if lo.excl && f == lo.v {
				f++
			}
			l = int64(max(f, -intCap))
			if f > intCap {
				return c.empty(ptr, "minimum beyond the 16-digit cap"), nil
			}
		}
		if hi.set {
			f := math.Floor(hi.v)
			if hi.excl && f == hi.v {
				f--
			}
			h = int64(min(f, intCap))
			if f < -intCap {
				return c.empty(ptr, "maximum beyond the 16-digit cap"), nil
			}
		}
		if l > h {
			return c.empty(ptr, "no integer between minimum and maximum"), nil
		}
		var parts []string
		if h >= 0 {
			parts = append(parts, uintRange(uint64(max(l, 0)), uint64(h)))
		}
		if l < 0 {
			parts = append(parts, `"-" `+uintRange(uint64(max(1, -h)), uint64(-l)))
		}
		return alt(parts), nil
	}
	// A number with bounds: exact, written without an exponent.
	var a, b dec
	for _, x := range []struct {
		k string
		b bound
		d *dec
	}{{"minimum", lo, &a}, {"maximum", hi, &b}} {
		if !x.b.set {
			continue
		}
		var ok bool
		if *x.d, ok = toDec(x.b.s); !ok {
			k := x.k
			if x.b.excl {
				k = "exclusiveM" + k[1:]
			}
			return "", refuse(ptr, k, "%s has more than %d fraction digits", x.b.s, maxBoundDigits)
		}
	}
	c.prim("fraction")
	var parts []string
	if !hi.set || hi.v >= 0 {
		from, fromIn := dec{}, true
		if lo.set && lo.v >= 0 {
			from, fromIn = a, !lo.excl
		}
		parts = append(parts, magnitude(from, fromIn, b, !hi.excl, !hi.set)...)
	}
	if !lo.set || lo.v < 0 {
		from, fromIn := dec{}, false // v < 0: magnitude > 0 ("-0" is not written)
		if hi.set && hi.v < 0 {
			from, fromIn = b, !hi.excl
		}
		for _, p := range magnitude(from, fromIn, a, !lo.excl, !lo.set) {
			parts = append(parts, `"-" `+p)
		}
	}
	if len(parts) == 0 {
		return c.empty(ptr, "no number between minimum and maximum"), nil
	}
	return alt(parts), nil
}

// dec is a non-negative decimal: integer part and fraction digits (no
// trailing zeros).
type dec struct {
	i uint64
	f string
}

// maxBoundDigits bounds the fraction digits of a numeric bound the grammar
// spells out.
const maxBoundDigits = 30

// toDec is the magnitude of the decimal number s; ok is false when it has
// more than maxBoundDigits fraction digits. Integer parts beyond the digit
// cap are clamped to just above it (no output can reach them).
func toDec(s string) (dec, bool) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return dec{}, false
	}
	r.Abs(r)
	for prec := 0; prec <= maxBoundDigits; prec++ {
		fs := r.FloatString(prec)
		back, _ := new(big.Rat).SetString(fs)
		if back.Cmp(r) != 0 {
			continue
		}
		ip, fp, _ := strings.Cut(fs, ".")
		i, err := strconv.ParseUint(ip, 10, 64)
		if err != nil || i > intCap {
			i, fp = intCap+1, ""
		}
		return dec{i, strings.TrimRight(fp, "0")}, true
	}
	return dec{}, false
}

// magnitude returns alternatives for the non-negative decimals (no
// exponent) m with a <= m (a < m unless aIn) and m <= b (m < b unless bIn;
// no upper bound but the digit cap when bInf): on the integer part first,
// the fraction only where the integer part equals a bound's.
func magnitude(a dec, aIn bool, b dec, bIn, bInf bool) []string {
	if a.i > intCap {
		return nil
	}
	if !bInf && b.i > intCap {
		bInf = true
	}
	if !bInf {
		if c := cmpFrac(a.f, b.f); a.i > b.i || a.i == b.i && (c > 0 || c == 0 && !(aIn && bIn)) {
			return nil
		}
	}
	var parts []string
	add := func(i uint64, frac string) {
		if frac != never {
			parts = append(parts, strings.TrimSpace(uintRange(i, i)+" "+frac))
		}
	}
	switch {
	case bInf:
		add(a.i, fracPart(a.f, aIn, "", false, true))
		if a.i < intCap {
			parts = append(parts, uintRange(a.i+1, intCap)+" fraction?")
		}
	case a.i < b.i:
		add(a.i, fracPart(a.f, aIn, "", false, true))
		if a.i+1 <= b.i-1 {
			parts = append(parts, uintRange(a.i+1, b.i-1)+" fraction?")
		}
		add(b.i, fracPart("", true, b.f, bIn, false))
	default:
		add(a.i, fracPart(a.f, aIn, b.f, bIn, false))
	}
	return parts
}

// cmpFrac compares two fractions given as digit strings.
func cmpFrac(x, y string) int {
	for len(x) < len(y) {
		x += "0"
	}
	for len(y) < len(x) {
		y += "0"
	}
	return strings.Compare(x, y)
}

// fracPart is the optional fraction ("" or "." digits) of a number whose
// fraction value 0.d must be >= 0.lo (> unless loIn) and <= 0.hi (< unless
// hiIn; no upper bound when hiNone), or never.
func fracPart(lo string, loIn bool, hi string, hiIn, hiNone bool) string {
	ne := fracDigits(lo, loIn, hi, hiIn, hiNone)
	switch em := fracZeroOK(lo, loIn, hi, hiIn, hiNone); {
	case em && ne != never:
		return "( \".\" " + ne + " )?"
	case em:
		return ""
	case ne != never:
		return "\".\" " + ne
	}
	return never
}

// fracZeroOK reports whether a fraction of value 0 (none, or zeros) is
// within the bounds.
func fracZeroOK(lo string, loIn bool, hi string, hiIn, hiNone bool) bool {
	return lo == "" && loIn && (hiNone || hi != "" || hiIn)
}

// fracDigits is a grammar of the non-empty digit strings d whose value 0.d
// is within the bounds, digit by digit: a digit strictly between the
// bounds' leads frees the rest, a digit equal to one carries that bound on.
func fracDigits(lo string, loIn bool, hi string, hiIn, hiNone bool) string {
	switch {
	case lo == "" && loIn && hiNone:
		return "[0-9]{1,16}"
	case lo == "" && !loIn && hiNone:
		return `"0"{0,15} [1-9] [0-9]{0,15}`
	case hi == "" && !hiNone:
		if hiIn && lo == "" && loIn {
			return `"0"{1,16}`
		}
		return never
	}
	type sub struct {
		lo         string
		loIn       bool
		hi         string
		hiIn, none bool
	}
	var parts []string
	var run []byte
	var runSub sub
	flush := func() {
		if len(run) == 0 {
			return
		}
		d := digitClass(run[0], run[len(run)-1])
		ne := fracDigits(runSub.lo, runSub.loIn, runSub.hi, runSub.hiIn, runSub.none)
		switch em := fracZeroOK(runSub.lo, runSub.loIn, runSub.hi, runSub.hiIn, runSub.none); {
		case em && ne != never:
			parts = append(parts, d+" ( "+ne+" )?")
		case em:
			parts = append(parts, d)
		case ne != never:
			parts = append(parts, d+" "+ne)
		}
		run = run[:0]
	}
	for c := byte('0'); c <= '9'; c++ {
		l0, lrest := byte('0'), ""
		if lo != "" {
			l0, lrest = lo[0], lo[1:]
		}
		if c < l0 {
			continue
		}
		sb := sub{lo: "", loIn: true, none: true}
		if c == l0 {
			sb.lo, sb.loIn = lrest, loIn
		}
		if !hiNone {
			h0, hrest := hi[0], hi[1:]
			if c > h0 {
				continue
			}
			if c == h0 {
				sb.hi, sb.hiIn, sb.none = hrest, hiIn, false
			}
		}
		if len(run) > 0 && sb != runSub {
			flush()
		}
		run = append(run, c)
		runSub = sb
	}
	flush()
	return alt(parts)
}

// uintRange is a grammar of the decimal numerals (no leading zeros) of the
// integers in [lo, hi]: split by digit count, each count by the leading
// digits (the classic range-to-regex construction).
func uintRange(lo, hi uint64) string {
	if lo > hi {
		return never
	}
	var parts []string
	for l := len(strconv.FormatUint(lo, 10)); l <= len(strconv.FormatUint(hi, 10)); l++ {
		a, b := lo, hi
		if p := pow10(l - 1); l > 1 && a < p {
			a = p
		}
		if p := pow10(l) - 1; b > p {
			b = p
		}
		if a > b {
			continue
		}
		parts = append(parts, sameLen(strconv.FormatUint(a, 10), strconv.FormatUint(b, 10)))
	}
	return alt(parts)
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

func digitsRep(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " [0-9]"
	}
	return fmt.Sprintf(" [0-9]{%d}", n)
}

func digitClass(lo, hi byte) string {
	if lo == hi {
		return `"` + string(lo) + `"`
	}
	return "[" + string(lo) + "-" + string(hi) + "]"
}

// sameLen covers the numerals from a to b, which have the same length.
func sameLen(a, b string) string {
	if a == "" {
		return `""`
	}
	if a[0] == b[0] {
		if len(a) == 1 {
			return digitClass(a[0], a[0])
		}
		return digitClass(a[0], a[0]) + " " + sameLen(a[1:], b[1:])
	}
	rest := len(a) - 1
	zeros := strings.Repeat("0", rest)
	nines := strings.Repeat("9", rest)
	var parts []string
	lo, hi := a[0], b[0]
	if a[1:] != zeros {
		parts = append(parts, digitClass(a[0], a[0])+" "+sameLen(a[1:], nines))
		lo++
	}
	tail := ""
	if b[1:] != nines {
		tail = digitClass(b[0], b[0]) + " " + sameLen(zeros, b[1:])
		hi--
	}
	if lo <= hi {
		parts = append(parts, digitClass(lo, hi)+digitsRep(rest))
	}
	if tail != "" {
		parts = append(parts, tail)
	}
	return alt(parts)
}

// propEntry is one property of an object's output, in output order.
type propEntry struct {
	name     string
	schema   any
	required bool
}

func (c *compiler) genObject(o *obj, ptr string) (string, error) {
	var props *obj
	if p, ok := o.get("properties"); ok {
		if props, ok = p.(*obj); !ok {
			return "", refuse(ptr, "properties", "expected an object")
		}
	}
	req := map[string]bool{}
	var reqOrder []string
	if r, ok := o.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return "", refuse(ptr, "required", "expected an array of property names")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return "", refuse(ptr, "required", "expected property names, found %s", jsonKind(x))
			}
			if !req[s] {
				req[s] = true
				reqOrder = append(reqOrder, s)
			}
		}
	}
	var addl any = true
	if a, ok := o.get("additionalProperties"); ok {
		addl = a
	}
	var entries []propEntry
	declared := map[string]bool{}
	if props != nil {
		for _, k := range props.keys {
			entries = append(entries, propEntry{k, props.vals[k], req[k]})
			declared[k] = true
		}
	}
	for _, k := range reqOrder {
		if !declared[k] {
			entries = append(entries, propEntry{k, addl, true})
			declared[k] = true
		}
	}
	noExtra := addl == false
	if mp, ok, err := nonNegInt(o, "minProperties", ptr); err != nil {
		return "", err
	} else if ok && mp > len(reqOrder) {
		return "", refuse(ptr, "minProperties", "only enforced when the required properties already meet it")
	}
	if mp, ok, err := nonNegInt(o, "maxProperties", ptr); err != nil {
		return "", err
	} else if ok && (!noExtra || mp < len(entries)) {
		return "", refuse(ptr, "maxProperties", "only enforced when additionalProperties is false and the declared properties cannot exceed it")
	}
	// The tail: extra properties after the declared ones.
	tail := [2]string{`""`, `""`}
	if !noExtra {
		val, err := c.gen(addl, ptrJoin(ptr, "additionalProperties"))
		if err != nil {
			return "", err
		}
		kv := c.rule("kv", c.keyNotIn(slices.Collect(func(yield func(string) bool) {
			for _, e := range entries {
				if !yield(e.name) {
					return
				}
			}
		}))+` ":" `+val)
		tail[0] = fmt.Sprintf(`( %s ( "," %s )* )?`, kv, kv)
		tail[1] = fmt.Sprintf(`( "," %s )*`, kv)
	}
	// next[f]: the rule for the properties from i on, f: something written.
	next := [2]string{c.rule("obj", tail[0]), c.rule("obj", tail[1])}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		val, err := c.gen(e.schema, ptrJoin(ptr, "properties", e.name))
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		writeJSONString(&sb, e.name)
		kv := lit(sb.String()+":") + " " + val
		var cur [2]string
		for f := range 2 {
			sep := ""
			if f == 1 {
				sep = `"," `
			}
			body := sep + kv + " " + next[1]
			if !e.required {
				body = body + " | " + next[f]
			}
			cur[f] = c.rule("obj", body)
		}
		next = cur
	}
	return `"{" ` + next[0] + ` "}"`, nil
}

// keyNotIn is a grammar of the JSON strings (written without escapes)
// other than names: a trie over the names where a key may leave the trie at
// any character or end anywhere but at a name.
func (c *compiler) keyNotIn(names []string) string {
	if len(names) == 0 {
		return c.prim("string")
	}
	type trie struct {
		kids  map[rune]*trie
		order []rune
		end   bool
	}
	root := &trie{kids: map[rune]*trie{}}
	for _, n := range names {
		t := root
		ok := true
		for _, r := range n {
			if r == '"' || r == '\\' || r < 0x20 {
				ok = false // never written unescaped: cannot collide
				break
			}
			k, has := t.kids[r]
			if !has {
				k = &trie{kids: map[rune]*trie{}}
				t.kids[r] = k
				t.order = append(t.order, r)
			}
			t = k
		}
		if ok {
			t.end = true
		}
	}
	safe := c.prim("safe")
	var node func(t *trie) string
	node = func(t *trie) string {
		var parts []string
		if !t.end {
			parts = append(parts, `"\""`)
		}
		excl := `"\\\x00-\x1F`
		for _, r := range t.order {
			excl += escRune(r, true)
			parts = append(parts, lit(string(r))+" "+node(t.kids[r]))
		}
		parts = append(parts, "[^"+excl+"] "+safe+`* "\""`)
		return c.rule("key", strings.Join(parts, " | "))
	}
	return `"\"" ` + node(root)
}

func (c *compiler) genArray(o *obj, ptr string) (string, error) {
	var prefix []any
	var rest any = true
	restPtr := ptrJoin(ptr, "items")
	if p, ok := o.get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return "", refuse(ptr, "prefixItems", "expected an array of schemas")
		}
		prefix = list
	}
	if it, ok := o.get("items"); ok {
		if list, isList := it.([]any); isList {
			// Draft 4-2019 tuple form: items is the prefix, additionalItems the rest.
			if prefix != nil {
				return "", refuse(ptr, "items", "an array of schemas beside prefixItems")
			}
			prefix = list
			if a, ok := o.get("additionalItems"); ok {
				rest, restPtr = a, ptrJoin(ptr, "additionalItems")
			}
		} else {
			rest = it
		}
	}
	minI, _, err := nonNegInt(o, "minItems", ptr)
	if err != nil {
		return "", err
	}
	maxI, hasMax, err := nonNegInt(o, "maxItems", ptr)
	if err != nil {
		return "", err
	}
	if !hasMax {
		maxI = -1
	}
	if u, ok := o.get("uniqueItems"); ok && u == true && !(hasMax && maxI <= 1) {
		return "", refuse(ptr, "uniqueItems", "true is not enforced (unless maxItems <= 1)")
	}
	if rest == false {
		if maxI < 0 || maxI > len(prefix) {
			maxI = len(prefix)
		}
	}
	if maxI >= 0 && minI > maxI {
		return c.empty(ptr, "minItems above maxItems (or the items allowed)"), nil
	}
	k := len(prefix)
	if maxI >= 0 {
		k = min(k, maxI)
	}
	items := make([]string, k)
	for i := range k {
		e, err := c.gen(prefix[i], ptrJoin(ptr, "prefixItems", strconv.Itoa(i)))
		if err != nil {
			return "", err
		}
		items[i] = e
	}
	// The rest: r more items, r in [rmin, rmax] (rmax -1: unbounded).
	restExpr := `""`
	rmin := max(0, minI-k)
	rmax := -1
	if maxI >= 0 {
		rmax = maxI - k
	}
	if rmax != 0 && rest != false {
		r, err := c.gen(rest, restPtr)
		if err != nil {
			return "", err
		}
		r = c.rule("item", r)
		rep := func(lo, hi int) string {
			if hi < 0 {
				return fmt.Sprintf("{%d,}", lo)
			}
			return fmt.Sprintf("{%d,%d}", lo, hi)
		}
		switch {
		case k > 0:
			restExpr = fmt.Sprintf(`( "," %s )%s`, r, rep(rmin, rmax))
		case rmin == 0:
			h := -1
			if rmax > 0 {
				h = rmax - 1
			}
			restExpr = fmt.Sprintf(`( %s ( "," %s )%s )?`, r, r, rep(0, h))
		default:
			h := -1
			if rmax > 0 {
				h = rmax - 1
			}
			restExpr = fmt.Sprintf(`%s ( "," %s )%s`, r, r, rep(rmin-1, h))
		}
	} else if rmin > 0 {
		return c.empty(ptr, "minItems needs more items than allowed"), nil
	}
	// The prefix, nested: items past minItems are optional, each only after
	// the one before it.
	body := restExpr
	for i := k - 1; i >= 0; i-- {
		sep := ""
		if i > 0 {
			sep = `"," `
		}
		body = sep + items[i] + " " + body
		if i >= minI {
			body = "( " + body + " )?"
		}
	}
	return `"[" ` + body + ` "]"`, nil
}
