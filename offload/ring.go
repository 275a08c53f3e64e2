package offload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// The ssd tier: a pinned set plus streaming. Its plan (which tensors are
// pinned, which stream) is plan.go; this file is the ring that streams.
//
// Plan (called by the model loader once it knows the layers) splits the
// tensors in two. The pinned set is read once into one resident buffer:
// every tensor no layer owns (norms, the output head, the embedding) and as
// many whole layers, from the first, as the budget holds next to a ring of
// layer buffers. The other layers stream through the ring (≥ 2 buffers,
// double buffering): one loader goroutine owned by the store reads a layer
// into the buffer whose layer has been computed while the compute works on
// another, so a layer waits only when its read is late. What the budget
// leaves after the pinned set and the ring is a cache of chunks of the
// streamed layers, which the loader copies instead of reading (chunks.go).
//
// Panels. With Options.Panels the ring holds the kernels' panel layout:
// a second goroutine, the packer, lays out each streamed tensor the
// kernels can (kernels.Repackable) in panels in its ring buffer once the
// read is in, while the loader reads the next layer into another buffer
// and the compute runs on a third; a read counts as done (an Acquire sees
// the layer) only once it is packed. So a batch over a streamed layer runs
// the panel kernels, as over a resident one (on a set without a row-major
// batch path through panels, AVX-512 VNNI on a Sapphire Rapids Xeon, 2
// threads, a 128-row pass of a TinyLlama-shaped Q8_0 model at 25% of its
// file took 2.64 s over row-major streamed layers and 0.78 s over packed
// ones, against 0.67 s for a 1-row pass: bench/RESULTS.md), and the layout
// pass costs the compute nothing while the CPU has a core to spare. Only
// reads that start while passes have packRows rows or more are packed (the
// model says each pass's rows: RowsHinter): a decode reads each weight
// once whatever its layout, and the pass would only take CPU from it. The
// panel layout takes the bytes the file's rows took (Q8_0, Q4_0), so the
// ring's buffers keep their size. K-quants stay row-major in the ring:
// their panel layout takes about twice the weight's bytes, which would
// halve what a buffer holds, and their kernels already lay out a row block
// at a time in scratch. The chunk cache holds the file's bytes (raw chunks):
// a chunk is a fixed range of a segment, not a panel, so a load mixes
// cached and read chunks and the packer lays out the whole tensor after
// both are in.
//
// The window. The loader never overwrites a layer that may still be needed
// before it: with the last streamed layer acquired at stream position c,
// the layers c+1 … c+R (R ring buffers, positions wrapping into the next
// pass) are protected, and a prefetch hint is clamped to that window. A
// buffer is reused only when no Pinned of it is held.
//
// Split layers. When two whole layers do not fit beside the pinned set (a
// model of few, wide layers: 5 layers of 20% each cannot stream at 25%),
// the unit of streaming becomes the tensor: each large tensor of a layer
// (more than 1/16 of it) is its own stream position, the small ones (norms,
// a narrow attention) join the pinned set. A block holds all its tensors
// until it ends, so the ring then has at least as many buffers as a layer
// has large tensors (k), each the size of the largest; a (k+1)th buffer
// lets a read overlap the compute of the layer before.
//
// Read ahead. Once a Prefetch hint has been given (prefetch is on), the
// store keeps the window full as the compute moves through it: each
// Acquire of a new stream position, and each release of a buffer's last
// pin, queues reads of the nearest positions of the window not yet
// resident or queued, into buffers no one holds. So with split layers, a
// block that releases a tensor as soon as it is done with it (llama's
// gate and up before down) has the next tensors read while it computes,
// even with only k buffers. Reads are queued nearest first and only into
// free buffers, so the loader never waits on a pinned buffer for them.

// slot is one ring buffer.
type slot struct {
	buf, unmap []byte
	cur        int   // stream position of the layer it holds, -1 none
	pins       int   // Pinned views of it not yet released
	pending    *load // a read queued into it, or nil
	// packed: the packer laid out the tensors of the unit it holds
	// (entry.layout); else they are row-major. Written under mu by the
	// load that fills it, which waits until no Pinned of it is held.
	packed bool
}

