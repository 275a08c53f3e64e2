package offload

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/dgraph-io/ristretto/v2"
)

// The chunk cache: what the memory budget leaves after the pinned set and
// the ring holds chunks of streamed layers, so a pass reads those bytes
// from memory instead of the disk.
//
// A chunk is a fixed byte range of one read segment of a stream unit
// (chunkSize: up to 1 MiB, aligned), not a tensor: the room left is less
// than one layer (the planner pins whole layers while they fit), often less
// than one large tensor (1B Q8_0: 5–12 MiB left against 17 MiB FFN
// matrices), so tensor-sized chunks would leave most of it unused, while
// fixed ranges fill it to within one chunk. The loader still reads the
// chunks that are not cached with one pread per run of them, so a small
// chunk does not split the disk's reads.
//
// The loader copies a cached chunk into the ring buffer it fills; the
// blocks read only ring buffers and the pinned set, as without the cache.
// The copy costs a memcpy (tens of GB/s) in place of a read of the same
// bytes from the disk (1–2 GB/s here), and keeps one way for a block to
// see its weights: a tensor spans several chunks whose frames need not be
// adjacent, so handing the block the cached bytes in place would take
// tensor-sized chunks, which the room left rarely holds.
//
// Ownership is kvcache's (budget.go): ristretto (cost in bytes: each chunk
// costs its frame's bytes, the memory it holds) decides admission and
// eviction, but never owns a frame. Its callbacks only queue (chunk,
// generation) pairs; the cache, under its own lock, frees a queued chunk
// only if it is still cached with that generation, and a chunk being
// copied (pinned) is freed only when the copy releases it. The frames are
// one arena of the bytes the budget left, so the cache can never hold more.
//
// Sticky admission. A pass reads every streamed chunk once, in the same
// order, so every chunk is equally hot. Offered every missed chunk,
// ristretto's TinyLFU admits a newcomer whose frequency equals the
// victim's and evicts a sampled victim: over a cyclic scan of N chunks with
// room for C it churns, and a chunk is often evicted before its next use
// (BenchmarkRistrettoCyclicScan: at C/N = 0.3, about 0.2 of the lookups
// hit; an LRU would hit none, llama.cpp issue #711). Any fixed set of C chunks hits
// C/N of a pass, the best a cache can do on a cyclic scan, so a chunk is
// offered only while a frame is free: once full, the cache keeps what it
// holds, and ristretto, never over its cost, evicts nothing. (Pinning
// fewer whole layers to give the cache their bytes does not pay either:
// the disk reads are the same and the copies cost time; see
// BenchmarkPinOrCache. So the planner pins whole layers first and the
// cache gets only what is left, less than a layer.)

// chunkSize is the byte size of one chunk for stream units of up to
// unit bytes: a sixteenth of one, aligned, from 4 KiB to 1 MiB.
func chunkSize(unit int64) int64 {
	return min(max(alignUp(unit/16), align), 1<<20)
}

// chunkCache holds copies of chunks of streamed units in a fixed arena.
type chunkCache struct {
	size   int64 // bytes per frame (one chunk)
	frames int
	arena  []byte
	unmap  []byte

	mu     sync.Mutex
	free   []int32  // frames not holding a chunk
	frame  []int32  // chunk id → frame, -1 not cached
	gen    []uint32 // chunk id → generation of its last admission
	pins   []int32  // copies in progress
	doomed []bool   // evicted while pinned: freed at the last unpin

	rc      *ristretto.Cache[uint64, uint32]
	vmu     sync.Mutex
	victims []victim
	drained []victim

	hits, misses, refused, evictions int64
	bytesHit                         int64

	// Tests: churn offers every missed chunk to ristretto even when the
	// cache is full (its plain TinyLFU admission, not sticky); poison fills
	// a frame with 0xff when its chunk is dropped.
	churn, poison bool
}

type victim struct {
	key uint64
	gen uint32
}

// newChunkCache makes a cache of frames chunks of size bytes over chunks
// chunk ids.
func newChunkCache(frames int, size int64, chunks int) (*chunkCache, error) {
	arena, unmap := alignedBuf(int64(frames) * size)
	c := &chunkCache{
		size: size, frames: frames, arena: arena, unmap: unmap,
		frame: make([]int32, chunks), gen: make([]uint32, chunks), pins: make([]int32, chunks), doomed: make([]bool, chunks),
	}
	for i := range c.frame {
		c.frame[i] = -1
	}
	for f := frames - 1; f >= 0; f-- {
		c.free = append(c.free, int32(f))
	}
	queue := func(it *ristretto.Item[uint32]) {
		c.vmu.Lock()
		c.victims = append(c.victims, victim{it.Key, it.Value})
		c.vmu.Unlock()
	}
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, uint32]{
		NumCounters: 10 * int64(max(chunks, 1)), MaxCost: int64(frames) * size, BufferItems: 64,
		IgnoreInternalCost: true, OnEvict: queue, OnReject: queue,
	})
	if err != nil {
		c.release()
		return nil, fmt.Errorf("offload: chunk cache: %w", err)
	}
	c.rc = rc
	return c, nil
}

