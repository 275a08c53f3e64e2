package offload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

func writeFile(t testing.TB, data []byte) string {
	p := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Both tiers serve the same bytes; tensors out of range are refused at Open.
func TestTiers(t *testing.T) {
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := writeFile(t, data)
	infos := []tensor.Info{
		{Name: "a", DType: tensor.F32, Shape: []int{2, 4}, Offset: 32, Size: 32},
		{Name: "b", DType: tensor.Q8_0, Shape: []int{1, 32}, Offset: 1000, Size: 34},
	}
	for _, tier := range []Tier{Mmap, RAM, Auto} {
		t.Run(tier.String(), func(t *testing.T) {
			var progress int64
			s, err := Open(context.Background(), Options{Files: []File{{Path: path, Tensors: infos}}, Tier: tier,
				Progress: func(done, total int64) { progress = done }})
			if err != nil {
				t.Fatal(err)
			}
			if progress != int64(len(data)) {
				t.Errorf("progress ended at %d, want %d", progress, len(data))
			}
			for _, in := range infos {
				r, ok := s.Lookup(in.Name)
				if !ok || r.Rows()*r.Cols() != int(in.Elements()) {
					t.Fatalf("lookup %s: %+v %v", in.Name, r, ok)
				}
				p, err := s.Acquire(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p.Bytes(), data[in.Offset:in.Offset+in.Size]) {
					t.Errorf("%s: wrong bytes", in.Name)
				}
				p.Release()
				p.Release() // idempotent
			}
			if _, ok := s.Lookup("nope"); ok {
				t.Error("found a tensor that is not there")
			}
			s.Prefetch(infos2refs(s, "a")...)
			st := s.Stats()
			if st.Acquires != 2 || st.PrefetchHint != 1 {
				t.Errorf("stats %+v", st)
			}
			// Auto reads a file this small into RAM.
			if read := tier != Mmap; read && (st.BytesRead != int64(len(data)) || st.BytesMapped != 0) ||
				!read && (st.BytesMapped != int64(len(data)) || st.BytesRead != 0) {
				t.Errorf("tier %s: stats %+v, want the %d bytes %s", tier, st, len(data), map[bool]string{true: "read", false: "mapped"}[read])
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			r, _ := s.Lookup("a")
			if _, err := s.Acquire(context.Background(), r); !errors.Is(err, ErrClosed) {
				t.Errorf("acquire after close: %v", err)
			}
		})
	}
}

func infos2refs(s Store, names ...string) []Ref {
	var r []Ref
	for _, n := range names {
		x, _ := s.Lookup(n)
		r = append(r, x)
	}
	return r
}

func TestOpenErrors(t *testing.T) {
	path := writeFile(t, make([]byte, 100))
	for _, tc := range []struct {
		name  string
		files []File
		want  string
	}{
		{"past end", []File{{Path: path, Tensors: []tensor.Info{{Name: "x", Offset: 90, Size: 20}}}}, `tensor "x" at offset 90 size 20 runs past the end`},
		{"duplicate", []File{{Path: path, Tensors: []tensor.Info{{Name: "x", Size: 4}, {Name: "x", Size: 4}}}}, `"x" appears twice`},
		{"missing", []File{{Path: path + ".nope"}}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), Options{Files: tc.files})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseTier("disk"); err == nil {
		t.Error("ParseTier accepted disk")
	}
	for s, want := range map[string]Tier{"": Auto, "auto": Auto, "ram": RAM, "mmap": Mmap, "ssd": SSD} {
		if got, err := ParseTier(s); err != nil || got != want {
			t.Errorf("ParseTier(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if avail, ok := memAvailable(); ok {
		if Auto.resolve(avail) != Mmap || Auto.resolve(1<<20) != RAM || RAM.resolve(avail*4) != RAM {
			t.Errorf("Auto with %d bytes available: resolve(avail) = %v, resolve(1 MiB) = %v", avail, Auto.resolve(avail), Auto.resolve(1<<20))
		}
	}
}

func TestAcquireDoesNotAllocate(t *testing.T) {
	path := writeFile(t, make([]byte, 128))
	s, err := Open(context.Background(), Options{Files: []File{{Path: path, Tensors: []tensor.Info{{Name: "a", Size: 64}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, _ := s.Lookup("a")
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		p, _ := s.Acquire(ctx, r)
		p.Release()
	}); n != 0 {
		t.Errorf("Acquire allocates %v times", n)
	}
}

// Options.Panels repacks a Q8_0 matrix in the RAM tier (and reports it),
// never in the mmap tier, and leaves what cannot be repacked alone; the
// file's rows come back from the panel bytes.
func TestPanels(t *testing.T) {
	const rows, cols = 20, 64
	rb := cols / 32 * tensor.Q8_0BlockLen
	data := make([]byte, 64+rows*rb)
	for i := range data {
		data[i] = byte(i*13 + i/7)
	}
	for o := 64; o < len(data); o += tensor.Q8_0BlockLen {
		data[o], data[o+1] = 0x00, 0x30 // finite scales
	}
	path := writeFile(t, data)
	infos := []tensor.Info{
		{Name: "m", DType: tensor.Q8_0, Shape: []int{rows, cols}, Offset: 64, Size: int64(rows * rb)},
		{Name: "v", DType: tensor.F32, Shape: []int{4}, Offset: 0, Size: 16},
	}
	for _, c := range []struct {
		tier Tier
		want kernels.Layout
	}{{RAM, kernels.PanelQ8_0}, {Mmap, kernels.RowMajor}} {
		s, err := Open(context.Background(), Options{Files: []File{{Path: path, Tensors: infos}}, Tier: c.tier, Panels: true})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := s.Lookup("m")
		p, err := s.Acquire(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := LayoutOf(p); got != c.want {
			t.Fatalf("%v: layout %v, want %v", c.tier, got, c.want)
		}
		w := kernels.Weight{DType: r.DType, Data: p.Bytes(), Rows: rows, Cols: cols, Layout: LayoutOf(p)}
		if c.want == kernels.PanelQ8_0 && bytes.Equal(p.Bytes(), data[64:]) {
			t.Fatalf("%v: bytes unchanged by the repack", c.tier)
		}
		buf := make([]byte, rb)
		for i := range rows {
			if !bytes.Equal(kernels.RowBytes(buf, w, i), data[64+i*rb:64+(i+1)*rb]) {
				t.Fatalf("%v: row %d differs from the file's", c.tier, i)
			}
		}
		rv, _ := s.Lookup("v")
		pv, _ := s.Acquire(context.Background(), rv)
		if LayoutOf(pv) != kernels.RowMajor || !bytes.Equal(pv.Bytes(), data[:16]) {
			t.Fatalf("%v: a vector was repacked", c.tier)
		}
		s.Close()
	}
}
