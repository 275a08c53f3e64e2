// Package offload is the tensor store: the only way model code reaches weight
// bytes. A Ref names a tensor somewhere in the tiers; Acquire makes it resident
// and pins it until Release. Tiers: RAM, mmap, and ssd (a pinned set plus
// layers streamed through a ring of buffers by O_DIRECT preads under a
// memory budget, prefetched ahead of the compute: stream.go; what the
// budget leaves holds a ristretto cache of chunks of those layers:
// chunks.go).
package offload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// Ref names a tensor's bytes. Cheap to copy; safe to keep in model structs.
type Ref struct {
	Name   string
	DType  tensor.DType
	Shape  []int // outermost first
	File   int   // index into Options.Files
	Offset int64 // absolute byte offset in the file
	Size   int64
}

// Rows and Cols view the tensor as a matrix (Cols = innermost dimension).
func (r Ref) Rows() int { return tensor.Info{Shape: r.Shape}.Rows() }
func (r Ref) Cols() int { return tensor.Info{Shape: r.Shape}.Cols() }

// info is r as a tensor.Info (name, type, shape).
func (r Ref) info() tensor.Info { return tensor.Info{Name: r.Name, DType: r.DType, Shape: r.Shape} }

// Valid reports whether r names a tensor (the zero Ref does not).
func (r Ref) Valid() bool { return r.Name != "" }

// Pinned is resident bytes that stay valid until Release.
type Pinned interface {
	Bytes() []byte
	Release() // idempotent
}

// Tier is where weights live between uses.
type Tier uint8

const (
	// Mmap maps each file read-only; the OS pages weights in on first touch.
	Mmap Tier = iota
	// RAM reads every file into memory at Open (anonymous memory in huge
	// pages where the kernel allows: see anonHuge).
	RAM
	// Auto picks RAM for a file that fits in half the memory the kernel
	// reports available, else Mmap. A decode streams every weight once per
	// token and huge pages stream faster than the page cache's 4 KiB ones
	// (110m Q8_0 decode 1.23×), so RAM is the faster tier whenever it fits;
	// Mmap keeps larger models runnable and shares pages between processes.
	Auto
	// SSD keeps a pinned set resident (what every pass needs, and as many
	// whole layers as the budget holds) and streams the other layers from
	// the file through a ring of ≥ 2 layer buffers, with pread (O_DIRECT
	// where the filesystem allows it); what the budget leaves after both
	// caches chunks of the streamed layers (chunks.go). Options.Budget
	// bounds what is resident; without one it streams every layer (the
	// smallest footprint) and caches nothing.
	SSD
)

func (t Tier) String() string {
	switch t {
	case Mmap:
		return "mmap"
	case RAM:
		return "ram"
	case Auto:
		return "auto"
	case SSD:
		return "ssd"
	}
	return fmt.Sprintf("tier(%d)", t)
}

// ParseTier maps "mmap", "ram", "ssd" or "auto" to a Tier; "" is Auto.
func ParseTier(s string) (Tier, error) {
	switch s {
	case "ssd":
		return SSD, nil
	case "mmap":
		return Mmap, nil
	case "ram":
		return RAM, nil
	case "", "auto":
		return Auto, nil
	}
	return 0, fmt.Errorf("offload: unknown tier %q (want auto, ram, mmap or ssd)", s)
}

// resolve is the tier a file of size bytes gets: t itself unless t is Auto.
func (t Tier) resolve(size int64) Tier {
	if t != Auto {
		return t
	}
	if avail, ok := memAvailable(); ok && size <= avail/2 {
		return RAM
	}
	return Mmap
}

// memAvailable is MemAvailable from /proc/meminfo (Linux), in bytes.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10, true
				}
			}
		}
	}
	return 0, false
}

// File is one weight file and the tensors it holds.
type File struct {
	Path    string
	Tensors []tensor.Info
}

