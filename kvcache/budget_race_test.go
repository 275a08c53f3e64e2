package kvcache

import (
	"math/rand/v2"
	"testing"
)

// Frames pinned and unpinned over and over, faster than ristretto applies
// its buffered sets and deletes, never leave more cached frames in memory
// than ristretto's share once its pending operations are applied: every
// cached frame is either in its policy or queued as a victim. (A set that
// lands between a pending set's application and the delete queued after
// it once became an update of a key the delete then removed, leaving a
// frame cached that nothing would evict: "no KV frame free".)
func TestBudgetPinChurn(t *testing.T) {
	const pages, frames, passFrames = 64, 40, 4
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 2 * pages,
		Budget: frames * 4 * 2 * 2 * 2, PassFrames: passFrames, SpillDir: t.TempDir()})
	defer c.Close()
	r := c.res
	if r.frames != frames || r.passCap != passFrames {
		t.Fatalf("budget of %d frames, %d for passes; want %d and %d", r.frames, r.passCap, frames, passFrames)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	n := 200000
	if testing.Short() {
		n = 40000
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		p := int32(rng.IntN(8)) // a few hot pages, pinned again while their sets are pending
		if rng.IntN(4) == 0 {
			p = int32(rng.IntN(pages))
		}
		if err := c.pin(0, p, rng.IntN(2) == 0); err != nil {
			t.Fatalf("pin %d of page %d: %v", i, p, err)
		}
		c.unpin(0, p)
		if i%1000 == 999 {
			r.rc.wait()
			c.drainVictims()
			if r.inMem > frames-passFrames {
				t.Fatalf("after %d pins: %d frames cached in memory, ristretto's share is %d", i+1, r.inMem, frames-passFrames)
			}
		}
	}
}
