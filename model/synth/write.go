package synth

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// alignment is GGUF's default data alignment; the files carry no
// general.alignment key.
const alignment = 32

// chunkElems is the number of weights generated from one random stream
// (rounded to whole rows). It fixes the output: changing it changes every
// file, so it is a constant and not a tuning knob.
const chunkElems = 1 << 16

// tensorPlan is one tensor of the file, in file order.
type tensorPlan struct {
	name       string
	dt         tensor.DType
	shape      []int // outermost first
	rows, cols int   // matrix view: cols is the innermost dimension
	rowBytes   int64
	offset     int64   // relative to the data section
	norm       bool    // 1 + noise instead of noise
	std        float32 // standard deviation of the noise
	index      int     // position in the file, part of the random stream's key
}

func (t *tensorPlan) size() int64 { return int64(t.rows) * t.rowBytes }

func (t *tensorPlan) rowsPerChunk() int { return max(1, chunkElems/t.cols) }

func (t *tensorPlan) chunks() int {
	r := t.rowsPerChunk()
	return (t.rows + r - 1) / r
}

// matrixType is dt, or F16 when a row is not a whole number of dt's blocks
// and so cannot be stored as dt.
func matrixType(dt tensor.DType, cols int) tensor.DType {
	if cols%dt.BlockSize() != 0 {
		return tensor.F16
	}
	return dt
}

