package kvcache

import (
	"fmt"
)

// The KV budget (Options.Budget) bounds the page memory of the cache. Its
// unit is a frame: one layer of one page, keys then values. A frame with
// data is in one of three places:
//
//   - pinned: resident and in use by a pass (the layer the pass is at) or by
//     a copy inside Begin, Commit or CommitPath. Passes reserve their share
//     at Begin, so a pass never waits for memory once it has begun, and a
//     pinned frame is never evicted;
//   - cached: resident and unpinned. Such frames are offered to a ristretto
//     cache whose cost is their bytes; ristretto decides, by its TinyLFU
//     admission and sampled-LFU eviction, which of them stay. A frame it
//     rejects or evicts is written to the spill file (unless the file already
//     holds an identical copy) and its memory is reused;
//   - spilled: only in the spill file, read back when a pass or a copy next
//     needs it.
//
// Ristretto applies sets and evictions asynchronously and may drop a set;
// it never owns a frame (genCache). Its callbacks only queue (frame,
// generation) pairs, and the cache, under its own lock, spills a queued
// frame only if it is still cached with that generation: a frame pinned
// again, or cached again since, is not touched. A frame is never dropped
// while its page holds data.
//
// The budget's frames are split: PassFrames for pinned frames (what passes
// in flight reserve, plus two frames for the copies), the rest for
// ristretto. Because ristretto's share is fixed, once its pending sets are
// applied (Wait) the cached frames fit in it, so a pass that pins within
// its reservation always finds a frame.

// Frame states.
const (
	frameEmpty   uint8 = iota // no data: a free page, or a new page not yet pinned
	frameSpilled              // only in the spill file
	framePinned               // resident, pinned (pins > 0)
	frameCached               // resident, unpinned, offered to ristretto
)

// copyFrames is what a copy outside a pass (copy-on-write, Commit) pins:
// a source and a destination frame.
const copyFrames = 2

// SpillStats counts what the KV budget did. Frames are one layer of one
// page.
type SpillStats struct {
	Budget         int64 // Options.Budget; 0 = unbounded
	FrameBytes     int64 // bytes of one frame
	Frames         int   // frames the budget holds in memory
	PassFrames     int   // of which passes may pin
	Resident       int   // frames in memory now (pinned or cached)
	Spilled        int   // frames only in the spill file now
	Hits           int64 // pins of a frame found in memory
	Misses         int64 // pins of a frame that had to be read back
	Spills         int64 // frames written to the spill file
	Reloads        int64 // frames read back from it
	BytesWritten   int64
	BytesRead      int64
	CleanEvictions int64 // frames evicted without a write: the file held an identical copy
}

// resident is the budget's bookkeeping. Its fields are guarded by Cache.mu.
type resident struct {
	frames, passCap int
	reserved        int // frames reserved by passes in flight
	frameF          int // floats per frame
	pages           int

	state []uint8
	pins  []int32
	gen   []uint32
	dirty []bool // the resident copy differs from the file's (or the file has none)
	buf   [][]float32

	spare     [][]float32 // free frame buffers
	allocated int         // buffers made so far (≤ frames)
	inMem     int         // frames pinned or cached
	inFile    int         // frames spilled

	sp *spill
	rc *genCache // nil when passes may pin every frame

	hits, misses, clean int64
	err                 error // a failed spill write: that frame stays in memory, later pins fail
}

