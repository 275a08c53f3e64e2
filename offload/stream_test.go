package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/tensor"
)

// layered writes a file of nLayers layers of three tensors (sizes chosen so
// tensors straddle page boundaries) plus an embedding, a norm and a head,
// and returns its path, the infos and the layout.
func layered(t *testing.T, nLayers int) (string, []tensor.Info, Usage) {
	t.Helper()
	return layeredSizes(t, nLayers, 4100, 96, 9000)
}

func layeredSizes(t testing.TB, nLayers int, sizes ...int64) (string, []tensor.Info, Usage) {
	t.Helper()
	var infos []tensor.Info
	off := int64(0)
	add := func(name string, size int64) tensor.Info {
		in := tensor.Info{Name: name, DType: tensor.F32, Shape: []int{int(size / 4)}, Offset: off, Size: size}
		off += (size + 31) &^ 31
		infos = append(infos, in)
		return in
	}
	emb := add("token_embd.weight", 16*40)
	infos[len(infos)-1].Shape = []int{16, 10} // 16 rows of 40 bytes
	emb = infos[len(infos)-1]
	var lay Usage
	for l := range nLayers {
		var refs []Ref
		for j, size := range sizes {
			in := add(fmt.Sprintf("blk.%d.w%d", l, j), size)
			refs = append(refs, Ref{Name: in.Name, DType: in.DType, Shape: in.Shape, Offset: in.Offset, Size: in.Size})
		}
		lay.Layers = append(lay.Layers, refs)
	}
	add("output_norm.weight", 64)
	add("output.weight", 3000)
	lay.Rows = []Ref{{Name: emb.Name, DType: emb.DType, Shape: emb.Shape, Offset: emb.Offset, Size: emb.Size}}
	data := make([]byte, off)
	for i := range data {
		data[i] = byte(i*31 + i>>8)
	}
	return writeFile(t, data), infos, lay
}

