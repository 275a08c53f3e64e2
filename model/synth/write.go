package synth

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

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
	norm       bool      // 1 + noise instead of noise
	std        float32   // standard deviation of the noise
	fixed      []float32 // the values themselves instead of noise (rope_freqs)
	index      int       // position in the file, part of the random stream's key
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
// (token_embd, output_norm, output, then the blocks).
func planTensors(p Preset, a Arch, hd int, dt tensor.DType, std, embedStd float32) ([]tensorPlan, error) {
	qd, kv := p.Heads*hd, p.KVHeads*hd
	var ts []tensorPlan
	matrix := func(name string, rows, cols int) {
		ts = append(ts, tensorPlan{name: name, dt: matrixType(dt, cols), shape: []int{rows, cols}, rows: rows, cols: cols})
	}
	normN := func(name string, n int) {
		ts = append(ts, tensorPlan{name: name, dt: tensor.F32, shape: []int{n}, rows: 1, cols: n, norm: true})
	}
	norm := func(name string) { normN(name, p.Dim) }
	vector := func(name string, n int) {
		ts = append(ts, tensorPlan{name: name, dt: tensor.F32, shape: []int{n}, rows: 1, cols: n})
	}
	matrix("token_embd.weight", p.Vocab, p.Dim)
	ts[0].std = embedStd
	norm("output_norm.weight")
	if !a.Tied {
		matrix("output.weight", p.Vocab, p.Dim)
	}
	if a.RopeFreqs {
		f := llama31Factors(a.RopeBase, hd)
		ts = append(ts, tensorPlan{name: "rope_freqs.weight", dt: tensor.F32, shape: []int{len(f)}, rows: 1, cols: len(f), fixed: f})
	}
	for l := range p.Layers {
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", l, s) }
		norm(blk("attn_norm"))
		if a.Fused {
			matrix(blk("attn_qkv"), qd+2*kv, p.Dim)
		} else {
			matrix(blk("attn_q"), qd, p.Dim)
			matrix(blk("attn_k"), kv, p.Dim)
			matrix(blk("attn_v"), kv, p.Dim)
		}
		if a.QKVBias {
			vector(fmt.Sprintf("blk.%d.attn_q.bias", l), qd)
			vector(fmt.Sprintf("blk.%d.attn_k.bias", l), kv)
			vector(fmt.Sprintf("blk.%d.attn_v.bias", l), kv)
		}
		if a.QKNorm {
			normN(blk("attn_q_norm"), hd)
			normN(blk("attn_k_norm"), hd)
		}
		matrix(blk("attn_output"), p.Dim, qd)
		if a.PostNorms {
			norm(blk("post_attention_norm"))
		}
		norm(blk("ffn_norm"))
		if a.Fused {
			matrix(blk("ffn_up"), 2*p.Hidden, p.Dim)
		} else {
			matrix(blk("ffn_gate"), p.Hidden, p.Dim)
			matrix(blk("ffn_up"), p.Hidden, p.Dim)
		}
		matrix(blk("ffn_down"), p.Dim, p.Hidden)
		if a.PostNorms {
			norm(blk("post_ffw_norm"))
		}
	}
	for i := range ts {
		t := &ts[i]
		rb, err := t.dt.RowBytes(t.cols)
		if err != nil {
			return nil, fmt.Errorf("synth: %s: %w: %w", t.name, ErrInvalid, err)
		}
		t.rowBytes, t.index = rb, i
		if t.std == 0 {
			t.std = std
		}
	}
	return ts, nil
}

// kv is one metadata entry; value is of a type gguf.Writer.AddKV takes.
type kv struct {
	key   string
	value any
}

func metadata(o Options, v Vocab, std, embedStd float32) []kv {
	meta := generalMetadata(o, std, embedStd)
	for _, e := range v.GGUF() {
		meta = append(meta, kv{e.Key, e.Value})
	}
	return meta
}

