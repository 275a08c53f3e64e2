package offload_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// mapped writes a file of two F32 tensors, a (one page) and b (four
// pages), and opens it under the mmap tier.
func mapped(t *testing.T) (offload.Store, string, offload.Ref) {
	t.Helper()
	const page = 4096
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, make([]byte, 5*page), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := offload.Open(t.Context(), offload.Options{Tier: offload.Mmap, Files: []offload.File{{Path: path, Tensors: []tensor.Info{
		{Name: "a", DType: tensor.F32, Shape: []int{page / 4}, Offset: 0, Size: page},
		{Name: "b", DType: tensor.F32, Shape: []int{page}, Offset: page, Size: 4 * page},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b, _ := s.Lookup("b")
	return s, path, b
}

// A read of mapped weights past a truncation, on the guarded goroutine or
// on a pool helper, is an error naming the file, the tensor and the file
// offset of the fault, not a crash; reads before the cut still work.
func TestGuardTruncatedMapping(t *testing.T) {
	s, path, b := mapped(t)
	p, err := s.Acquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	data := p.Bytes()
	if err := os.Truncate(path, b.Offset+2*4096); err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	var sink atomic.Int64 // the reads must not be dead code; chunks run on two goroutines
	for _, tc := range []struct {
		name string
		read func()
	}{
		{"caller", func() { sink.Add(int64(data[3*4096])) }},
		// Chunk 1 of 2 runs on the helper: only it reads past the cut.
		{"pool helper", func() {
			pool.For(4, func(lo, hi int) {
				var v int64
				for i := lo; i < hi; i++ {
					v += int64(data[i*4096+7])
				}
				sink.Add(v)
			})
		}},
	} {
		err := offload.Guard(s, func() error { tc.read(); return nil })
		var mf *offload.MapFault
		if !errors.As(err, &mf) {
			t.Fatalf("%s: Guard = %v, want a *MapFault", tc.name, err)
		}
		if mf.Path != path || mf.Tensor != "b" || mf.TensorOffset != b.Offset || mf.Offset < b.Offset+2*4096 {
			t.Errorf("%s: fault %+v", tc.name, mf)
		}
		for _, w := range []string{path, `tensor "b"`, "at file offset"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
	}
	if err := offload.Guard(s, func() error { sink.Add(int64(data[0]) + int64(data[4096+5])); return nil }); err != nil {
		t.Errorf("a read before the cut: %v", err)
	}
}

// Guard passes fn's error through, re-raises panics that are not memory
// faults, and costs no allocation.
func TestGuardOther(t *testing.T) {
	s, _, _ := mapped(t)
	want := errors.New("x")
	if err := offload.Guard(s, func() error { return want }); err != want {
		t.Errorf("Guard = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the panic re-raised", v)
			}
		}()
		offload.Guard(s, func() error { panic("boom") })
	}()
	if n := testing.AllocsPerRun(100, func() { offload.Guard(s, func() error { return nil }) }); n != 0 {
		t.Errorf("Guard allocates %v times", n)
	}
}