// Options configures Open.
type Options struct {
	Files    []File
	Tier     Tier
	Logger   zerolog.Logger          // zero value logs nothing
	Progress func(done, total int64) // load progress (RAM tier); the CLI draws the bar
	// Budget bounds the bytes of resident weights (0: none). The ssd tier
	// sizes its pinned set and ring from it; Auto picks RAM when the files
	// fit in it (and in half the available memory), else ssd; RAM refuses
	// files larger than it; mmap cannot enforce it and says so.
	Budget int64
	// ReadAt, when set, replaces the ssd tier's pread (fault injection).
	ReadAt ReadAtFunc
	// Timeline records per-layer read and compute spans (Timeliner).
	Timeline bool
	// Panels lays out every matrix the kernels can (kernels.Repackable:
	// Q8_0, and Q4_0 under a kernel set with a Q4_0 panel kernel) in their
	// panel layout (kernels.Repack), in place, where the store owns
	// the bytes: the RAM tier at Open, the ssd tier's pinned set at Plan
	// and its streamed layers in their ring buffer after each read while
	// passes have more than one row (RowsHinter), off the compute's path
	// (ring.go's packer). mmap'd bytes are never written.
	// Pinned views of such a tensor report its layout (LayoutOf).
	// Set it when kernels.Panels(tensor.Q8_0): a kernel set without a
	// panel kernel gives the same bits, but slower.
	Panels bool

	poison bool // tests: fill a ring buffer with 0xff before each read, a chunk cache frame when its chunk is dropped
	// Tests: pin this many fewer whole layers than fit, leaving their bytes
	// to the chunk cache; offer chunks to ristretto even when it is full.
	cacheLayers int
	chunkChurn  bool
}

// Laid is a Pinned whose bytes may be in a kernel layout other than the
// file's (Options.Panels). A Store that wraps another and hands out its own
// Pinned over the inner one's bytes must pass the layout on.
type Laid interface {
	Layout() kernels.Layout
}

// LayoutOf is the layout of p's bytes: kernels.RowMajor unless p says
// otherwise. Readers of raw bytes must honour it (kernels.RowBytes,
// kernels.DecodeRow).
func LayoutOf(p Pinned) kernels.Layout {
	// The store's own pins by concrete type first: an interface-to-interface
	// assertion keeps a per-site cache that the runtime grows at random
	// moments (a heap allocation inside a warm decode step, which
	// TestDecodeStepDoesNotAllocate caught once under -race).
	switch v := p.(type) {
	case *view:
		return v.Layout()
	case *slotPin:
		return v.Layout()
	case *heapPin:
		return kernels.RowMajor
	}
	if l, ok := p.(Laid); ok {
		return l.Layout()
	}
	return kernels.RowMajor
}

// panelsOf is the layout repack leaves tensor t in.
func panelsOf(panels bool, t tensor.Info) kernels.Layout {
	if !panels || !kernels.Repackable(t.DType, t.Rows(), t.Cols()) || len(t.Shape) < 2 {
		return kernels.RowMajor
	}
	if t.DType == tensor.Q4_0 {
		return kernels.PanelQ4_0
	}
	return kernels.PanelQ8_0
}

// repack lays out b (the bytes of tensor t) for the kernels when panels is
// set and the kernels can, and returns the layout it is left in.
func repack(panels bool, t tensor.Info, b []byte) (kernels.Layout, error) {
	if panelsOf(panels, t) == kernels.RowMajor {
		return kernels.RowMajor, nil
	}
	w, err := kernels.Repack(kernels.Weight{DType: t.DType, Data: b, Rows: t.Rows(), Cols: t.Cols()})
	if err != nil {
		return kernels.RowMajor, fmt.Errorf("offload: tensor %q: %w", t.Name, err)
	}
	return w.Layout, nil
}