// load is one layer read into a slot.
type load struct {
	pos   int // stream position
	slot  *slot
	pack  bool // lay its tensors out in panels after the read
	done  chan struct{}
	err   error
	start time.Time
}

// errStale is a queued read the loader dropped because the compute moved
// past its window before it started; a waiter asks again.
var errStale = errors.New("offload: stale read")

// entry is one tensor of the store.
type entry struct {
	ref   Ref
	layer int // index of the layer that owns it, -1 none
	unit  int // index of the stream unit (s.layers) that holds it, -1 pinned alone
	at    int64
	view  *view // resident (pinned set), or nil
	rows  bool  // read by row (RowReader), never resident
	pin   slotPin
	// layout of the tensor's bytes in a ring buffer the packer filled
	// (slot.packed): the panel layout when it lays the tensor out
	// (Options.Panels and kernels.Repackable; fixed at Plan), else
	// row-major.
	layout kernels.Layout
}

type streamStore struct {
	o       Options
	files   []*diskFile
	index   map[string]Ref
	ents    map[string]*entry
	planned bool
	split   bool // stream units are tensors, not layers

	pinned, pinUnmap []byte
	pinBytes         int64 // the pinned set (layers included)
	layers           []*layerPlan
	stream           []*layerPlan // streamed layers in compute order
	slots            []*slot
	slotBytes        int64
	// cache holds chunks of streamed units in what the budget leaves after
	// the pinned set and the ring (chunks.go), or is nil; chunkSrc is the
	// loader's scratch of one segment's cached chunks.
	cache    *chunkCache
	chunkSrc [][]byte

	mu   sync.Mutex
	cond *sync.Cond
	cur  int // stream position last acquired
	// readAhead: a Prefetch hint was given, so Acquire and Release keep
	// the window's reads queued (fill).
	readAhead bool
	jobs      chan *load
	// packs are reads done whose unit has tensors to lay out in panels,
	// for the packer (one per ring buffer at most, as jobs).
	packs chan *load
	quit  chan struct{}
	wg    sync.WaitGroup

	closed                          atomic.Bool
	acq, hints, loads, late, direct atomic.Int64
	bytesRead, rowBytes             atomic.Int64
	rowMu                           sync.Mutex
	rowBuf                          []byte // aligned span of one row read
	waitNanos                       atomic.Int64
	packed, packNanos               atomic.Int64
	rows                            atomic.Int64 // rows of the pass last hinted (RowsHinter)
	tl                              atomic.Pointer[timeline]
}

func openStream(o Options) (*streamStore, error) {
	s := &streamStore{o: o, index: map[string]Ref{}, ents: map[string]*entry{}, cur: -1}
	s.cond = sync.NewCond(&s.mu)
	if o.Timeline {
		s.tl.Store(&timeline{})
	}
	for fi, f := range o.Files {
		d, err := openDisk(f.Path, o.Logger)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, d)
		for _, t := range f.Tensors {
			if t.Offset < 0 || t.Size < 0 || t.Offset+t.Size > d.size {
				s.Close()
				return nil, fmt.Errorf("offload: %s: tensor %q at offset %d size %d runs past the end of the file (%d bytes)",
					f.Path, t.Name, t.Offset, t.Size, d.size)
			}
			if _, dup := s.index[t.Name]; dup {
				s.Close()
				return nil, fmt.Errorf("offload: %s: tensor %q appears twice", f.Path, t.Name)
			}
			r := Ref{Name: t.Name, DType: t.DType, Shape: t.Shape, File: fi, Offset: t.Offset, Size: t.Size}
			s.index[t.Name] = r
			e := &entry{ref: r, layer: -1, unit: -1}
			e.pin.s = s
			s.ents[t.Name] = e
		}
	}
	return s, nil
}

