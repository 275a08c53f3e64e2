package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

// Shape is the size of a llama model: what WidenTo widens a model to.
type Shape struct {
	Dim, Hidden, Layers, Heads, KVHeads, HeadDim int
}

// Shapes are the named targets of WidenTo (gen-model --widen-to).
var Shapes = map[string]Shape{
	// TinyLlama-1.1B: 1.1 G weights, a 1.17 GB Q8_0 file.
	"tinyllama": {Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, HeadDim: 64},
}

// LookupShape returns the named shape, or an error wrapping ErrInvalid that
// lists the known names.
func LookupShape(name string) (Shape, error) {
	if s, ok := Shapes[name]; ok {
		return s, nil
	}
	var names []string
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return Shape{}, fmt.Errorf("synth: shape %q: %w (known: %s)", name, ErrInvalid, strings.Join(names, ", "))
}

func (s Shape) String() string {
	return fmt.Sprintf("dim %d, hidden %d, %d layers, %d heads, %d kv heads, head dim %d", s.Dim, s.Hidden, s.Layers, s.Heads, s.KVHeads, s.HeadDim)
}

// WidenToOptions says what WidenTo widens a model to.
type WidenToOptions struct {
	Shape
	// Context, when > 0, replaces llama.context_length.
	Context int
	// Progress, as in Options.
	Progress func(doneBytes, totalBytes int64)
}

var blkName = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// widening maps the source model's coordinates into the wide one's.
type widening struct {
	from, to Shape
	resid    []int // wide residual dim → source dim, -1: a dim that stays zero
	hidden   []int // wide FFN unit → source unit, -1: a unit that computes zero
	q, kv    []int // wide Q (K, V) row → source row, -1: zero
	qScale   float64
	normScl  float64
}