// planTensors lists the tensors in llama.cpp's names and file order
// (token_embd, output_norm, output, then the blocks), with offsets.
func planTensors(p Preset, dt tensor.DType, std, embedStd float32) ([]tensorPlan, error) {
	kv := p.KVHeads * p.HeadDim()
	var ts []tensorPlan
	matrix := func(name string, rows, cols int) {
		ts = append(ts, tensorPlan{name: name, dt: matrixType(dt, cols), shape: []int{rows, cols}, rows: rows, cols: cols})
	}
	norm := func(name string) {
		ts = append(ts, tensorPlan{name: name, dt: tensor.F32, shape: []int{p.Dim}, rows: 1, cols: p.Dim, norm: true})
	}
	matrix("token_embd.weight", p.Vocab, p.Dim)
	ts[0].std = embedStd
	norm("output_norm.weight")
	matrix("output.weight", p.Vocab, p.Dim)
	for l := range p.Layers {
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", l, s) }
		norm(blk("attn_norm"))
		matrix(blk("attn_q"), p.Dim, p.Dim)
		matrix(blk("attn_k"), kv, p.Dim)
		matrix(blk("attn_v"), kv, p.Dim)
		matrix(blk("attn_output"), p.Dim, p.Dim)
		norm(blk("ffn_norm"))
		matrix(blk("ffn_gate"), p.Hidden, p.Dim)
		matrix(blk("ffn_up"), p.Hidden, p.Dim)
		matrix(blk("ffn_down"), p.Dim, p.Hidden)
	}
	var off int64
	for i := range ts {
		t := &ts[i]
		rb, err := t.dt.RowBytes(t.cols)
		if err != nil {
			return nil, fmt.Errorf("synth: %s: %w: %w", t.name, ErrInvalid, err)
		}
		t.rowBytes, t.index, t.offset = rb, i, off
		if t.std == 0 {
			t.std = std
		}
		off = alignUp(off+t.size(), alignment)
	}
	return ts, nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// kv is one metadata entry; value is uint32, float32, bool, string,
// []string, []float32 or []int32.
type kv struct {
	key   string
	value any
}

func metadata(o Options, v Vocab, std, embedStd float32) []kv {
	p := o.Preset
	ft, _ := fileType(o.DType)
	vocabSrc := "generated vocabulary"
	if o.TokenizerPath != "" {
		vocabSrc = "vocabulary of a llama2.c tokenizer.bin"
	}
	return []kv{
		{"general.architecture", "llama"},
		{"general.name", "sluice-synth-" + p.Name},
		{"general.description", fmt.Sprintf("synthetic Llama model written by sluice gen-model (random weights, not trained): preset %s, dtype %v, seed %d, std %g, token_embd std %g, %s", p.Name, o.DType, o.Seed, std, embedStd, vocabSrc)},
		{"general.file_type", ft},
		{"general.quantization_version", uint32(2)},
		{"llama.context_length", uint32(p.Context)},
		{"llama.embedding_length", uint32(p.Dim)},
		{"llama.block_count", uint32(p.Layers)},
		{"llama.feed_forward_length", uint32(p.Hidden)},
		{"llama.rope.dimension_count", uint32(p.HeadDim())},
		{"llama.attention.head_count", uint32(p.Heads)},
		{"llama.attention.head_count_kv", uint32(p.KVHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(p.Vocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.scores", v.Scores},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
}

// model is a validated, fully planned file.
type model struct {
	o       Options
	meta    []kv
	tensors []tensorPlan
	// tensorBytes is the sum of the tensor sizes (the data section without
	// its alignment padding).
	tensorBytes int64
}

func prepare(o Options) (*model, error) {
	if err := o.Preset.validate(); err != nil {
		return nil, err
	}
	if _, ok := fileType(o.DType); !ok {
		return nil, fmt.Errorf("synth: dtype %v: %w (want f32, f16, bf16, q8_0 or q4_0)", o.DType, ErrInvalid)
	}
	std, err := checkStd("Std", o.Std, DefaultStd)
	if err != nil {
		return nil, err
	}
	embedStd, err := checkStd("EmbedStd", o.EmbedStd, DefaultEmbedStd)
	if err != nil {
		return nil, err
	}
	if o.Workers < 0 {
		return nil, fmt.Errorf("synth: Workers %d is negative: %w", o.Workers, ErrInvalid)
	}
	var v Vocab
	if o.TokenizerPath == "" {
		if v, err = GeneratedVocab(o.Preset.Vocab); err != nil {
			return nil, fmt.Errorf("synth: preset %q: %w", o.Preset.Name, err)
		}
	} else {
		if v, err = LoadLlama2CVocab(o.TokenizerPath); err != nil {
			return nil, err
		}
		if v.Len() != o.Preset.Vocab {
			return nil, fmt.Errorf("synth: %s has %d pieces but preset %q has a vocabulary of %d: %w", o.TokenizerPath, v.Len(), o.Preset.Name, o.Preset.Vocab, ErrTokenizer)
		}
	}
	ts, err := planTensors(o.Preset, o.DType, std, embedStd)
	if err != nil {
		return nil, err
	}
	var total int64
	for i := range ts {
		total += ts[i].size()
	}
	return &model{o: o, meta: metadata(o, v, std, embedStd), tensors: ts, tensorBytes: total}, nil
}

// Write writes the model o describes to w as a GGUF v3 file. It streams:
// the header first, then each tensor in chunks generated by Options.Workers
// goroutines and written in order, so memory stays at a few megabytes per
// worker whatever the model size. The bytes depend only on o (not on
// Workers): chunk c of tensor i is drawn from its own PCG stream keyed by
// (Seed, i, c).
func Write(w io.Writer, o Options) error { return WriteContext(context.Background(), w, o) }

// WriteContext is Write that stops, returning ctx's error, when ctx is done
// (checked before each chunk of tensor data).
func WriteContext(ctx context.Context, w io.Writer, o Options) error {
	m, err := prepare(o)
	if err != nil {
		return err
	}
	if err := m.write(ctx, w); err != nil {
		return fmt.Errorf("synth: write: %w", err)
	}
	return nil
}

func (m *model) write(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	m.header(e)
	if e.err == nil {
		e.err = m.stream(ctx, e)
	}
	if e.err == nil {
		e.err = bw.Flush()
	}
	return e.err
}

// WriteFile writes the model to path+".tmp", syncs it and renames it over
// path, so an interrupted run never leaves a truncated model under the real
// name.
func WriteFile(path string, o Options) error {
	return WriteFileContext(context.Background(), path, o)
}

// WriteFileContext is WriteFile that stops when ctx is done; the temporary
// file is removed.
func WriteFileContext(ctx context.Context, path string, o Options) error {
	m, err := prepare(o) // fail before creating anything
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	err = m.write(ctx, fh)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("synth: write %s: %w", path, err)
	}
	return nil
}

// header writes magic, counts, metadata, the tensor index and the padding
// up to the data section.
func (m *model) header(e *encoder) {
	e.bytes([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(m.tensors)))
	e.u64(uint64(len(m.meta)))
	for _, kv := range m.meta {
		e.str(kv.key)
		e.value(kv.value)
	}
	for _, t := range m.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.shape)))
		for j := len(t.shape) - 1; j >= 0; j-- { // ggml ne: innermost first
			e.u64(uint64(t.shape[j]))
		}
		e.u32(uint32(t.dt))
		e.u64(uint64(t.offset))
	}
	e.pad(alignment)
}

// job is one chunk of one tensor on its way from a worker to the writer.
type job struct {
	t          *tensorPlan
	chunk      int
	row0, rows int
	buf        *[]byte
	done       chan struct{} // closed when buf holds the encoded chunk
}

