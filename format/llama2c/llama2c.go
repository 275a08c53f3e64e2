// Package llama2c reads llama2.c checkpoints (karpathy's legacy "version 0"
// files and the "ak42" version 1 export) and presents them as a GGUF-like
// tensor index with GGUF tensor names and GGUF metadata keys, so model code
// treats both formats alike.
//
// Like format/gguf it reads only the header: Tensors carries absolute file
// offsets for offload.Store to serve. The file size must match the header
// exactly; a checkpoint cut short or with trailing bytes is rejected with the
// tensor that would be cut, since a silently misaligned weight table produces
// plausible garbage rather than an error.
package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/tensor"
)

// Magic is the first uint32 of a version 1+ export ("ak42" read as a
// little-endian uint32; the bytes on disk are "24ka").
const Magic = 0x616b3432

// Header sizes in bytes.
const (
	legacyHeaderBytes = 7 * 4
	headerBytes       = 256 // version 1 and 2: magic, version, 7 params, flags, zero padding
)

// Sanity bounds on header fields: far above any llama2.c-loadable model, low
// enough that arithmetic on them cannot overflow and random bytes (a GGUF
// magic, say) are not mistaken for a checkpoint.
const (
	maxDim    = 1 << 16
	maxHidden = 1 << 18
	maxLayers = 1 << 10
	maxHeads  = 1 << 10
	maxVocab  = 1 << 22
	maxSeqLen = 1 << 22
)

// Sentinel errors; every *Error unwraps to one of them (or an I/O error).
var (
	ErrTruncated   = errors.New("llama2c: truncated")
	ErrCorrupt     = errors.New("llama2c: corrupt")
	ErrUnsupported = errors.New("llama2c: unsupported")
)

// Error describes a problem at one place in one file.
type Error struct {
	Path   string
	Offset int64
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("llama2c: %s: offset %d: %s", e.Path, e.Offset, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Config is the checkpoint header.
type Config struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, VocabSize, SeqLen int
	// SharedClassifier: output.weight is token_embd.weight (no separate tensor).
	SharedClassifier bool
	// Version is 0 for legacy files, 1 for "ak42" version 1 exports.
	Version int
}

// HeadSize is Dim / Heads.
func (c Config) HeadSize() int { return c.Dim / c.Heads }

// KVDim is the width of the K and V projections: Dim * KVHeads / Heads.
func (c Config) KVDim() int { return c.Dim * c.KVHeads / c.Heads }

// Validate checks that the fields are positive, consistent and within sane
// bounds.
func (c Config) Validate() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"dim", c.Dim, maxDim}, {"hidden_dim", c.HiddenDim, maxHidden}, {"n_layers", c.Layers, maxLayers},
		{"n_heads", c.Heads, maxHeads}, {"n_kv_heads", c.KVHeads, maxHeads}, {"vocab_size", c.VocabSize, maxVocab},
		{"seq_len", c.SeqLen, maxSeqLen},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("%s = %d, want 1..%d", f.name, f.v, f.max)
		}
	}
	if c.Dim%c.Heads != 0 {
		return fmt.Errorf("dim %d is not a multiple of n_heads %d", c.Dim, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("n_heads %d is not a multiple of n_kv_heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadSize()%2 != 0 {
		return fmt.Errorf("head size %d (dim %d / n_heads %d) is odd; RoPE rotates pairs", c.HeadSize(), c.Dim, c.Heads)
	}
	if c.Version != 0 && c.Version != 1 {
		return fmt.Errorf("version %d, want 0 or 1", c.Version)
	}
	return nil
}

// File is a parsed checkpoint header and tensor index.
type File struct {
	Path    string
	Config  Config
	Meta    map[string]any // GGUF-named metadata, GGUF-typed (uint32 ints, float32 floats)
	Tensors []tensor.Info  // GGUF names, absolute offsets, F32, in file order
}

// Tensor returns the index entry of the named tensor.
func (f *File) Tensor(name string) (tensor.Info, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return tensor.Info{}, false
}

// Sniff reports whether header (the first bytes of a file; 28 suffice) looks
// like a llama2.c checkpoint: the "ak42" magic, or a legacy header whose seven
// fields pass Validate.
func Sniff(header []byte) bool {
	if len(header) >= 4 && binary.LittleEndian.Uint32(header) == Magic {
		return true
	}
	if len(header) < legacyHeaderBytes {
		return false
	}
	return legacyConfig(header).Validate() == nil
}

func int32At(b []byte, i int) int { return int(int32(binary.LittleEndian.Uint32(b[4*i:]))) }

// legacyConfig decodes the seven int32 of a version 0 header. The sign of
// vocab_size is the shared-classifier flag.
func legacyConfig(b []byte) Config {
	c := Config{
		Dim: int32At(b, 0), HiddenDim: int32At(b, 1), Layers: int32At(b, 2), Heads: int32At(b, 3),
		KVHeads: int32At(b, 4), VocabSize: int32At(b, 5), SeqLen: int32At(b, 6),
	}
	c.SharedClassifier = c.VocabSize > 0
	if c.VocabSize < 0 {
		c.VocabSize = -c.VocabSize // math.MinInt32 stays out of range and fails Validate
	}
	return c
}

// Open reads the header of the checkpoint at path and lays out its tensors.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	return Read(fh, st.Size(), path)
}