func generalMetadata(o Options, std, embedStd float32) []kv {
	p := o.Preset
	a, _ := LookupArch(o.Arch) // prepare checked it
	hd := headDim(o)
	ft, _ := fileType(o.DType)
	vocabSrc := "generated vocabulary"
	if o.TokenizerPath != "" {
		vocabSrc = "vocabulary of a llama2.c tokenizer.bin"
	}
	name := "sluice-synth-" + p.Name
	if a.Name != "llama" {
		name += "-" + a.Name
	}
	display := a.Name
	if display == "llama" {
		display = "Llama"
	}
	pre := a.GGUFArch + "."
	meta := []kv{
		{"general.architecture", a.GGUFArch},
		{"general.name", name},
		{"general.description", fmt.Sprintf("synthetic %s model written by sluice gen-model (random weights, not trained): preset %s, dtype %v, seed %d, std %g, token_embd std %g, %s", display, p.Name, o.DType, o.Seed, std, embedStd, vocabSrc)},
		{"general.file_type", ft},
		{"general.quantization_version", uint32(2)},
		{pre + "context_length", uint32(p.Context)},
		{pre + "embedding_length", uint32(p.Dim)},
		{pre + "block_count", uint32(p.Layers)},
		{pre + "feed_forward_length", uint32(p.Hidden)},
		{pre + "rope.dimension_count", uint32(hd)},
		{pre + "attention.head_count", uint32(p.Heads)},
		{pre + "attention.head_count_kv", uint32(p.KVHeads)},
		{pre + "attention.layer_norm_rms_epsilon", a.Eps},
		{pre + "rope.freq_base", a.RopeBase},
		{pre + "vocab_size", uint32(p.Vocab)},
	}
	if o.HeadDim != 0 {
		meta = append(meta, kv{pre + "attention.key_length", uint32(hd)}, kv{pre + "attention.value_length", uint32(hd)})
	}
	if w := cmp.Or(o.Window, a.Window); w > 0 {
		meta = append(meta, kv{pre + "attention.sliding_window", uint32(w)})
	}
	if c := cmp.Or(o.AttnSoftcap, a.AttnSoftcap); c > 0 {
		meta = append(meta, kv{pre + "attn_logit_softcapping", c})
	}
	if a.FinalSoftcap > 0 {
		meta = append(meta, kv{pre + "final_logit_softcapping", a.FinalSoftcap})
	}
	if a.RopeLinear > 0 {
		meta = append(meta, kv{pre + "rope.scaling.type", "linear"}, kv{pre + "rope.scaling.factor", a.RopeLinear})
	}
	return meta
}

// headDim is Options.HeadDim or the preset's Dim/Heads.
func headDim(o Options) int {
	if o.HeadDim != 0 {
		return o.HeadDim
	}
	return o.Preset.HeadDim()
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
	a, err := LookupArch(o.Arch)
	if err != nil {
		return nil, err
	}
	if o.HeadDim < 0 || o.HeadDim > maxDim || o.HeadDim%2 != 0 {
		return nil, fmt.Errorf("synth: HeadDim %d, want an even size (0 = Dim/Heads): %w", o.HeadDim, ErrInvalid)
	}
	if _, ok := fileType(o.DType); !ok {
		return nil, fmt.Errorf("synth: dtype %v: %w (want f32, f16, bf16, q8_0 or q4_0)", o.DType, ErrInvalid)
	}
	std, err := checkStd("Std", o.Std, a.Std)
	if err != nil {
		return nil, err
	}
	embedStd, err := checkStd("EmbedStd", o.EmbedStd, a.EmbedStd)
	if err != nil {
		return nil, err
	}
	if o.Window < 0 || o.Window > maxDim {
		return nil, fmt.Errorf("synth: Window %d, want 0..%d: %w", o.Window, maxDim, ErrInvalid)
	}
	if o.AttnSoftcap < 0 || math.IsNaN(float64(o.AttnSoftcap)) || math.IsInf(float64(o.AttnSoftcap), 0) {
		return nil, fmt.Errorf("synth: AttnSoftcap %v, want a positive cap (0 = the architecture's): %w", o.AttnSoftcap, ErrInvalid)
	}
	if o.Workers < 0 {
		return nil, fmt.Errorf("synth: Workers %d is negative: %w", o.Workers, ErrInvalid)
	}
	var v Vocab
	if o.TokenizerPath == "" {
		if v, err = GeneratedVocab(o.Preset.Vocab); err != nil {
			return nil, fmt.Errorf("synth: preset %q: %w", o.Preset.Name, err)
		}
		for i, sp := range a.Specials {
			j := v.Len() - len(a.Specials) + i
			v.Tokens[j], v.Scores[j], v.Types[j] = sp, 0, typeControl
		}
	} else {
		if v, err = tokenizer.LoadLlama2CVocab(o.TokenizerPath); err != nil {
			if errors.Is(err, tokenizer.ErrFormat) {
				err = fmt.Errorf("synth: %w: %w", ErrTokenizer, err)
			}
			return nil, err
		}
		if v.Len() != o.Preset.Vocab {
			return nil, fmt.Errorf("synth: %s has %d pieces but preset %q has a vocabulary of %d: %w", o.TokenizerPath, v.Len(), o.Preset.Name, o.Preset.Vocab, ErrTokenizer)
		}
	}
	ts, err := planTensors(o.Preset, a, headDim(o), o.DType, std, embedStd)
	if err != nil {
		return nil, err
	}
	var total int64
	for i := range ts {
		total += ts[i].size()
	}
	return &model{o: o, meta: metadata(o, v, std, embedStd), tensors: ts, tensorBytes: total}, nil
}

// Weights is the number of weights (tensor elements) of the file o
// describes, after its architecture's additions (biases, Q/K norms,
// rope_freqs) and omissions (a tied output).
func (o Options) Weights() (int64, error) {
	m, err := prepare(o)
	if err != nil {
		return 0, err
	}
	var n int64
	for i := range m.tensors {
		n += int64(m.tensors[i].rows) * int64(m.tensors[i].cols)
	}
	return n, nil
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
	if err := m.write(ctx, func(gw *gguf.Writer) error { _, err := gw.WriteTo(w); return err }); err != nil {
		return fmt.Errorf("synth: write: %w", err)
	}
	return nil
}