// WidenTo returns a writer for a copy of the llama GGUF f (its bytes read
// from r) widened to o.Shape while computing the same function, so a target
// of a real model's size and layout has the text of a small real model (a
// streamed, I/O-bound target whose speculative drafts are accepted as often
// as its small model's).
//
//   - The residual stream gets zero dims: the embedding's and every output
//     projection's new entries are zero, so the new dims stay zero. RMSNorm
//     then averages over Dim dims of which the source's d are the nonzero
//     ones, so the mean square is d/Dim of the source's: epsilon is scaled
//     by d/Dim (exact, when the ratio is a power of two) and every norm
//     weight by √(d/Dim).
//   - Source head h (of group g = h / (heads/kv heads)) becomes head
//     g·(Heads/KVHeads) + h mod (heads/kv heads), so it reads the same KV
//     head; the new heads have zero Q, K rows and zero output columns.
//   - Each head's dims are padded with zero Q, K, V dims. RoPE rotates pair
//     i of a head of size d by the frequency base^(−2i/d): source pair i goes
//     to wide pair i·HeadDim/d, whose frequency is the same (the llama arch's
//     adjacent style: pair i is dims 2i, 2i+1). Q is scaled by
//     √(HeadDim/d), undoing the wider 1/√HeadDim attention scale.
//   - New FFN units have zero gate, up and down weights: silu(0)·0 = 0.
//   - Layers past the source's are identities: zero output projections
//     (attention and FFN), unit norm weights.
//
// Everything new is an exact zero (or a unit norm weight), which
// quantization keeps exact (a Q8_0 block of zeros has scale 0), and the
// cost of a matrix product does not depend on its values. The scaled norm
// weights, Q rows and epsilon round to float32, so the logits equal the
// source's to float tolerance, not bit for bit. Every tensor is written as
// F32; quantize the result as any model. The source must be llama with the
// RoPE over the whole head, no biases or rope_freqs, and each size of
// o.Shape at least the source's, with HeadDim a multiple of the source's
// and Heads/KVHeads a multiple of the source's group size.
func WidenTo(ctx context.Context, r io.ReaderAt, f *gguf.File, o WidenToOptions) (*gguf.Writer, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("synth: widen %s: %s: %w", f.Path, fmt.Sprintf(format, a...), ErrInvalid)
	}
	if f.Arch() != "llama" {
		return nil, bad("architecture %q, want llama", f.Arch())
	}
	var from Shape
	for _, k := range []struct {
		key string
		v   *int
	}{{"embedding_length", &from.Dim}, {"feed_forward_length", &from.Hidden}, {"block_count", &from.Layers},
		{"attention.head_count", &from.Heads}, {"attention.head_count_kv", &from.KVHeads}} {
		u, ok := f.Uint("llama." + k.key)
		if !ok || u == 0 || u > 1<<24 {
			return nil, bad("llama.%s is %d (present: %v), want 1..%d", k.key, u, ok, 1<<24)
		}
		*k.v = int(u)
	}
	if from.Heads%from.KVHeads != 0 || from.Dim%from.Heads != 0 {
		return nil, bad("%d heads, %d kv heads, dim %d: want heads a multiple of kv heads and of dim/heads", from.Heads, from.KVHeads, from.Dim)
	}
	from.HeadDim = from.Dim / from.Heads
	if kl, ok := f.Uint("llama.attention.key_length"); ok && int(kl) != from.HeadDim {
		return nil, bad("attention.key_length %d, want dim/heads = %d", kl, from.HeadDim)
	}
	if rd, ok := f.Uint("llama.rope.dimension_count"); ok && int(rd) != from.HeadDim {
		return nil, bad("rope.dimension_count %d, want the head size %d (a partial RoPE is not widened)", rd, from.HeadDim)
	}
	to := o.Shape
	switch {
	case to.Dim < from.Dim || to.Hidden < from.Hidden || to.Layers < from.Layers || to.Heads < from.Heads ||
		to.KVHeads < from.KVHeads || to.HeadDim < from.HeadDim:
		return nil, bad("shape %v is narrower than the source's %v somewhere", to, from)
	case to.HeadDim%from.HeadDim != 0 || to.HeadDim%2 != 0:
		return nil, bad("head dim %d, want an even multiple of the source's %d (RoPE pairs must land on equal frequencies)", to.HeadDim, from.HeadDim)
	case to.Heads%to.KVHeads != 0 || (to.Heads/to.KVHeads)%(from.Heads/from.KVHeads) != 0:
		return nil, bad("%d heads over %d kv heads: want a group size that is a multiple of the source's %d", to.Heads, to.KVHeads, from.Heads/from.KVHeads)
	case to.Dim > 1<<20 || to.Hidden > 1<<22 || to.Layers > 1<<12 || to.Heads*to.HeadDim > 1<<20:
		return nil, bad("shape %v is too large", to)
	}
	wd := newWidening(from, to)

	w := gguf.NewWriter()
	eps := 1e-5
	if e, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); ok {
		eps = e
	}
	set := map[string]any{
		"llama.embedding_length":                 uint32(to.Dim),
		"llama.feed_forward_length":              uint32(to.Hidden),
		"llama.block_count":                      uint32(to.Layers),
		"llama.attention.head_count":             uint32(to.Heads),
		"llama.attention.head_count_kv":          uint32(to.KVHeads),
		"llama.rope.dimension_count":             uint32(to.HeadDim),
		"llama.attention.layer_norm_rms_epsilon": float32(eps * float64(from.Dim) / float64(to.Dim)),
	}
	if to.Dim != to.Heads*to.HeadDim {
		set["llama.attention.key_length"] = uint32(to.HeadDim)
		set["llama.attention.value_length"] = uint32(to.HeadDim)
	}
	if o.Context > 0 {
		set["llama.context_length"] = uint32(o.Context)
	}
	for _, kv := range f.KV {
		v := kv.Value
		if nv, ok := set[kv.Key]; ok {
			v = nv
			delete(set, kv.Key)
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return nil, fmt.Errorf("synth: widen %s: %w", f.Path, err)
		}
	}
	extra := make([]string, 0, len(set))
	for k := range set {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		if err := w.AddKV(k, set[k]); err != nil {
			return nil, err
		}
	}
	if err := w.AddKV("sluice.widened_from", from.String()); err != nil {
		return nil, err
	}

	// The wide model's tensors: the source's global ones, then each layer's,
	// the appended layers copying layer 0's names.
	type plan struct {
		name  string
		src   tensor.Info
		layer int // -1: a global tensor
		id    bool
	}
	var plans []plan
	var layer0 []tensor.Info
	for _, t := range f.Tensors {
		m := blkName.FindStringSubmatch(t.Name)
		if m == nil {
			plans = append(plans, plan{name: t.Name, src: t, layer: -1})
			continue
		}
		l, _ := strconv.Atoi(m[1])
		if l >= from.Layers {
			return nil, bad("tensor %s is past block_count %d", t.Name, from.Layers)
		}
		plans = append(plans, plan{name: t.Name, src: t, layer: l})
		if l == 0 {
			layer0 = append(layer0, t)
		}
	}
	for l := from.Layers; l < to.Layers; l++ {
		for _, t := range layer0 {
			plans = append(plans, plan{name: fmt.Sprintf("blk.%d.%s", l, strings.TrimPrefix(t.Name, "blk.0.")), src: t, layer: l, id: true})
		}
	}
	var total, done int64
	shapes := make([][]int, len(plans))
	for i, p := range plans {
		suffix := p.name
		if m := blkName.FindStringSubmatch(p.name); m != nil {
			suffix = m[2]
		}
		rows, cols, err := wd.maps(suffix, p.src)
		if err != nil {
			return nil, bad("%v", err)
		}
		if cols == nil {
			shapes[i] = []int{len(rows)}
		} else {
			shapes[i] = []int{len(rows), len(cols)}
		}
		n := int64(4)
		for _, d := range shapes[i] {
			n *= int64(d)
		}
		total += n
	}
	progress := func(n int64) {
		done += n
		if o.Progress != nil {
			o.Progress(done, total)
		}
	}
	for i, p := range plans {
		suffix := p.name
		if m := blkName.FindStringSubmatch(p.name); m != nil {
			suffix = m[2]
		}
		rows, cols, _ := wd.maps(suffix, p.src)
		scale := wd.scale(suffix)
		identity := p.id
		t := p.src
		if err := w.AddTensorFunc(p.name, tensor.F32, shapes[i], func(out io.Writer) error {
			src, err := readF32(r, f.Path, t)
			if err != nil {
				return err
			}
			if identity {
				src = nil // an appended layer: only zeros and unit norms
			}
			return writeWide(ctx, out, src, t, rows, cols, scale, progress)
		}); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func newWidening(from, to Shape) *widening {
	wd := &widening{from: from, to: to,
		qScale:  math.Sqrt(float64(to.HeadDim) / float64(from.HeadDim)),
		normScl: math.Sqrt(float64(from.Dim) / float64(to.Dim))}
	fill := func(n, m int) []int {
		x := make([]int, n)
		for i := range x {
			x[i] = -1
			if i < m {
				x[i] = i
			}
		}
		return x
	}
	wd.resid = fill(to.Dim, from.Dim)
	wd.hidden = fill(to.Hidden, from.Hidden)
	// dim e of a source head → its dim in a wide head: pair e/2 goes to pair
	// (e/2)·stretch, the one with the same RoPE frequency.
	stretch := to.HeadDim / from.HeadDim
	dimOf := func(e int) int { return 2*(e/2)*stretch + e%2 }
	wd.q = fill(to.Heads*to.HeadDim, 0)
	group, wgroup := from.Heads/from.KVHeads, to.Heads/to.KVHeads
	for h := range from.Heads {
		wh := (h/group)*wgroup + h%group
		for e := range from.HeadDim {
			wd.q[wh*to.HeadDim+dimOf(e)] = h*from.HeadDim + e
		}
	}
	wd.kv = fill(to.KVHeads*to.HeadDim, 0)
	for g := range from.KVHeads {
		for e := range from.HeadDim {
			wd.kv[g*to.HeadDim+dimOf(e)] = g*from.HeadDim + e
		}
	}
	return wd
}

// maps returns the wide tensor's row and column maps (nil cols: a vector)
// for the tensor named suffix (without blk.N.) whose source is t.
func (wd *widening) maps(suffix string, t tensor.Info) (rows, cols []int, err error) {
	want := func(r, c int) error {
		if len(t.Shape) == 2 && t.Shape[0] == r && t.Shape[1] == c {
			return nil
		}
		return fmt.Errorf("tensor %s has shape %v, want [%d %d]", t.Name, t.Shape, r, c)
	}
	fr := wd.from
	vocabRows := func() ([]int, []int, error) {
		if len(t.Shape) != 2 || t.Shape[1] != fr.Dim {
			return nil, nil, fmt.Errorf("tensor %s has shape %v, want [vocab %d]", t.Name, t.Shape, fr.Dim)
		}
		id := make([]int, t.Shape[0])
		for i := range id {
			id[i] = i
		}
		return id, wd.resid, nil
	}
	switch suffix {
	case "token_embd.weight", "output.weight":
		return vocabRows()
	case "output_norm.weight", "attn_norm.weight", "ffn_norm.weight":
		if len(t.Shape) != 1 || t.Shape[0] != fr.Dim {
			return nil, nil, fmt.Errorf("tensor %s has shape %v, want [%d]", t.Name, t.Shape, fr.Dim)
		}
		return wd.resid, nil, nil
	case "attn_q.weight":
		return wd.q, wd.resid, want(fr.Heads*fr.HeadDim, fr.Dim)
	case "attn_k.weight", "attn_v.weight":
		return wd.kv, wd.resid, want(fr.KVHeads*fr.HeadDim, fr.Dim)
	case "attn_output.weight":
		return wd.resid, wd.q, want(fr.Dim, fr.Heads*fr.HeadDim)
	case "ffn_gate.weight", "ffn_up.weight":
		return wd.hidden, wd.resid, want(fr.Hidden, fr.Dim)
	case "ffn_down.weight":
		return wd.resid, wd.hidden, want(fr.Dim, fr.Hidden)
	}
	return nil, nil, fmt.Errorf("tensor %s: not one WidenTo knows how to widen (llama without biases or rope_freqs)", t.Name)
}

// scale is what the source values of tensor suffix are multiplied by.
func (wd *widening) scale(suffix string) float64 {
	switch {
	case strings.HasSuffix(suffix, "norm.weight"):
		return wd.normScl
	case suffix == "attn_q.weight":
		return wd.qScale
	}
	return 1
}

// readF32 decodes tensor t of the file at r.
func readF32(r io.ReaderAt, path string, t tensor.Info) ([]float32, error) {
	raw := make([]byte, t.Size)
	if _, err := r.ReadAt(raw, t.Offset); err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %w", path, t.Name, err)
	}
	cols := t.Shape[len(t.Shape)-1]
	rows := 1
	if len(t.Shape) == 2 {
		rows = t.Shape[0]
	}
	rb, err := t.DType.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %w", path, t.Name, err)
	}
	x := make([]float32, rows*cols)
	for i := range rows {
		tensor.DequantizeRow(x[i*cols:(i+1)*cols], raw[int64(i)*rb:], t.DType, cols)
	}
	return x, nil
}