// Read parses a checkpoint of size bytes from r; name identifies it in errors
// and becomes File.Path (its base name, less the extension, is general.name).
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	errAt := func(off int64, sentinel error, format string, args ...any) error {
		return &Error{Path: name, Offset: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
	}
	read := func(n int64) ([]byte, error) {
		if size < n {
			return nil, errAt(0, ErrTruncated, "header: want %d bytes, but the file ends at %d", n, size)
		}
		b := make([]byte, n)
		if got, err := r.ReadAt(b, 0); got < len(b) {
			if err == nil || errors.Is(err, io.EOF) {
				err = ErrTruncated
			}
			return nil, errAt(int64(got), err, "reading the %d-byte header: %v", n, err)
		}
		return b, nil
	}

	b, err := read(4)
	if err != nil {
		return nil, err
	}
	var cfg Config
	var dataStart int64
	if binary.LittleEndian.Uint32(b) == Magic {
		if b, err = read(headerBytes); err != nil {
			return nil, err
		}
		version := int32At(b, 1)
		switch version {
		case 1:
		case 2:
			return nil, errAt(4, ErrUnsupported, "version 2 (int8) checkpoints are not supported")
		default:
			return nil, errAt(4, ErrUnsupported, "version %d is unsupported (want 1, or a legacy header)", version)
		}
		cfg = Config{
			Dim: int32At(b, 2), HiddenDim: int32At(b, 3), Layers: int32At(b, 4), Heads: int32At(b, 5),
			KVHeads: int32At(b, 6), VocabSize: int32At(b, 7), SeqLen: int32At(b, 8), Version: 1,
		}
		switch b[36] {
		case 0, 1:
			cfg.SharedClassifier = b[36] == 1
		default:
			return nil, errAt(36, ErrCorrupt, "shared_classifier flag %d, want 0 or 1", b[36])
		}
		dataStart = headerBytes
	} else {
		if b, err = read(legacyHeaderBytes); err != nil {
			return nil, err
		}
		cfg = legacyConfig(b)
		dataStart = legacyHeaderBytes
	}
	if err := cfg.Validate(); err != nil {
		return nil, errAt(0, ErrCorrupt, "header: %v", err)
	}

	tensors, end := Layout(cfg, dataStart)
	if end != size {
		if size < end {
			// The first region to cross the end is the one reported; its start
			// is inside the file because the regions tile it without gaps.
			_, freqsAfter, freqs := order(cfg)
			for _, t := range tensors {
				if t.Offset+t.Size > size {
					return nil, errAt(t.Offset, ErrTruncated, "file is %d bytes, want %d for %s: tensor %q [%d,+%d) is cut",
						size, end, describe(cfg), t.Name, t.Offset, t.Size)
				}
				if t.Name == freqsAfter && t.Offset+t.Size+4*freqs > size {
					return nil, errAt(t.Offset+t.Size, ErrTruncated, "file is %d bytes, want %d for %s: the freq_cis tables [%d,+%d) are cut",
						size, end, describe(cfg), t.Offset+t.Size, 4*freqs)
				}
			}
		}
		return nil, errAt(end, ErrCorrupt, "file is %d bytes, want %d for %s: %d unexpected trailing bytes",
			size, end, describe(cfg), size-end)
	}

	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	return &File{Path: name, Config: cfg, Meta: Meta(cfg, base), Tensors: tensors}, nil
}