func openSSD(t testing.TB, path string, infos []tensor.Info, lay Usage, o Options) (*streamStore, error) {
	t.Helper()
	o.Files, o.Tier = []File{{Path: path, Tensors: infos}}, SSD
	s, err := Open(context.Background(), o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	if err := s.(Planner).Plan(context.Background(), lay); err != nil {
		return nil, err
	}
	return s.(*streamStore), nil
}

// pass acquires every layer in order as a block does (all its tensors,
// then releases them), hinting ahead layers in advance, and checks bytes.
func pass(t testing.TB, s Store, data []byte, lay Usage, ahead int) {
	t.Helper()
	ctx := context.Background()
	for l, refs := range lay.Layers {
		if ahead > 0 {
			s.Prefetch(lay.Layers[(l+ahead)%len(lay.Layers)]...)
		}
		var pins []Pinned
		for _, r := range refs {
			p, err := s.Acquire(ctx, r)
			if err != nil {
				t.Fatalf("layer %d %s: %v", l, r.Name, err)
			}
			pins = append(pins, p)
		}
		for i, r := range refs {
			if !bytes.Equal(pins[i].Bytes(), data[r.Offset:r.Offset+r.Size]) {
				t.Fatalf("layer %d %s: wrong bytes", l, r.Name)
			}
		}
		for _, p := range pins {
			p.Release()
		}
	}
}

func TestSSDStreams(t *testing.T) {
	path, infos, lay := layered(t, 6)
	data, _ := os.ReadFile(path)
	probe, err := openSSD(t, path, infos, lay, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := probe.Stats()
	layer := st.RingBytes / 2
	if st.RingBuffers != 2 || layer < 4100+96+9000 || layer%align != 0 || st.StreamedLayers != 6 {
		t.Fatalf("no budget: %+v, want every layer streamed through 2 buffers of %d", st, layer)
	}
	minimum := st.Pinned + st.RingBytes
	for _, tc := range []struct {
		budget        int64
		pinned, ring  int
		ahead, poison int
	}{
		{minimum, 0, 2, 1, 1},
		{minimum, 0, 2, 0, 0},
		{minimum, 0, 2, 3, 1}, // clamped to the ring
		{minimum + layer, 1, 2, 1, 1},
		{minimum + 2*layer, 2, 2, 2, 1},
		{minimum + 3*layer - 1, 2, 2, 1, 0},
		{1 << 30, 6, 0, 1, 0},
	} {
		t.Run(fmt.Sprintf("budget=%d/ahead=%d", tc.budget, tc.ahead), func(t *testing.T) {
			s, err := openSSD(t, path, infos, lay, Options{Budget: tc.budget, poison: tc.poison == 1})
			if err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.RingBuffers != tc.ring || st.StreamedLayers > 6-tc.pinned || tc.ring == 0 && st.StreamedLayers != 0 {
				t.Fatalf("stats %+v; want ≥ %d pinned layers and %d buffers", st, tc.pinned, tc.ring)
			}
			if st.Resident() > tc.budget {
				t.Errorf("resident %d over the budget %d", st.Resident(), tc.budget)
			}
			const passes = 4
			for range passes {
				pass(t, s, data, lay, tc.ahead)
			}
			// Every pinned tensor, and a row of the embedding by range.
			for _, in := range infos[len(infos)-2:] {
				r, _ := s.Lookup(in.Name)
				p, err := s.Acquire(context.Background(), r)
				if err != nil || !bytes.Equal(p.Bytes(), data[in.Offset:in.Offset+in.Size]) {
					t.Fatalf("%s: %v", in.Name, err)
				}
				p.Release()
			}
			emb := lay.Rows[0]
			if !s.ReadsRows(emb) {
				t.Fatal("the embedding is not read by rows")
			}
			row := make([]byte, 40)
			if err := s.ReadRow(context.Background(), emb, 7, row); err != nil || !bytes.Equal(row, data[emb.Offset+7*40:emb.Offset+8*40]) {
				t.Fatalf("row 7: %v", err)
			}
			s.Close() // the loader is done: the counts are final
			st = s.Stats()
			// Each streamed layer is read at most once a pass: no thrashing
			// (a prefetch into the next pass aside; a layer may also stay in
			// a buffer into the next pass).
			if want := int64(passes * st.StreamedLayers); st.Loads > want+int64(st.RingBuffers) {
				t.Errorf("%d layer reads, want %d", st.Loads, want)
			}
			if tc.ahead == 0 && st.StreamedLayers > 0 && st.LateLoads != st.Loads {
				t.Errorf("without prefetch every read is late: %+v", st)
			}
		})
	}
	if _, err := openSSD(t, path, infos, lay, Options{Budget: minimum - 1}); err == nil ||
		!strings.Contains(err.Error(), "below the minimum of "+FormatBytes(minimum)) {
		t.Errorf("budget below the minimum: %v", err)
	}
}

func TestSSDFaults(t *testing.T) {
	path, infos, lay := layered(t, 4)
	data, _ := os.ReadFile(path)
	var fail atomic.Int64 // file offset whose page fails, -1 none
	fail.Store(-1)
	hook := func(p string, b []byte, off int64) (int, error) {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if x := fail.Load(); x >= off && x < off+int64(len(b)) {
			return 0, syscall.EIO
		}
		return f.ReadAt(b, off)
	}
	s, err := openSSD(t, path, infos, lay, Options{ReadAt: hook})
	if err != nil {
		t.Fatal(err)
	}
	// Passes without read ahead (with it, the loader may read the next
	// pass's first layers at any moment after the last layer's release),
	// and the layer whose read fails one not in the ring.
	notResident := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		for l := range lay.Layers {
			if sl, ld := s.find(s.layers[l].pos); sl == nil && ld == nil {
				return l
			}
		}
		t.Fatal("every layer is in the ring")
		return -1
	}
	pass(t, s, data, lay, 0)
	bad := lay.Layers[notResident()][2]
	fail.Store(bad.Offset + 5000) // a page of w2 alone
	_, err = s.Acquire(context.Background(), bad)
	for _, want := range []string{path, bad.Name, fmt.Sprintf("at offset %d", bad.Offset), "input/output error"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("injected EIO: %v; want it to name %q", err, want)
		}
	}
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("error does not wrap EIO: %v", err)
	}
	fail.Store(-1)
	for range 2 {
		pass(t, s, data, lay, 0) // the store recovers: the next pass reads again
	}

	// A file truncated under the running store: a clear error, no crash.
	cut := notResident()
	if err := os.Truncate(path, lay.Layers[cut][2].Offset+100); err != nil {
		t.Fatal(err)
	}
	var got error
	for l, refs := range lay.Layers {
		for _, r := range refs {
			p, err := s.Acquire(context.Background(), r)
			if err != nil {
				got = err
				break
			}
			p.Release()
		}
		if got != nil {
			if l != cut {
				t.Errorf("failed at layer %d, want %d (the first one not in the ring)", l, cut)
			}
			break
		}
	}
	if got == nil || !strings.Contains(got.Error(), "short read") || !strings.Contains(got.Error(), path) || !strings.Contains(got.Error(), "blk.") {
		t.Fatalf("truncated file: %v", got)
	}
}