// stream generates and writes the data section. A producer hands jobs to
// the workers and, in file order, to the writer (this goroutine) through a
// bounded queue; the writer waits for each job in turn. At most cap(queue)+1
// chunks are alive at once.
func (m *model) stream(ctx context.Context, e *encoder) error {
	workers := m.o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	maxChunk := 0
	for i := range m.tensors {
		t := &m.tensors[i]
		maxChunk = max(maxChunk, t.rowsPerChunk()*int(t.rowBytes))
	}
	pool := sync.Pool{New: func() any { b := make([]byte, maxChunk); return &b }}
	queue := make(chan *job, 4*workers)
	work := make(chan *job)
	quit := make(chan struct{})
	var wg sync.WaitGroup

	wg.Go(func() {
		defer close(work)
		defer close(queue)
		for i := range m.tensors {
			t := &m.tensors[i]
			per := t.rowsPerChunk()
			for c := range t.chunks() {
				j := &job{t: t, chunk: c, row0: c * per, rows: min(per, t.rows-c*per), done: make(chan struct{})}
				select {
				case queue <- j:
				case <-quit:
					return
				}
				select {
				case work <- j:
				case <-quit:
					return
				}
			}
		}
	})
	for range workers {
		wg.Go(func() {
			g := newGenerator(m.o.Seed)
			for j := range work {
				j.buf = pool.Get().(*[]byte)
				g.fill((*j.buf)[:j.rows*int(j.t.rowBytes)], j.t, j.chunk, j.rows)
				close(j.done)
			}
		})
	}

	var err error
	var written int64
	var prevEnd int64
	for j := range queue {
		if err = ctx.Err(); err != nil {
			close(quit)
			break
		}
		<-j.done
		if j.chunk == 0 && j.t.offset > prevEnd { // padding between tensors
			e.zeros(j.t.offset - prevEnd)
		}
		n := j.rows * int(j.t.rowBytes)
		e.bytes((*j.buf)[:n])
		pool.Put(j.buf)
		written += int64(n)
		prevEnd = j.t.offset + int64(j.row0+j.rows)*j.t.rowBytes
		if e.err != nil {
			err = e.err
			close(quit)
			break
		}
		if m.o.Progress != nil {
			m.o.Progress(written, m.tensorBytes)
		}
	}
	wg.Wait() // the producer sees quit; workers finish their job and see work closed
	return err
}

// generator turns keyed random streams into encoded tensor chunks. Each
// worker owns one, so its scratch buffer is reused.
type generator struct {
	seed    uint64
	pcg     *rand.PCG
	rng     *rand.Rand
	scratch []float32
}

func newGenerator(seed uint64) *generator {
	pcg := rand.NewPCG(0, 0)
	return &generator{seed: seed, pcg: pcg, rng: rand.New(pcg)}
}

// mix is splitmix64's finalizer: a bijection that spreads nearby keys apart.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// streamKey derives the 128-bit PCG state of chunk c of tensor i.
func streamKey(seed uint64, i, c int) (uint64, uint64) {
	hi := mix(seed + 0x9e3779b97f4a7c15*uint64(i+1))
	lo := mix(hi ^ mix(uint64(c)+0x632be59bd9b4e019))
	return hi, lo
}

// fill writes rows rows of chunk c of t, encoded as t.dt, to dst.
func (g *generator) fill(dst []byte, t *tensorPlan, c, rows int) {
	n := rows * t.cols
	if cap(g.scratch) < n {
		g.scratch = make([]float32, n)
	}
	x := g.scratch[:n]
	g.pcg.Seed(streamKey(g.seed, t.index, c))
	base := float32(0)
	if t.norm {
		base = 1
	}
	for i := range x {
		x[i] = base + float32(g.rng.NormFloat64())*t.std
	}
	switch t.dt {
	case tensor.F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case tensor.F16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], tensor.F32ToF16(v))
		}
	case tensor.BF16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], tensor.F32ToBF16(v))
		}
	case tensor.Q8_0: // rows are whole blocks, so the chunk quantizes as one run
		tensor.QuantizeRowQ8_0(dst, x)
	case tensor.Q4_0:
		tensor.QuantizeRowQ4_0(dst, x)
	default:
		panic("synth: fill: unplanned dtype " + t.dt.String()) // prepare rejects these
	}
}

// encoder writes GGUF's little-endian fields and keeps the first error, so
// the header code stays linear.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	tmp [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.tmp[:], v); e.bytes(e.tmp[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.tmp[:], v); e.bytes(e.tmp[:8]) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		n, err := e.w.WriteString(s)
		e.n += int64(n)
		e.err = err
	}
}

func (e *encoder) zeros(n int64) {
	var z [alignment]byte
	for n > 0 && e.err == nil {
		k := min(n, int64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) pad(a int64) { e.zeros(alignUp(e.n, a) - e.n) }

// GGUF metadata value types (gguf_type).
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

// value writes a typed metadata value (type id, then payload).
func (e *encoder) value(v any) {
	switch x := v.(type) {
	case uint32:
		e.u32(ggufUint32)
		e.u32(x)
	case float32:
		e.u32(ggufFloat32)
		e.u32(math.Float32bits(x))
	case bool:
		e.u32(ggufBool)
		b := byte(0)
		if x {
			b = 1
		}
		e.bytes([]byte{b})
	case string:
		e.u32(ggufString)
		e.str(x)
	case []string:
		e.u32(ggufArray)
		e.u32(ggufString)
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []float32:
		e.u32(ggufArray)
		e.u32(ggufFloat32)
		e.u64(uint64(len(x)))
		for _, f := range x {
			e.u32(math.Float32bits(f))
		}
	case []int32:
		e.u32(ggufArray)
		e.u32(ggufInt32)
		e.u64(uint64(len(x)))
		for _, i := range x {
			e.u32(uint32(i))
		}
	default:
		panic(fmt.Sprintf("synth: metadata value of type %T", v)) // metadata() only builds the types above
	}
}