func (s *streamStore) Lookup(name string) (Ref, bool) {
	r, ok := s.index[name]
	return r, ok
}

// alignedBuf is n bytes (rounded up to the alignment) of page-aligned
// anonymous memory, and the mapping to unmap.
func alignedBuf(n int64) (data, unmap []byte) {
	n = max(alignUp(n), align)
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		w := make([]uint64, (n+2*align)/8)
		raw := unsafeBytes(w)
		off := alignUp(addr(raw)) - addr(raw)
		return raw[off : off+n], nil
	}
	return b, b
}

// dist is how many stream positions b is after a, wrapping into the next pass.
func (s *streamStore) dist(a, b int) int {
	n := len(s.stream)
	return ((b-a)%n + n) % n
}

// protected reports whether position p is in the window after cur.
func (s *streamStore) protected(p int) bool {
	if s.cur < 0 {
		return p < len(s.slots)
	}
	d := s.dist(s.cur, p)
	return d >= 1 && d <= len(s.slots)
}

// find returns the slot holding position p and the queued read of p; mu held.
func (s *streamStore) find(p int) (*slot, *load) {
	var ld *load
	for _, sl := range s.slots {
		if sl.cur == p {
			return sl, nil
		}
		if sl.pending != nil && sl.pending.pos == p {
			ld = sl.pending
		}
	}
	return nil, ld
}

// schedule queues a read of p into a buffer that holds no protected layer
// and has no read queued (an empty one first, then one not pinned, so the
// read starts at once) and returns it, or nil when none is free; mu held.
// A demand read of the current layer may take the buffer of the furthest
// protected layer when nothing else is left.
func (s *streamStore) schedule(p int) *load { return s.scheduleIn(p, false) }

// scheduleIn is schedule; free: only into a buffer no Pinned holds.
func (s *streamStore) scheduleIn(p int, free bool) *load {
	score := func(sl *slot) int {
		switch {
		case sl.cur < 0:
			return 0
		case sl.pins == 0:
			return 1
		}
		return 2
	}
	var best *slot
	for _, sl := range s.slots {
		if sl.pending != nil || sl.cur >= 0 && s.protected(sl.cur) || free && sl.pins > 0 {
			continue
		}
		if best == nil || score(sl) < score(best) {
			best = sl
		}
	}
	if best == nil && p == s.cur && !free {
		for _, sl := range s.slots {
			if sl.pending == nil && sl.pins == 0 && (best == nil || s.dist(s.cur, sl.cur) > s.dist(s.cur, best.cur)) {
				best = sl
			}
		}
	}
	if best == nil {
		return nil
	}
	ld := &load{pos: p, slot: best, done: make(chan struct{})}
	best.pending = ld
	s.jobs <- ld // never blocks: one queued read per buffer, and the channel holds one per buffer
	return ld
}

// fill queues reads of the window's positions, nearest first, that are
// neither resident nor queued, into free buffers, until one finds none; a
// no-op until a Prefetch hint turns read-ahead on; mu held.
func (s *streamStore) fill() {
	if !s.readAhead || s.cur < 0 || s.closed.Load() {
		return
	}
	for i := 1; i <= len(s.slots); i++ {
		p := (s.cur + i) % len(s.stream)
		if sl, ld := s.find(p); sl != nil || ld != nil {
			continue
		}
		if s.scheduleIn(p, true) == nil {
			return
		}
	}
}

