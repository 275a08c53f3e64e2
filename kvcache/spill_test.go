package kvcache

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every frame spilled comes back bit for bit, in any order, with
// overwrites in place; the counts of frames written and read back match and none is
// left in the file or lost.
func TestSpillRoundTrip(t *testing.T) {
	const frame, layers, pages = 2 * 16 * 32, 5, 64
	s, err := openSpill(t.TempDir(), frame)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[frameKey][]float32{}
	fill := func() []float32 {
		x := make([]float32, frame)
		for i := range x {
			x[i] = math.Float32frombits(rng.Uint32()) // any bits, NaNs included
		}
		return x
	}
	var wrote, read int64
	got := make([]float32, frame)
	for round := range 4 {
		for l := range int32(layers) {
			for p := range int32(pages) {
				if rng.IntN(3) == 0 && round > 0 {
					continue
				}
				x := fill()
				if err := s.put(l, p, x); err != nil {
					t.Fatal(err)
				}
				want[frameKey{l, p}] = x
				wrote++
			}
		}
		// Read back half of them in random order.
		for k, x := range want {
			if rng.IntN(2) == 0 {
				continue
			}
			ok, err := s.read(k.layer, k.page, got)
			s.drop(k.layer, k.page)
			if err != nil || !ok {
				t.Fatalf("frame %v: %v %v", k, ok, err)
			}
			for i := range x {
				if math.Float32bits(got[i]) != math.Float32bits(x[i]) {
					t.Fatalf("frame %v float %d: %08x, want %08x", k, i, math.Float32bits(got[i]), math.Float32bits(x[i]))
				}
			}
			delete(want, k)
			read++
		}
	}
	for k, x := range want {
		ok, err := s.read(k.layer, k.page, got)
		if err != nil || !ok || math.Float32bits(got[0]) != math.Float32bits(x[0]) {
			t.Fatalf("frame %v lost: %v %v", k, ok, err)
		}
		s.drop(k.layer, k.page)
		read++
	}
	if s.held() != 0 || s.spills != wrote || s.reloads != read {
		t.Errorf("held %d, spills %d (wrote %d), reloads %d (read %d)", s.held(), s.spills, wrote, s.reloads, read)
	}
	if ok, _ := s.read(0, 0, got); ok {
		t.Error("a dropped frame read back")
	}
	if s.end > int64(layers*pages)*s.frameBytes {
		t.Errorf("file grew to %d bytes for at most %d frames", s.end, layers*pages)
	}
}