// newResident sets up the budget for c. c.o is validated.
func newResident(c *Cache, pages int) (*resident, error) {
	o := c.o
	frameF := 2 * c.pageW
	fb := 4 * int64(frameF)
	frames64 := o.Budget / fb
	if frames64 < copyFrames+1 {
		return nil, fmt.Errorf("%w: Budget = %d bytes holds %d frames of %d bytes (one layer of one page: %d tokens × %d values of %d bytes × K and V); want at least %d (%d bytes)",
			ErrOptions, o.Budget, frames64, fb, o.PageTokens, c.rowF, c.elemBytes(), copyFrames+1, (copyFrames+1)*fb)
	}
	total := int64(pages) * int64(o.Layers)
	frames := int(min(frames64, total, 1<<31-1))
	pass := o.PassFrames
	switch {
	case pass == 0:
		pass = max(frames/2, copyFrames+1)
	case pass < copyFrames+1 || pass > frames:
		return nil, fmt.Errorf("%w: PassFrames = %d, want %d..%d (the frames Budget holds)", ErrOptions, pass, copyFrames+1, frames)
	}
	sp, err := openSpill(o.SpillDir, frameF)
	if err != nil {
		return nil, err
	}
	n := int(total)
	r := &resident{
		frames: frames, passCap: pass, frameF: frameF, pages: pages,
		state: make([]uint8, n), pins: make([]int32, n), gen: make([]uint32, n),
		dirty: make([]bool, n), buf: make([][]float32, n), sp: sp,
	}
	if rest := frames - pass; rest > 0 {
		if r.rc, err = newGenCache(frames, int64(rest)*fb); err != nil {
			sp.close()
			return nil, fmt.Errorf("kvcache: frame cache: %w", err)
		}
	}
	return r, nil
}

func (r *resident) close() error {
	if r.rc != nil {
		r.rc.close()
	}
	return r.sp.close()
}

// frameBytes is the size of one frame.
func (r *resident) frameBytes() int64 { return 4 * int64(r.frameF) }

// id is the frame of layer l of page p.
func (r *resident) id(l int, p int32) int { return l*r.pages + int(p) }

// pin makes frame (l, p) resident and pinned, reading it back if it was
// spilled, and points c.k[l][p], c.v[l][p] at it. write says the caller
// will change it. c.mu held.
func (c *Cache) pin(l int, p int32, write bool) error {
	r := c.res
	id := r.id(l, p)
	if r.rc != nil {
		r.rc.touch(id) // an access, for ristretto's frequency estimate
	}
	switch r.state[id] {
	case framePinned:
		r.hits++
	case frameCached:
		r.hits++
		if r.rc != nil {
			r.rc.take(id, r.gen[id])
		}
	case frameSpilled, frameEmpty:
		if r.err != nil {
			return r.err
		}
		buf, err := c.takeFrame()
		if err != nil {
			return err
		}
		if r.state[id] == frameSpilled {
			r.misses++
			if ok, err := r.sp.read(int32(l), p, buf); err != nil || !ok {
				r.spare = append(r.spare, buf)
				if err == nil {
					err = fmt.Errorf("kvcache: layer %d page %d is marked spilled but the spill file %s does not hold it", l, p, r.sp.name)
				}
				return err
			}
			r.inFile--
			r.dirty[id] = false
		} else {
			r.dirty[id] = true // no copy in the file
		}
		r.inMem++
		r.buf[id] = buf
		c.k[l][p] = buf[:c.pageW:c.pageW]
		c.v[l][p] = buf[c.pageW:]
	}
	r.state[id] = framePinned
	r.pins[id]++
	if write {
		r.dirty[id] = true
	}
	return nil
}

// unpin drops one pin of frame (l, p); the last one offers it to ristretto,
// or spills it when there is no ristretto share or the set is dropped.
// c.mu held.
func (c *Cache) unpin(l int, p int32) {
	r := c.res
	id := r.id(l, p)
	if r.pins[id]--; r.pins[id] > 0 {
		return
	}
	r.state[id] = frameCached
	r.gen[id]++
	if r.rc == nil || !r.rc.offer(id, r.gen[id], r.frameBytes()) {
		c.evict(id)
	}
}