// Stats counts store traffic.
type Stats struct {
	Acquires     int64
	BytesMapped  int64 // mmap tier: bytes of files mapped
	BytesRead    int64 // RAM tier: bytes read at Open; ssd tier: the pinned set
	PrefetchHint int64

	// The ssd tier.
	BytesStreamed  int64         // layer bytes read from the disk into the ring since Open
	Loads          int64         // layer reads into the ring
	LateLoads      int64         // Acquires that found their layer not yet read and waited
	Wait           time.Duration // time those Acquires waited
	Pinned         int64         // bytes of the pinned set (layers pinned included)
	RingBuffers    int           // layer buffers in the ring
	RingBytes      int64         // bytes of the ring
	StreamedLayers int           // layers that stream (the others are pinned)
	// Packed counts streamed tensors laid out in panels in the ring after
	// their read (Options.Panels), PackTime the time that took (off the
	// compute's path: it overlaps the next read).
	Packed   int64
	PackTime time.Duration
	RowBytes int64 // bytes of rows read by RowReader (the embedding)
	// SplitLayers: the layers were too large to stream whole under the
	// budget, so the stream units (StreamedLayers, RingBuffers) are their
	// large tensors; the small ones are pinned.
	SplitLayers bool

	// The ssd tier's chunk cache (what the budget leaves after the pinned
	// set and the ring, holding chunks of streamed layers: chunks.go).
	CacheBytes     int64 // its capacity
	CachedBytes    int64 // of which chunks fill
	ChunkHits      int64 // chunks of a layer read copied from the cache
	ChunkMisses    int64 // chunks read from the disk
	BytesFromCache int64 // bytes the hits copied (not in BytesStreamed)
	ChunksRefused  int64 // missed chunks not cached: the cache was full
	ChunkEvictions int64 // chunks ristretto evicted or rejected
}

// Resident is the bytes of weights the store keeps in memory.
func (s Stats) Resident() int64 { return s.Pinned + s.RingBytes + s.CacheBytes }

// HitRate is the share of streamed chunk reads the chunk cache served.
func (s Stats) HitRate() float64 {
	if n := s.ChunkHits + s.ChunkMisses; n > 0 {
		return float64(s.ChunkHits) / float64(n)
	}
	return 0
}

// RowsHinter is a store that lays out streamed weights for batches only
// (the ssd tier: ring.go's packer): a pass of one row reads each weight
// once whatever its layout, so packing the layers of a decode would only
// spend a core; a batch re-reads each weight block per input, which the
// panel layout serves. The model calls PassRows (through HintRows) before
// the blocks of each pass with the pass's rows; reads that start after it
// (the rest of the pass, and the window's first layers of the next) follow
// it. The layout changes no bits (kernels' contract), only speed.
type RowsHinter interface {
	PassRows(n int)
}

// HintRows tells w, when it is a RowsHinter, that a pass of n rows starts.
func HintRows(w Store, n int) {
	// The store's own types first: an interface-to-interface assertion
	// keeps a per-site cache the runtime grows at random moments (see
	// LayoutOf).
	switch s := w.(type) {
	case *streamStore:
		s.PassRows(n)
	case *memStore:
	default:
		if h, ok := w.(RowsHinter); ok {
			h.PassRows(n)
		}
	}
}

// Usage is how a model uses its weights, which a Planner lays out (not
// kernels.Layout, the byte layout of one weight).
type Usage struct {
	// Layers[i] are block i's tensors, in the order the block acquires
	// them; blocks run in this order every pass.
	Layers [][]Ref
	// Rows are tensors read only a row at a time (an embedding the output
	// head does not share): through RowReader, never held whole.
	Rows []Ref
}

// Planner is a store that lays weights out once the model knows its layers
// (the ssd tier): every tensor neither a layer's nor in Rows is pinned.
// model.Load calls it after binding.
type Planner interface {
	Plan(ctx context.Context, l Usage) error
}

// RowReader is a Store that reads single rows of the tensors it holds by
// row (Layout.Rows), by byte range, instead of making them resident.
type RowReader interface {
	// ReadsRows reports whether r is one of them.
	ReadsRows(r Ref) bool
	// ReadRow copies row i of r (r.Size / r.Rows() bytes) into dst.
	ReadRow(ctx context.Context, r Ref, i int, dst []byte) error
}

