package kvcache

import (
	"sync"

	"github.com/dgraph-io/ristretto/v2"
)

// genCache is the ristretto cache behind the KV budget's frames and the
// prefix cache's idle pages. It decides which of them stay in memory; it
// never owns one. The cache offers an item (a frame id or a page) each time
// it becomes evictable, with the item's generation, a counter the cache
// bumps every time; ristretto's rejections and evictions are queued as
// (id, generation) victims, which the cache drains under its own lock and
// acts on only if the item is still evictable with that generation.
//
// The generation is part of the key, as ristretto's conflict hash: the key
// hash is the id alone, so ristretto's frequency estimate and its policy see
// one item across generations, but its store matches a set or a delete only
// to the same generation. That matters because ristretto applies sets and
// deletes later, in order, on its own goroutine, while its store's updates
// are immediate. With the id alone as the key, an item offered (set pending),
// taken back (delete queued) and offered again just after the pending set
// reached the store became an update of the stored item, which the queued
// delete then removed: the item stayed evictable, outside the policy, and no
// victim ever named it. Under a budget those frames added up until no frame
// was free. With the generation as the conflict hash the second offer is a
// new set, applied after the delete.
type genCache struct {
	rc      *ristretto.Cache[uint64, struct{}]
	mu      sync.Mutex // guards victims: ristretto's callbacks append to it
	victims []victim
	drained []victim
}

type victim struct {
	id  int
	gen uint32
}

// genKey packs id and generation into one key: id+1 in the low 32 bits
// (ids are below 2^31), the generation above.
func genKey(id int, gen uint32) uint64 { return uint64(id) + 1 | uint64(gen)<<32 }

// genHash is genKey's ristretto hashes: the key hash is id+1; the conflict
// hash is the generation with bit 32 set, so it is never 0 (ristretto's
// "match any").
func genHash(k uint64) (uint64, uint64) { return k & (1<<32 - 1), k>>32 | 1<<32 }

// newGenCache makes a cache of maxCost for about items items.
func newGenCache(items int, maxCost int64) (*genCache, error) {
	g := &genCache{}
	queue := func(it *ristretto.Item[struct{}]) {
		if it.Conflict == 0 {
			// An eviction of an item the store no longer held: deleted
			// since (its delete is pending), so nothing to act on.
			return
		}
		g.mu.Lock()
		g.victims = append(g.victims, victim{int(it.Key) - 1, uint32(it.Conflict)})
		g.mu.Unlock()
	}
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, struct{}]{
		NumCounters: 10 * int64(items), MaxCost: maxCost, BufferItems: 64,
		IgnoreInternalCost: true, OnEvict: queue, OnReject: queue, KeyToHash: genHash,
	})
	if err != nil {
		return nil, err
	}
	g.rc = rc
	return g, nil
}

// offer sets item id at generation gen with cost; false if ristretto
// dropped the set (its buffer was full): the caller evicts the item itself.
func (g *genCache) offer(id int, gen uint32, cost int64) bool {
	return g.rc.Set(genKey(id, gen), struct{}{}, cost)
}

// take withdraws item id offered at generation gen.
func (g *genCache) take(id int, gen uint32) { g.rc.Del(genKey(id, gen)) }

// touch records an access to item id, for ristretto's frequency estimate.
func (g *genCache) touch(id int) { g.rc.Get(genKey(id, 0)) }

// wait applies ristretto's pending sets and deletes: their rejections and
// evictions are queued when it returns (the callbacks take only g.mu).
func (g *genCache) wait() { g.rc.Wait() }

// drain returns the victims queued since the last drain, valid until the
// next one. Callers serialize their drains (they hold Cache.mu).
func (g *genCache) drain() []victim {
	g.mu.Lock()
	g.drained, g.victims = g.victims, g.drained[:0]
	g.mu.Unlock()
	return g.drained
}

// close stops ristretto. Its Close reports every item it held as evicted;
// those are not its policy's evictions, so they are discarded.
func (g *genCache) close() {
	g.rc.Close()
	g.mu.Lock()
	g.victims = g.victims[:0]
	g.mu.Unlock()
}