// Under a budget too small for two whole layers, the store streams the
// large tensors of each layer one by one (the small ones pinned), and every
// pass still reads the right bytes, at the minimum of k buffers (k large
// tensors a layer) and with one more.
func TestSSDSplitsLayers(t *testing.T) {
	// Three large tensors and a small one a layer, as an FFN-heavy model.
	path, infos, lay := layeredSizes(t, 5, 40000, 96, 40000, 41000)
	data, _ := os.ReadFile(path)
	probe, err := openSSD(t, path, infos, lay, Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole := probe.Stats().Resident()
	// The smallest budget the store takes, a page at a time.
	minimum := whole - 1
	for {
		s, err := openSSD(t, path, infos, lay, Options{Budget: minimum - align})
		if err != nil {
			break
		}
		s.Close()
		minimum -= align
	}
	split, _ := openSSD(t, path, infos, lay, Options{Budget: minimum})
	unit := split.Stats().RingBytes / 3
	for i, ahead := range []int{1, 0, 2, 1} {
		budget := whole - 1
		if i > 0 {
			budget = minimum + int64(i/3)*unit
		}
		t.Run(fmt.Sprintf("budget=%d/ahead=%d", budget, ahead), func(t *testing.T) {
			s, err := openSSD(t, path, infos, lay, Options{Budget: budget, poison: true})
			if err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if !st.SplitLayers || st.Resident() > budget || st.RingBuffers < 3 || st.StreamedLayers < 13 || i > 0 && st.RingBuffers != 3+i/3 || i == 1 && st.StreamedLayers != 15 {
				t.Fatalf("stats %+v under budget %d (whole layers need %d)", st, budget, whole)
			}
			for range 3 {
				pass(t, s, data, lay, ahead)
			}
			s.Close()
			if st := s.Stats(); st.Loads > int64(3*st.StreamedLayers+st.RingBuffers) {
				t.Errorf("%d reads of %d units in 3 passes", st.Loads, st.StreamedLayers)
			}
		})
	}
	if _, err := openSSD(t, path, infos, lay, Options{Budget: minimum - align}); err == nil ||
		!strings.Contains(err.Error(), "tensor by tensor") {
		t.Errorf("budget below the split minimum: %v", err)
	}
}

// With split layers and prefetch on, the stream follows the order the
// layout lists a layer's tensors (the order a block acquires them, not the
// file's), and a block that releases its first two tensors before it
// acquires the third has the next layer's first two read into their
// buffers while it still holds the third: reads overlap its compute with
// only three buffers.
func TestSSDSplitReadsAhead(t *testing.T) {
	path, infos, lay := layeredSizes(t, 5, 40000, 96, 40000, 41000)
	data, _ := os.ReadFile(path)
	for l, refs := range lay.Layers { // acquire order: w3, w1 (small), w0, w2
		lay.Layers[l] = []Ref{refs[3], refs[1], refs[0], refs[2]}
	}
	probe, err := openSSD(t, path, infos, lay, Options{})
	if err != nil {
		t.Fatal(err)
	}
	budget := probe.Stats().Resident() - 1
	var s *streamStore
	for b := budget; ; b -= align {
		next, err := openSSD(t, path, infos, lay, Options{Budget: b, poison: true})
		if err != nil {
			break
		}
		if s != nil {
			s.Close()
		}
		s = next
	}
	if st := s.Stats(); !st.SplitLayers || st.RingBuffers != 3 || st.StreamedLayers != 15 {
		t.Fatalf("the smallest budget: %+v, want 15 tensors streamed through 3 buffers", st)
	}
	large := func(l int) []Ref { return []Ref{lay.Layers[l][0], lay.Layers[l][2], lay.Layers[l][3]} }
	for l := range lay.Layers {
		for j, r := range large(l) {
			if got := s.stream[3*l+j].tensors[0].ref.Name; got != r.Name {
				t.Fatalf("stream position %d holds %s, want %s (the layout's order)", 3*l+j, got, r.Name)
			}
		}
	}
	resident := func(p int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		sl, _ := s.find(p)
		return sl != nil
	}
	ctx := context.Background()
	acquire := func(r Ref) Pinned {
		p, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Bytes(), data[r.Offset:r.Offset+r.Size]) {
			t.Fatalf("%s: wrong bytes", r.Name)
		}
		return p
	}
	n := len(lay.Layers)
	for pass := range 2 {
		for l := range n {
			s.Prefetch(lay.Layers[(l+1)%n]...)
			w := large(l)
			a, b := acquire(w[0]), acquire(w[1])
			a.Release()
			b.Release()
			c := acquire(w[2])
			next := 3 * ((l + 1) % n)
			deadline := time.Now().Add(10 * time.Second)
			for !(resident(next) && resident(next+1)) {
				if time.Now().After(deadline) {
					t.Fatalf("pass %d layer %d: the next layer's first two tensors were not read while its third was held", pass, l)
				}
				time.Sleep(time.Millisecond)
			}
			if !bytes.Equal(c.Bytes(), data[w[2].Offset:w[2].Offset+w[2].Size]) {
				t.Fatalf("%s: overwritten while held", w[2].Name)
			}
			c.Release()
		}
	}
}