// Store serves weight bytes.
type Store interface {
	Lookup(name string) (Ref, bool)
	// Acquire blocks until r is resident and pins it.
	Acquire(ctx context.Context, r Ref) (Pinned, error)
	// Prefetch is a non-blocking hint; it may be ignored.
	Prefetch(refs ...Ref)
	Stats() Stats
	Close() error
}

// ErrClosed is returned by Acquire after Close.
var ErrClosed = errors.New("offload: store closed")

type memStore struct {
	files   []memFile
	index   map[string]Ref
	views   map[viewKey]*view // one per tensor, so Acquire does not allocate
	closed  atomic.Bool
	mu      sync.Mutex
	acq     atomic.Int64
	hints   atomic.Int64
	mapped  int64
	readLen int64
}

type memFile struct {
	path   string
	data   []byte
	mapped bool   // data is the file mapped (the mmap tier)
	unmap  []byte // a mapping Close unmaps (len == cap, as Munmap wants), or nil
}

// Open validates every tensor against its file's size and maps or reads
// the files; the ssd tier reads nothing until Plan.
func Open(ctx context.Context, o Options) (Store, error) {
	if o.Budget < 0 {
		return nil, fmt.Errorf("offload: memory budget %d is negative", o.Budget)
	}
	s := &memStore{index: map[string]Ref{}, views: map[viewKey]*view{}}
	var total int64
	for _, f := range o.Files {
		st, err := os.Stat(f.Path)
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		total += st.Size()
	}
	if o.Budget > 0 {
		switch o.Tier {
		case Auto:
			if o.Tier.resolve(total) == RAM && total <= o.Budget {
				o.Tier = RAM
			} else {
				o.Tier = SSD
			}
			o.Logger.Debug().Str("tier", o.Tier.String()).Str("budget", FormatBytes(o.Budget)).Msg("offload: auto tier picked from the budget")
		case RAM:
			if total > o.Budget {
				return nil, fmt.Errorf("offload: the ram tier holds all %s of weights, more than the memory budget of %s: use --tier ssd (or auto)",
					FormatBytes(total), FormatBytes(o.Budget))
			}
		case Mmap:
			o.Logger.Warn().Str("budget", FormatBytes(o.Budget)).Msg("offload: the mmap tier leaves residency to the kernel and does not enforce the memory budget; use --tier ssd to bound it")
		}
	}
	if o.Tier == SSD {
		return openStream(o)
	}
	var done int64
	for fi, f := range o.Files {
		mf, err := openFile(ctx, f.Path, o.Tier, func(n int64) {
			done += n
			if o.Progress != nil {
				o.Progress(done, total)
			}
		})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, mf)
		if mf.mapped {
			s.mapped += int64(len(mf.data))
		} else {
			s.readLen += int64(len(mf.data))
		}
		for _, t := range f.Tensors {
			if t.Offset < 0 || t.Size < 0 || t.Offset+t.Size > int64(len(mf.data)) {
				s.Close()
				return nil, fmt.Errorf("offload: %s: tensor %q at offset %d size %d runs past the end of the file (%d bytes)",
					f.Path, t.Name, t.Offset, t.Size, len(mf.data))
			}
			if _, dup := s.index[t.Name]; dup {
				s.Close()
				return nil, fmt.Errorf("offload: %s: tensor %q appears twice", f.Path, t.Name)
			}
			s.index[t.Name] = Ref{Name: t.Name, DType: t.DType, Shape: t.Shape, File: fi, Offset: t.Offset, Size: t.Size}
			end := t.Offset + t.Size
			v := &view{b: mf.data[t.Offset:end:end]}
			if !mf.mapped {
				l, err := repack(o.Panels, t, v.b)
				if err != nil {
					s.Close()
					return nil, fmt.Errorf("offload: %s: %w", f.Path, err)
				}
				v.layout = l
			}
			s.views[viewKey{fi, t.Offset, t.Size}] = v
		}
	}
	o.Logger.Debug().Int("files", len(s.files)).Int("tensors", len(s.index)).Str("tier", o.Tier.String()).Msg("store open")
	return s, nil
}