// writeWide writes the wide tensor as F32 rows: element (i, j) is
// src[rows[i], cols[j]]·scale where both maps are ≥ 0, else 0 (a norm
// vector: 1 where unmapped). src nil (an identity layer) gives zero
// matrices and unit norms.
func writeWide(ctx context.Context, out io.Writer, src []float32, t tensor.Info, rows, cols []int, scale float64, progress func(int64)) error {
	if cols == nil { // a norm vector: one row
		buf := make([]byte, 4*len(rows))
		for i, s := range rows {
			v := float32(1)
			if s >= 0 && src != nil {
				v = float32(float64(src[s]) * scale)
			}
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		_, err := out.Write(buf)
		progress(int64(len(buf)))
		return err
	}
	sc := t.Shape[1]
	buf := make([]byte, 4*len(cols))
	// The mapped columns, so a row costs its source entries, not its width.
	var at []int
	for j, s := range cols {
		if s >= 0 {
			at = append(at, j)
		}
	}
	for i, s := range rows {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		clear(buf)
		if s >= 0 && src != nil {
			row := src[s*sc : (s+1)*sc]
			for _, j := range at {
				v := float32(float64(row[cols[j]]) * scale)
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
			}
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
		progress(int64(len(buf)))
	}
	return nil
}

// ParseShape reads a shape: a name of Shapes, or every size as key=value
// pairs separated by commas (dim, hidden, layers, heads, kv-heads, head-dim),
// e.g. "dim=256,hidden=512,layers=7,heads=16,kv-heads=4,head-dim=32".
func ParseShape(s string) (Shape, error) {
	if !strings.Contains(s, "=") {
		return LookupShape(s)
	}
	var sh Shape
	fields := map[string]*int{"dim": &sh.Dim, "hidden": &sh.Hidden, "layers": &sh.Layers, "heads": &sh.Heads,
		"kv-heads": &sh.KVHeads, "head-dim": &sh.HeadDim}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		p, known := fields[k]
		if !ok || !known {
			return Shape{}, fmt.Errorf("synth: shape %q: item %q: want key=value with key one of dim, hidden, layers, heads, kv-heads, head-dim: %w", s, kv, ErrInvalid)
		}
		if seen[k] {
			return Shape{}, fmt.Errorf("synth: shape %q: %s given twice: %w", s, k, ErrInvalid)
		}
		seen[k] = true
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<24 {
			return Shape{}, fmt.Errorf("synth: shape %q: %s = %q, want an integer in 1..%d: %w", s, k, v, 1<<24, ErrInvalid)
		}
		*p = n
	}
	for _, k := range []string{"dim", "hidden", "layers", "heads", "kv-heads", "head-dim"} {
		if !seen[k] {
			return Shape{}, fmt.Errorf("synth: shape %q: no %s: %w", s, k, ErrInvalid)
		}
	}
	return sh, nil
}