// evict moves cached frame id out of memory, writing it first unless the
// spill file holds an identical copy. If the write fails the frame stays in
// memory (nothing is lost) and the error is kept for later pins. c.mu held.
func (c *Cache) evict(id int) {
	r := c.res
	l, p := id/r.pages, int32(id%r.pages)
	if c.isIdle(p) {
		// A cached copy no sequence holds: drop the whole page rather
		// than write it (see prefix.go).
		c.forget(p)
		return
	}
	buf := r.buf[id]
	if r.dirty[id] || !r.sp.has(int32(l), p) {
		if err := r.sp.put(int32(l), p, buf); err != nil {
			if r.err == nil {
				r.err = err
			}
			return
		}
	} else {
		r.clean++
	}
	r.dirty[id] = false
	r.state[id] = frameSpilled
	r.inMem--
	r.inFile++
	r.buf[id] = nil
	c.k[l][p], c.v[l][p] = nil, nil
	r.spare = append(r.spare, buf)
}

// takeFrame returns a free frame buffer, spilling what ristretto evicted to
// make room. c.mu held.
func (c *Cache) takeFrame() ([]float32, error) {
	r := c.res
	for try := 0; ; try++ {
		if n := len(r.spare); n > 0 {
			b := r.spare[n-1]
			r.spare = r.spare[:n-1]
			return b, nil
		}
		if r.allocated < r.frames {
			r.allocated++
			return make([]float32, r.frameF), nil
		}
		switch {
		case try == 0:
		case try == 1 && r.rc != nil:
			// Apply ristretto's pending sets: their evictions are queued
			// by the time it returns.
			r.rc.wait()
		default:
			if r.err != nil {
				return nil, r.err
			}
			return nil, fmt.Errorf("%w: no KV frame free: %d of %d in memory (%d reserved by passes in flight)", ErrFull, r.inMem, r.frames, r.reserved)
		}
		c.drainVictims()
	}
}

// drainVictims spills the frames ristretto rejected or evicted that are
// still cached with the generation it saw. c.mu held.
func (c *Cache) drainVictims() {
	r := c.res
	if r.rc == nil {
		return
	}
	for _, v := range r.rc.drain() {
		if v.id >= 0 && v.id < len(r.state) && r.state[v.id] == frameCached && r.gen[v.id] == v.gen {
			c.evict(v.id)
		}
	}
}

// dropFrames forgets every layer of freed page p. c.mu held.
func (c *Cache) dropFrames(p int32) {
	r := c.res
	for l := range c.o.Layers {
		id := r.id(l, p)
		switch r.state[id] {
		case framePinned:
			panic(fmt.Sprintf("kvcache: page %d freed while layer %d of it is pinned", p, l))
		case frameCached:
			if r.rc != nil {
				r.rc.take(id, r.gen[id])
			}
			r.spare = append(r.spare, r.buf[id])
			r.buf[id] = nil
			c.k[l][p], c.v[l][p] = nil, nil
			r.inMem--
			r.gen[id]++ // a queued eviction of it is stale
		case frameSpilled:
			r.inFile--
		}
		r.sp.drop(int32(l), p)
		r.state[id] = frameEmpty
		r.dirty[id] = false
	}
}

// copyFrame copies layer l of page src into page dst (copy-on-write),
// pinning both for the copy. c.mu held.
func (c *Cache) copyFrame(l int, src, dst int32) error {
	if err := c.pin(l, src, false); err != nil {
		return err
	}
	if err := c.pin(l, dst, true); err != nil {
		c.unpin(l, src)
		return err
	}
	copy(c.k[l][dst], c.k[l][src])
	copy(c.v[l][dst], c.v[l][src])
	c.unpin(l, dst)
	c.unpin(l, src)
	return nil
}

// spillStats fills the budget's counters. c.mu held.
func (c *Cache) spillStats() SpillStats {
	r := c.res
	if r == nil {
		return c.final
	}
	spills, reloads := r.sp.counts()
	fb := r.frameBytes()
	return SpillStats{
		Budget: c.o.Budget, FrameBytes: fb, Frames: r.frames, PassFrames: r.passCap,
		Resident: r.inMem, Spilled: r.inFile, Hits: r.hits, Misses: r.misses,
		Spills: spills, Reloads: reloads, BytesWritten: spills * fb, BytesRead: reloads * fb,
		CleanEvictions: r.clean,
	}
}