func openFile(ctx context.Context, path string, tier Tier, progress func(int64)) (memFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return memFile{}, fmt.Errorf("offload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return memFile{}, fmt.Errorf("offload: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return memFile{path: path}, nil
	}
	if tier.resolve(size) == Mmap {
		data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
		if err == nil {
			progress(size)
			return memFile{path: path, data: data, mapped: true, unmap: data}, nil
		}
		// Fall back to reading (some filesystems refuse mmap).
	}
	data, unmap := anonHuge(size)
	const chunk = 8 << 20
	for off := int64(0); off < size; off += chunk {
		if err := ctx.Err(); err != nil {
			return memFile{}, err
		}
		n := min(chunk, size-off)
		if _, err := f.ReadAt(data[off:off+n], off); err != nil {
			return memFile{}, fmt.Errorf("offload: read %s at offset %d: %w", path, off, err)
		}
		progress(n)
	}
	return memFile{path: path, data: data, unmap: unmap}, nil
}

// anonHuge returns size bytes of anonymous memory, page-aligned, in whole
// 2 MiB pages that the kernel is asked to back with transparent huge pages
// (MADV_HUGEPAGE: needed when THP is in "madvise" mode, as on Debian), and
// the mapping to unmap when done. Decode streams every weight once per
// token; with 4 KiB pages each page costs a TLB miss and a page walk, and a
// 2 MiB-paged weight streamed 1.13× faster in BenchmarkQ8_0Kernels (27 → 30
// GB/s, one thread; 110m Q8_0 decode 1.23×). Where mmap fails it falls back
// to the Go heap (unmap nil).
func anonHuge(size int64) (data, unmap []byte) {
	const huge = 2 << 20
	n := (size + huge - 1) / huge * huge
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// A []uint64 backing keeps float32 views of the bytes aligned.
		return unsafeBytes(make([]uint64, (size+7)/8))[:size], nil
	}
	_ = syscall.Madvise(b, madvHugepage) // advice only: 4 KiB pages still work
	return b[:size], b
}

// madvHugepage is MADV_HUGEPAGE (linux/mman.h).
const madvHugepage = 14

func (s *memStore) Lookup(name string) (Ref, bool) {
	r, ok := s.index[name]
	return r, ok
}

type viewKey struct {
	file      int
	off, size int64
}

// view is a resident tensor of the RAM or mmap tier (or the ssd tier's
// pinned set): nothing to pin.
type view struct {
	b      []byte
	layout kernels.Layout
}

func (v *view) Bytes() []byte          { return v.b }
func (v *view) Release()               {}
func (v *view) Layout() kernels.Layout { return v.layout }

func (s *memStore) Acquire(ctx context.Context, r Ref) (Pinned, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if r.File < 0 || r.File >= len(s.files) {
		return nil, fmt.Errorf("offload: tensor %q names file %d of %d", r.Name, r.File, len(s.files))
	}
	data := s.files[r.File].data
	if r.Offset < 0 || r.Size < 0 || r.Offset+r.Size > int64(len(data)) {
		return nil, fmt.Errorf("offload: tensor %q [%d,+%d) outside %s", r.Name, r.Offset, r.Size, s.files[r.File].path)
	}
	s.acq.Add(1)
	if v, ok := s.views[viewKey{r.File, r.Offset, r.Size}]; ok {
		return v, nil
	}
	end := r.Offset + r.Size // a Ref made by hand for a range no tensor names
	return &view{b: data[r.Offset:end:end]}, nil
}

func (s *memStore) Prefetch(refs ...Ref) { s.hints.Add(int64(len(refs))) }

func (s *memStore) Stats() Stats {
	return Stats{Acquires: s.acq.Load(), BytesMapped: s.mapped, BytesRead: s.readLen, PrefetchHint: s.hints.Load()}
}

// Close unmaps the files. Pinned views must not be used afterwards.
func (s *memStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var first error
	for _, f := range s.files {
		if f.unmap != nil {
			if err := syscall.Munmap(f.unmap); err != nil && first == nil {
				first = fmt.Errorf("offload: munmap %s: %w", f.path, err)
			}
		}
	}
	s.files = nil
	return first
}