func (s *streamStore) loader() {
	defer s.wg.Done()
	for {
		var ld *load
		select {
		case ld = <-s.jobs:
		case <-s.quit:
			return
		}
		s.mu.Lock()
		for ld.slot.pins > 0 && !s.closed.Load() {
			s.cond.Wait()
		}
		if s.closed.Load() || !(ld.pos == s.cur || s.protected(ld.pos)) {
			ld.err = errStale
			if s.closed.Load() {
				ld.err = ErrClosed
			}
			ld.slot.pending = nil
			close(ld.done)
			s.cond.Broadcast()
			s.mu.Unlock()
			continue
		}
		ld.slot.cur = -1
		ld.pack = s.stream[ld.pos].pack && s.rows.Load() >= packRows
		s.mu.Unlock()

		lp := s.stream[ld.pos]
		if s.o.poison {
			for i := range ld.slot.buf {
				ld.slot.buf[i] = 0xff
			}
		}
		t0 := time.Now()
		var err error
		for i := range lp.segs {
			n, ferr := s.fillSegment(&lp.segs[i], ld.slot.buf)
			s.bytesRead.Add(n)
			if err = ferr; err != nil {
				break
			}
		}
		s.tl.Load().read(s.layerIndex(lp), t0, time.Now(), false)
		s.loads.Add(1)
		if err == nil && ld.pack {
			// The packer lays it out while this goroutine reads the next
			// one: packing here, between reads, measured 110m Q8_0 decode
			// at a 100 MB budget, 1 thread, at half the row-major rate
			// (20.9 tok/s against 40.4, the same Xeon, loaded), the pass
			// serialised with the reads.
			s.packs <- ld // never blocks: one load per buffer in flight
			continue
		}
		s.finish(ld, err)
	}
}

// finish ends load ld: its buffer holds its position unless err; waiters
// wake.
func (s *streamStore) finish(ld *load, err error) {
	s.mu.Lock()
	ld.slot.pending = nil
	if err == nil {
		ld.slot.cur, ld.slot.packed = ld.pos, ld.pack
	}
	ld.err = err
	close(ld.done)
	s.cond.Broadcast()
	s.mu.Unlock()
}

// packRows is the fewest rows of a pass for which reads are packed: from
// two inputs on, a panel tile reads each weight block once for all of
// them, where the row-major kernels of the VNNI set re-read it per input.
const packRows = 2

// PassRows implements RowsHinter: reads that start from now on are
// packed when n ≥ packRows.
func (s *streamStore) PassRows(n int) { s.rows.Store(int64(n)) }

// packer lays out in panels the tensors of each read the loader hands it
// (layerPlan.pack), in the ring buffer the read filled, and ends the load.
// No one reads the buffer meanwhile: the load is still pending, so no
// Acquire pins it.
func (s *streamStore) packer() {
	defer s.wg.Done()
	for {
		var ld *load
		select {
		case ld = <-s.packs:
		case <-s.quit:
			return
		}
		lp := s.stream[ld.pos]
		t0 := time.Now()
		var err error
		for _, e := range lp.tensors {
			if e.layout == kernels.RowMajor {
				continue
			}
			b := ld.slot.buf[e.at : e.at+e.ref.Size : e.at+e.ref.Size]
			var l kernels.Layout
			if l, err = repack(true, e.ref.info(), b); err == nil && l != e.layout {
				err = fmt.Errorf("offload: tensor %q: laid out as %v, planned as %v", e.ref.Name, l, e.layout)
			}
			if err != nil {
				break
			}
			s.packed.Add(1)
		}
		t1 := time.Now()
		s.packNanos.Add(int64(t1.Sub(t0)))
		s.tl.Load().read(s.layerIndex(lp), t0, t1, true)
		s.finish(ld, err)
	}
}

func (s *streamStore) layerIndex(lp *layerPlan) int {
	if len(lp.tensors) == 0 {
		return -1
	}
	return lp.tensors[0].layer
}

// slotPin is a Pinned view into a ring buffer. Each tensor has one, so
// Acquire does not allocate; a second Acquire of a tensor still held gets
// its own.
type slotPin struct {
	s    *streamStore
	sl   *slot
	b    []byte
	held bool
	e    *entry
}

func (p *slotPin) Bytes() []byte { return p.b }

// Layout is the layout the loader left the tensor in (Laid).
func (p *slotPin) Layout() kernels.Layout {
	if p.e == nil || !p.sl.packed {
		return kernels.RowMajor
	}
	return p.e.layout
}

