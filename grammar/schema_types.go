package grammar

import (
	"fmt"
	"math"
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
	excl bool
	set  bool
}

// numBounds reads minimum/maximum and both forms of the exclusive keywords
// (draft 4's booleans modifying minimum/maximum, later drafts' numbers).
func numBounds(o *obj, ptr string) (lo, hi bound, err error) {
	read := func(k string) (float64, bool, error) {
		v, ok := o.get(k)
		if !ok {
			return 0, false, nil
		}
		f, isNum := toFloat(v)
		if !isNum || math.IsInf(f, 0) {
			return 0, false, refuse(ptr, k, "expected a finite number")
		}
		return f, true, nil
	}
	var ok bool
	if lo.v, ok, err = read("minimum"); err != nil {
		return
	}
	lo.set = ok
	if hi.v, ok, err = read("maximum"); err != nil {
		return
	}
	hi.set = ok
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
			*side.b = bound{v: f, excl: true, set: true}
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
				return never, nil
			}
		}
		if hi.set {
			f := math.Floor(hi.v)
			if hi.excl && f == hi.v {
				f--
			}
			h = int64(min(f, intCap))
			if f < -intCap {
				return never, nil
			}
		}
		if l > h {
			return never, nil
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
	// A number with bounds: integral bounds only, no exponent.
	for _, b := range []struct {
		k string
		b bound
	}{{"minimum", lo}, {"maximum", hi}} {
		if b.b.set && b.b.v != math.Trunc(b.b.v) {
			k := b.k
			if b.b.excl {
				k = "exclusiveM" + k[1:]
			}
			return "", refuse(ptr, k, "a non-integer bound (%v) on a number is not enforced (integer bounds are)", b.b.v)
		}
	}
	clampB := func(b bound) bound {
		if b.v > intCap {
			b.v, b.excl = intCap, false
		}
		if b.v < -intCap {
			b.v, b.excl = -intCap, false
		}
		return b
	}
	lo, hi = clampB(lo), clampB(hi)
	c.prim("fraction")
	var parts []string
	if !hi.set || hi.v >= 0 {
		a, aEx := int64(0), false
		if lo.set && lo.v >= 0 {
			a, aEx = int64(lo.v), lo.excl
		}
		parts = append(parts, magnitude(a, aEx, int64(hi.v), hi.excl, !hi.set)...)
	}
	if !lo.set || lo.v < 0 {
		a, aEx := int64(0), true // v < 0: magnitude > 0 ("-0" is not written)
		if hi.set && hi.v < 0 {
			a, aEx = int64(-hi.v), hi.excl
		}
		for _, p := range magnitude(a, aEx, int64(-lo.v), lo.excl, !lo.set) {
			parts = append(parts, `"-" `+p)
		}
	}
	return alt(parts), nil
}

const (
	anyFrac  = `fraction?`
	zeroFrac = `( "." "0"{1,16} )?`
	nzFrac   = `"." "0"{0,15} [1-9] [0-9]{0,15}`
)

// magnitude returns alternatives for the non-negative decimals (no
// exponent) between a and b (inf: up to the digit cap), each end exclusive
// or not.
func magnitude(a int64, aEx bool, b int64, bEx, inf bool) []string {
	var parts []string
	if inf {
		b, bEx = intCap, false
	}
	if a > b || a == b && (aEx || bEx) {
		return nil
	}
	first := a
	if aEx {
		parts = append(parts, uintRange(uint64(a), uint64(a))+" "+nzFrac)
		first = a + 1
	}
	if first <= b-1 {
		parts = append(parts, uintRange(uint64(first), uint64(b-1))+" "+anyFrac)
	}
	if !bEx && b >= first {
		f := zeroFrac
		if inf {
			f = anyFrac
		}
		parts = append(parts, uintRange(uint64(b), uint64(b))+" "+f)
	}
	return parts
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
		if !noExtra || mp > len(entries) {
			return "", refuse(ptr, "minProperties", "only enforced when the required properties already meet it")
		}
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
		return never, nil
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
		return never, nil
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