func describe(c Config) string {
	cls := "shared classifier"
	if !c.SharedClassifier {
		cls = "separate classifier"
	}
	return fmt.Sprintf("version %d dim %d hidden %d layers %d heads %d/%d vocab %d seq_len %d, %s",
		c.Version, c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads, c.VocabSize, c.SeqLen, cls)
}

// Meta returns the GGUF metadata equivalent to cfg, typed as llama.cpp's
// converter writes it.
func Meta(cfg Config, name string) map[string]any {
	return map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           name,
		"llama.embedding_length":                 uint32(cfg.Dim),
		"llama.feed_forward_length":              uint32(cfg.HiddenDim),
		"llama.block_count":                      uint32(cfg.Layers),
		"llama.attention.head_count":             uint32(cfg.Heads),
		"llama.attention.head_count_kv":          uint32(cfg.KVHeads),
		"llama.context_length":                   uint32(cfg.SeqLen),
		"llama.rope.dimension_count":             uint32(cfg.HeadSize()),
		"llama.rope.freq_base":                   float32(10000),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.vocab_size":                       uint32(cfg.VocabSize),
	}
}

// tensorSpec is one weight array in the file: its GGUF name and shape
// (outermost first, i.e. (out rows, in cols) for matrices).
type tensorSpec struct {
	name  string
	shape []int
}

// order lists the arrays in file order for cfg.Version. freqs is the size in
// floats of the legacy RoPE tables that sit between output_norm and the
// classifier (skipped, not indexed).
func order(c Config) (specs []tensorSpec, freqsAfter string, freqs int64) {
	d, h, kv, v := c.Dim, c.HiddenDim, c.KVDim(), c.VocabSize
	perLayer := func(suffix string, shape ...int) []tensorSpec {
		out := make([]tensorSpec, c.Layers)
		for l := range out {
			out[l] = tensorSpec{fmt.Sprintf("blk.%d.%s", l, suffix), shape}
		}
		return out
	}
	emb := tensorSpec{"token_embd.weight", []int{v, d}}
	norm := tensorSpec{"output_norm.weight", []int{d}}
	var s []tensorSpec
	if c.Version == 0 {
		s = append(s, emb)
		s = append(s, perLayer("attn_norm.weight", d)...)
		s = append(s, perLayer("attn_q.weight", d, d)...)
		s = append(s, perLayer("attn_k.weight", kv, d)...)
		s = append(s, perLayer("attn_v.weight", kv, d)...)
		s = append(s, perLayer("attn_output.weight", d, d)...)
		s = append(s, perLayer("ffn_norm.weight", d)...)
		s = append(s, perLayer("ffn_gate.weight", h, d)...)
		s = append(s, perLayer("ffn_down.weight", d, h)...)
		s = append(s, perLayer("ffn_up.weight", h, d)...)
		s = append(s, norm)
		freqs = 2 * int64(c.SeqLen) * int64(c.HeadSize()/2)
		freqsAfter = norm.name
	} else {
		s = append(s, perLayer("attn_norm.weight", d)...)
		s = append(s, perLayer("ffn_norm.weight", d)...)
		s = append(s, norm, emb)
		s = append(s, perLayer("attn_q.weight", d, d)...)
		s = append(s, perLayer("attn_k.weight", kv, d)...)
		s = append(s, perLayer("attn_v.weight", kv, d)...)
		s = append(s, perLayer("attn_output.weight", d, d)...)
		s = append(s, perLayer("ffn_gate.weight", h, d)...)
		s = append(s, perLayer("ffn_down.weight", d, h)...)
		s = append(s, perLayer("ffn_up.weight", h, d)...)
	}
	if !c.SharedClassifier {
		s = append(s, tensorSpec{"output.weight", []int{v, d}})
	}
	return s, freqsAfter, freqs
}

// Layout returns the F32 tensor index of a checkpoint with config cfg whose
// weights start at dataStart, and the offset where the file must end. cfg
// must be valid.
func Layout(cfg Config, dataStart int64) ([]tensor.Info, int64) {
	specs, freqsAfter, freqs := order(cfg)
	off := dataStart
	out := make([]tensor.Info, 0, len(specs))
	for _, s := range specs {
		t := tensor.Info{Name: s.name, DType: tensor.F32, Shape: slices.Clone(s.shape), Offset: off}
		t.Size = 4 * t.Elements()
		out = append(out, t)
		off += t.Size
		if s.name == freqsAfter {
			off += 4 * freqs
		}
	}
	return out, off
}