// chunkKey is chunk id's ristretto key (never 0).
func chunkKey(id int) uint64 { return uint64(id) + 1 }

// bytes is frame f's memory.
func (c *chunkCache) bytes(f int32) []byte {
	at := int64(f) * c.size
	return c.arena[at : at+c.size : at+c.size]
}

// get pins chunk id and returns its bytes when it is cached (n bytes of
// it are wanted: the hit counts them), else nil. The caller unpins.
func (c *chunkCache) get(id int, n int64) []byte {
	c.rc.Get(chunkKey(id)) // an access, for ristretto's frequency estimate
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	f := c.frame[id]
	if f < 0 {
		c.misses++
		return nil
	}
	c.hits++
	c.bytesHit += n
	c.pins[id]++
	return c.bytes(f)
}

// unpin ends a copy out of chunk id.
func (c *chunkCache) unpin(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pins[id]--; c.pins[id] == 0 && c.doomed[id] {
		c.doomed[id] = false
		c.drop(id)
	}
}

// offer caches a copy of src (chunk id's bytes, at most size) when a
// frame is free and ristretto admits it.
func (c *chunkCache) offer(id int, src []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	if c.frame[id] >= 0 {
		return
	}
	if len(c.free) == 0 && c.churn {
		// Let ristretto pick a victim (or reject id): apply the set now,
		// and free what it evicted.
		c.gen[id]++
		c.rc.Set(chunkKey(id), c.gen[id], c.size)
		c.rc.Wait()
		c.drain()
		if len(c.free) == 0 {
			c.rc.Del(chunkKey(id)) // rejected, or its victim is still being copied
			c.refused++
			return
		}
		c.take(id, src)
		return
	}
	if len(c.free) == 0 {
		c.refused++ // sticky: the cache keeps the chunks it holds
		return
	}
	c.gen[id]++
	c.take(id, src)
	if !c.rc.Set(chunkKey(id), c.gen[id], c.size) {
		c.drop(id) // ristretto dropped the set (its buffers were full)
	}
}

// take puts src into a free frame as chunk id; c.mu held.
func (c *chunkCache) take(id int, src []byte) {
	n := len(c.free)
	f := c.free[n-1]
	c.free = c.free[:n-1]
	copy(c.bytes(f), src)
	c.frame[id] = f
}

// drop frees chunk id's frame; c.mu held, id cached and not pinned.
func (c *chunkCache) drop(id int) {
	if c.poison {
		b := c.bytes(c.frame[id])
		for i := range b {
			b[i] = 0xff
		}
	}
	c.free = append(c.free, c.frame[id])
	c.frame[id] = -1
	c.gen[id]++ // a queued eviction of it is stale
}

// drain frees the chunks ristretto evicted or rejected that are still
// cached with the generation it saw; c.mu held.
func (c *chunkCache) drain() {
	c.vmu.Lock()
	c.drained, c.victims = c.victims, c.drained[:0]
	c.vmu.Unlock()
	for _, v := range c.drained {
		id := int(v.key) - 1
		if id < 0 || id >= len(c.frame) || c.frame[id] < 0 || c.gen[id] != v.gen {
			continue
		}
		c.evictions++
		if c.pins[id] > 0 {
			c.doomed[id] = true
			continue
		}
		c.drop(id)
	}
}

// cacheStats is a snapshot of the counters.
type cacheStats struct {
	bytes, used                                int64
	hits, misses, refused, evictions, bytesHit int64
}

func (c *chunkCache) stats() cacheStats {
	if c == nil {
		return cacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return cacheStats{
		bytes: int64(c.frames) * c.size, used: int64(c.frames-len(c.free)) * c.size,
		hits: c.hits, misses: c.misses, refused: c.refused, evictions: c.evictions, bytesHit: c.bytesHit,
	}
}

// release closes ristretto and unmaps the arena.
func (c *chunkCache) release() error {
	if c.rc != nil {
		c.rc.Close()
	}
	if c.unmap != nil {
		if err := syscall.Munmap(c.unmap); err != nil {
			return fmt.Errorf("offload: munmap the chunk cache: %w", err)
		}
		c.unmap = nil
	}
	return nil
}