// write encodes the model with a gguf.Writer, whose WriteTo or WriteFile
// run calls: metadata as KVs, each tensor as an AddTensorFunc fed by a
// stream of generated chunks.
func (m *model) write(ctx context.Context, run func(*gguf.Writer) error) error {
	w := gguf.NewWriter()
	for _, kv := range m.meta {
		if err := w.AddKV(kv.key, kv.value); err != nil {
			return err
		}
	}
	s := m.startStream(ctx)
	defer s.stop()
	for i := range m.tensors {
		t := &m.tensors[i]
		if err := w.AddTensorFunc(t.name, t.dt, t.shape, func(out io.Writer) error { return s.writeTensor(out, t) }); err != nil {
			return err
		}
	}
	return run(w)
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
	if err := m.write(ctx, func(w *gguf.Writer) error { return w.WriteFile(path) }); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// job is one chunk of one tensor on its way from a worker to the writer.
type job struct {
	t          *tensorPlan
	chunk      int
	row0, rows int
	buf        *[]byte
	done       chan struct{} // closed when buf holds the encoded chunk
}

// stream generates the data section ahead of the gguf.Writer. A producer
// hands jobs to the workers and, in file order, to the writer's goroutine
// through a bounded queue; writeTensor takes each tensor's jobs in turn and
// waits for each. At most cap(queue)+1 chunks are alive at once.
type stream struct {
	ctx     context.Context
	m       *model
	pool    sync.Pool
	queue   chan *job
	quit    chan struct{}
	wg      sync.WaitGroup
	written int64 // tensor bytes handed to the writer
}

func (m *model) startStream(ctx context.Context) *stream {
	workers := m.o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	maxChunk := 0
	for i := range m.tensors {
		t := &m.tensors[i]
		maxChunk = max(maxChunk, t.rowsPerChunk()*int(t.rowBytes))
	}
	s := &stream{ctx: ctx, m: m, queue: make(chan *job, 4*workers), quit: make(chan struct{})}
	s.pool.New = func() any { b := make([]byte, maxChunk); return &b }
	work := make(chan *job)
	s.wg.Go(func() {
		defer close(work)
		defer close(s.queue)
		for i := range m.tensors {
			t := &m.tensors[i]
			per := t.rowsPerChunk()
			for c := range t.chunks() {
				j := &job{t: t, chunk: c, row0: c * per, rows: min(per, t.rows-c*per), done: make(chan struct{})}
				select {
				case s.queue <- j:
				case <-s.quit:
					return
				}
				select {
				case work <- j:
				case <-s.quit:
					return
				}
			}
		}
	})
	for range workers {
		s.wg.Go(func() {
			g := newGenerator(m.o.Seed)
			for j := range work {
				j.buf = s.pool.Get().(*[]byte)
				g.fill((*j.buf)[:j.rows*int(j.t.rowBytes)], j.t, j.chunk, j.rows)
				close(j.done)
			}
		})
	}
	return s
}

// writeTensor writes t's chunks, the next ones in the queue, to out. It
// checks ctx before each chunk.
func (s *stream) writeTensor(out io.Writer, t *tensorPlan) error {
	for range t.chunks() {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		j, ok := <-s.queue
		if !ok || j.t != t {
			return fmt.Errorf("tensor %s: chunk stream out of step with the writer", t.name) // a bug, not bad input
		}
		<-j.done
		n := j.rows * int(t.rowBytes)
		_, err := out.Write((*j.buf)[:n])
		s.pool.Put(j.buf)
		if err != nil {
			return err
		}
		s.written += int64(n)
		if s.m.o.Progress != nil {
			s.m.o.Progress(s.written, s.m.tensorBytes)
		}
	}
	return nil
}

// stop ends the producer and the workers (the producer sees quit; workers
// finish their job and see work closed) and waits for them.
func (s *stream) stop() {
	close(s.quit)
	s.wg.Wait()
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
	if t.fixed != nil {
		copy(x, t.fixed[c*t.rowsPerChunk()*t.cols:])
	} else {
		g.fillNoise(x, t, c)
	}
	g.encode(dst, x, t)
}

// fillNoise draws chunk c of t: base plus N(0, std²) noise.
func (g *generator) fillNoise(x []float32, t *tensorPlan, c int) {
	g.pcg.Seed(streamKey(g.seed, t.index, c))
	base := float32(0)
	if t.norm {
		base = 1
	}
	for i := range x {
		x[i] = base + float32(g.rng.NormFloat64())*t.std
	}
}

// encode writes x as t.dt into dst.
func (g *generator) encode(dst []byte, x []float32, t *tensorPlan) {
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