func (p *slotPin) Release() {
	s := p.s
	s.mu.Lock()
	if !p.held {
		s.mu.Unlock()
		return
	}
	p.held = false
	p.sl.pins--
	if p.sl.pins == 0 {
		s.cond.Broadcast()
		s.fill()
	}
	if p.e != nil {
		s.tl.Load().released(p.e.layer)
	}
	s.mu.Unlock()
}

// heapPin is a tensor read on its own for one Acquire (before Plan, or a
// range no tensor names); Release drops it.
type heapPin struct{ b []byte }

func (p *heapPin) Bytes() []byte { return p.b }
func (p *heapPin) Release()      { p.b = nil }

func (s *streamStore) Acquire(ctx context.Context, r Ref) (Pinned, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if r.File < 0 || r.File >= len(s.files) {
		return nil, fmt.Errorf("offload: tensor %q names file %d of %d", r.Name, r.File, len(s.files))
	}
	s.acq.Add(1)
	e := s.ents[r.Name]
	if e == nil || e.ref.Offset != r.Offset || e.ref.Size != r.Size || e.ref.File != r.File || !s.planned || e.rows {
		// Not planned, a range no tensor names, or a tensor read by rows
		// (RowReader) acquired whole: read it for this Acquire alone.
		return s.readDirect(r)
	}
	if e.view != nil {
		s.tl.Load().acquired(e.layer)
		return e.view, nil
	}
	lp := s.layers[e.unit]
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.cur = lp.pos
	s.tl.Load().acquired(e.layer)
	waited := false
	var t0 time.Time
	for {
		sl, ld := s.find(lp.pos)
		if sl != nil {
			sl.pins++
			p := &e.pin
			if p.held {
				p = &slotPin{s: s}
			}
			p.sl, p.held, p.e = sl, true, e
			p.b = sl.buf[e.at : e.at+e.ref.Size : e.at+e.ref.Size]
			s.fill()
			s.mu.Unlock()
			if waited {
				t1 := time.Now()
				s.waitNanos.Add(int64(t1.Sub(t0)))
				s.tl.Load().resumed(t1)
			}
			return p, nil
		}
		if !waited {
			waited, t0 = true, time.Now()
			s.late.Add(1)
			s.tl.Load().waiting(t0)
		}
		if ld == nil {
			ld = s.schedule(lp.pos)
		}
		if ld == nil { // every buffer is busy: wait for a release or a read
			s.cond.Wait()
			continue
		}
		s.mu.Unlock()
		select {
		case <-ld.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if ld.err != nil && ld.err != errStale {
			return nil, ld.err
		}
		s.mu.Lock()
	}
}

// ReadsRows implements RowReader.
func (s *streamStore) ReadsRows(r Ref) bool {
	e := s.ents[r.Name]
	return e != nil && e.rows && e.ref.Offset == r.Offset && e.ref.File == r.File
}

// ReadRow implements RowReader: one aligned pread of the pages around the row.
func (s *streamStore) ReadRow(ctx context.Context, r Ref, i int, dst []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	rb := r.Size / int64(max(r.Rows(), 1))
	if i < 0 || i >= r.Rows() || int64(len(dst)) != rb {
		return fmt.Errorf("offload: row %d of tensor %q (%d rows of %d bytes) into %d bytes", i, r.Name, r.Rows(), rb, len(dst))
	}
	e := &entry{ref: Ref{Name: r.Name, File: r.File, Offset: r.Offset + int64(i)*rb, Size: rb}}
	segs, n := layout([]*entry{e}, 0)
	s.rowMu.Lock()
	defer s.rowMu.Unlock()
	if int64(len(s.rowBuf)) < n {
		s.rowBuf, _ = alignedHeap(n)
	}
	if err := s.readSegment(&segs[0], s.rowBuf); err != nil {
		return err
	}
	s.rowBytes.Add(rb)
	copy(dst, s.rowBuf[e.at:e.at+rb])
	return nil
}

// readDirect reads r into its own buffer.
func (s *streamStore) readDirect(r Ref) (Pinned, error) {
	d := s.files[r.File]
	if r.Offset < 0 || r.Size < 0 || r.Offset+r.Size > d.size {
		return nil, fmt.Errorf("offload: tensor %q [%d,+%d) outside %s", r.Name, r.Offset, r.Size, d.path)
	}
	s.direct.Add(1)
	e := &entry{ref: r}
	segs, n := layout([]*entry{e}, 0)
	buf, _ := alignedHeap(n)
	if err := s.readSegment(&segs[0], buf); err != nil {
		return nil, err
	}
	return &heapPin{buf[e.at : e.at+r.Size : e.at+r.Size]}, nil
}

// alignedHeap is n bytes of page-aligned Go memory (collected when dropped).
func alignedHeap(n int64) ([]byte, []byte) {
	n = max(alignUp(n), align)
	raw := unsafeBytes(make([]uint64, (n+align)/8))
	off := alignUp(addr(raw)) - addr(raw)
	return raw[off : off+n], raw
}

// Prefetch loads the layer of the first ref that streams, or the next
// streamed layer after it when it is pinned; the read is clamped to the
// ring's window and loads every layer up to it that is not resident.
func (s *streamStore) Prefetch(refs ...Ref) {
	s.hints.Add(int64(len(refs)))
	if len(s.stream) == 0 || s.closed.Load() {
		return
	}
	target := -1
	for _, r := range refs {
		if e := s.ents[r.Name]; e != nil && e.unit >= 0 {
			for i := range len(s.layers) {
				lp := s.layers[(e.unit+i)%len(s.layers)]
				if lp.pos >= 0 {
					target = lp.pos
					break
				}
			}
			break
		}
	}
	if target < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readAhead = true
	from := s.cur
	if from < 0 {
		from = len(s.stream) - 1
	}
	d := min(s.dist(from, target), len(s.slots))
	if d == 0 {
		d = len(s.slots)
	}
	for i := 1; i <= d; i++ {
		p := (from + i) % len(s.stream)
		if sl, ld := s.find(p); sl != nil || ld != nil {
			continue
		}
		if s.schedule(p) == nil {
			return
		}
	}
}

func (s *streamStore) Stats() Stats {
	cs := s.cache.stats()
	return Stats{
		CacheBytes: cs.bytes, CachedBytes: cs.used, ChunkHits: cs.hits, ChunkMisses: cs.misses,
		BytesFromCache: cs.bytesHit, ChunksRefused: cs.refused, ChunkEvictions: cs.evictions,
		Acquires: s.acq.Load(), BytesRead: s.pinBytes, PrefetchHint: s.hints.Load(),
		BytesStreamed: s.bytesRead.Load(), Loads: s.loads.Load(), LateLoads: s.late.Load(),
		Wait: time.Duration(s.waitNanos.Load()), Pinned: s.pinBytes, RingBuffers: len(s.slots), RingBytes: s.slotBytes * int64(len(s.slots)),
		StreamedLayers: len(s.stream), RowBytes: s.rowBytes.Load(), SplitLayers: s.split,
		Packed: s.packed.Load(), PackTime: time.Duration(s.packNanos.Load()),
	}
}

// Timeline returns the recorded read and compute spans (nil when not
// recording).
func (s *streamStore) Timeline() []Span { return s.tl.Load().spans() }

// StartTimeline starts recording afresh.
func (s *streamStore) StartTimeline() { s.tl.Store(&timeline{}) }

func (s *streamStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.quit != nil {
		close(s.quit)
	}
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	var first error
	for _, f := range s.files {
		first = errors.Join(first, f.close())
	}
	unmap := func(b []byte) {
		if b != nil {
			if err := syscall.Munmap(b); err != nil && first == nil {
				first = fmt.Errorf("offload: munmap: %w", err)
			}
		}
	}
	unmap(s.pinUnmap)
	for _, sl := range s.slots {
		unmap(sl.unmap)
	}
	if s.cache != nil {
		first = cmp.Or(first, s.cache.release())
	}
	return first
}
