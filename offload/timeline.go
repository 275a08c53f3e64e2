package offload

import (
	"sync"
	"time"
)

// Span is one bar of the timeline: a layer's weights read by the ssd tier,
// or the layer's compute, seen by the store as the time from the first
// Acquire of one of its tensors to the first Acquire of anything else,
// less the time an Acquire waited for a read (a compute span ends where
// the wait starts and a new one starts where it ends).
type Span struct {
	Pass  int // forward pass, from 0 (a read belongs to the pass that issued it)
	Layer int // -1: not a layer (embedding, head)
	Read  bool
	// Pack: a read span that is the layout pass after the read (the ring
	// holds panels: ring.go's packer), not the disk read.
	Pack  bool
	Start time.Time
	End   time.Time
}

// Timeliner is a Store that records a timeline (the ssd tier): from Open
// with Options.Timeline, or from StartTimeline.
type Timeliner interface {
	StartTimeline()
	Timeline() []Span
}

// timeline records spans; a nil *timeline records nothing, so the store
// pays one nil check per Acquire when it is off.
type timeline struct {
	mu    sync.Mutex
	out   []Span
	open  *Span // compute span in progress
	pass  int
	last  int // layer of the last Acquire
	lastL int // last layer ≥ 0 acquired
	begun bool
}

// maxSpans bounds the recording (a long run keeps its start).
const maxSpans = 1 << 16

func (t *timeline) acquired(layer int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.begun && t.last == layer {
		return
	}
	now := time.Now()
	if t.open != nil {
		t.open.End = now
		t.add(*t.open)
		t.open = nil
	}
	if layer >= 0 && t.begun && layer <= t.lastL {
		t.pass++
	}
	t.begun = true
	t.last = layer
	if layer >= 0 {
		t.lastL = layer
		t.open = &Span{Pass: t.pass, Layer: layer, Start: now}
	}
}

func (t *timeline) released(int) {}

// waiting ends the compute span in progress at t0: Acquire waits for a read.
func (t *timeline) waiting(t0 time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open != nil {
		t.open.End = t0
		t.add(*t.open)
		t.open = nil
	}
}

// resumed starts a compute span of the layer last acquired at t1, when
// the read Acquire waited for is in.
func (t *timeline) resumed(t1 time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil && t.begun && t.last >= 0 {
		t.open = &Span{Pass: t.pass, Layer: t.last, Start: t1}
	}
}

func (t *timeline) read(layer int, start, end time.Time, pack bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.add(Span{Pass: t.pass, Layer: layer, Read: true, Pack: pack, Start: start, End: end})
	t.mu.Unlock()
}

func (t *timeline) add(s Span) {
	if len(t.out) < maxSpans {
		t.out = append(t.out, s)
	}
}

func (t *timeline) spans() []Span {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Span(nil), t.out...)
}
