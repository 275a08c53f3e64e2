package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/tensor"
)

// pieces returns a write func that writes data in pieces of n bytes (the
// last one shorter), so the Writer sees a func that does not write a tensor
// in one call.
func pieces(data []byte, n int) func(io.Writer) error {
	return func(w io.Writer) error {
		for b := data; len(b) > 0; {
			k := min(n, len(b))
			if _, err := w.Write(b[:k]); err != nil {
				return err
			}
			b = b[k:]
		}
		return nil
	}
}

// TestAddTensorFuncSameBytes: every mix of AddTensor and AddTensorFunc over
// the fixture gives the bytes AddTensor alone gives, and reads back.
func TestAddTensorFuncSameBytes(t *testing.T) {
	for _, extra := range [][]KV{nil, {{AlignmentKey, uint32(64)}}, {{AlignmentKey, uint32(1)}}} {
		want := writeFixture(t, extra...)
		for mask := range 1 << len(fixtureTensors) {
			t.Run(fmt.Sprintf("%v/mask=%03b", extra, mask), func(t *testing.T) {
				w := NewWriter()
				for _, kv := range append(extra, fixtureKVs()...) {
					if err := w.AddKV(kv.Key, kv.Value); err != nil {
						t.Fatal(err)
					}
				}
				datas := make([][]byte, len(fixtureTensors))
				for i, ft := range fixtureTensors {
					datas[i] = tensorBytes(t, ft, byte(i+1))
					var err error
					if mask&(1<<i) != 0 {
						err = w.AddTensorFunc(ft.name, ft.dt, ft.shape, pieces(datas[i], 1+5*i))
					} else {
						err = w.AddTensor(ft.name, ft.dt, ft.shape, datas[i])
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				for range 2 { // a second WriteTo calls the funcs again
					var buf bytes.Buffer
					n, err := w.WriteTo(&buf)
					if err != nil {
						t.Fatal(err)
					}
					got := buf.Bytes()
					if n != int64(len(got)) || !bytes.Equal(got, want) {
						t.Fatalf("WriteTo = %d, wrote %d bytes; want the %d bytes of AddTensor alone (first difference at %d)", n, len(got), len(want), firstDiff(got, want))
					}
					f, err := Read(bytes.NewReader(got), int64(len(got)), "mixed.gguf")
					if err != nil {
						t.Fatal(err)
					}
					for i, ti := range f.Tensors {
						if diff := cmp.Diff(datas[i], got[ti.Offset:ti.Offset+ti.Size]); diff != "" {
							t.Errorf("%s data (-want +got):\n%s", ti.Name, diff)
						}
					}
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

var errGenerate = errors.New("generator failed")

// TestAddTensorFuncErrors: a func that writes the wrong number of bytes or
// fails makes WriteTo fail naming the tensor, and no later func runs.
func TestAddTensorFuncErrors(t *testing.T) {
	const size = 4 * 10 // f32 [2 5]
	full := make([]byte, size)
	tests := []struct {
		name  string
		write func(io.Writer) error
		is    error
		msg   string
	}{
		{"nothing", func(io.Writer) error { return nil }, ErrTensorSize, `tensor "b": gguf: tensor data size mismatch: f32 [2 5] needs 40 bytes, its write func wrote 0`},
		{"short", pieces(full[:size-1], 8), ErrTensorSize, "needs 40 bytes, its write func wrote 39"},
		{"long at once", pieces(make([]byte, size+1), 100), ErrTensorSize, "needs 40 bytes, its write func wrote more"},
		{"long in pieces", pieces(make([]byte, 2*size), 7), ErrTensorSize, "needs 40 bytes, its write func wrote more"},
		{"long, error ignored", func(w io.Writer) error {
			w.Write(full)
			w.Write([]byte{1})
			return nil
		}, ErrTensorSize, "its write func wrote more"},
		{"func error", func(w io.Writer) error {
			w.Write(full[:3])
			return fmt.Errorf("row 1: %w", errGenerate)
		}, errGenerate, `gguf: write: tensor "b": row 1: generator failed`},
		{"func error after all bytes", func(w io.Writer) error {
			w.Write(full)
			return errGenerate
		}, errGenerate, `tensor "b": generator failed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter()
			if err := w.AddTensor("a", tensor.F32, []int{8}, make([]byte, 32)); err != nil {
				t.Fatal(err)
			}
			if err := w.AddTensorFunc("b", tensor.F32, []int{2, 5}, tc.write); err != nil {
				t.Fatal(err)
			}
			later := false
			if err := w.AddTensorFunc("c", tensor.F32, []int{8}, func(w io.Writer) error {
				later = true
				_, err := w.Write(make([]byte, 32))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			_, err := w.WriteTo(io.Discard)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "gguf: write: ") {
				t.Errorf("WriteTo = %v, want %v with ...%s...", err, tc.is, tc.msg)
			}
			if later {
				t.Error("the next tensor's func ran after a failure")
			}
		})
	}
}

// TestAddTensorFuncOutputError: an output failure inside a func is reported
// as the output's error (not the func's echo of it), naming the tensor; a
// failure in the header (here a 2 MB KV, past the Writer's buffer) never
// calls the funcs.
func TestAddTensorFuncOutputError(t *testing.T) {
	tests := []struct {
		name      string
		kvBytes   int
		failAt    int
		wantCalls int
	}{
		{"in the header", 2 << 20, 1000, 0},
		{"in the data", 0, 10, 1},
		{"in the data after a flush", 0, 1<<20 + 1000, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter()
			if err := w.AddKV("big", strings.Repeat("x", tc.kvBytes)); err != nil {
				t.Fatal(err)
			}
			calls := 0
			if err := w.AddTensorFunc("big", tensor.F32, []int{1 << 19}, func(w io.Writer) error {
				calls++
				_, err := w.Write(make([]byte, 4<<19))
				if err == nil {
					return errors.New("no error from a failing output")
				}
				return fmt.Errorf("wrapped by the func: %w", err)
			}); err != nil {
				t.Fatal(err)
			}
			_, err := w.WriteTo(&failWriter{n: tc.failAt})
			if err == nil || !strings.Contains(err.Error(), "disk full") || strings.Contains(err.Error(), "wrapped by the func") {
				t.Errorf("WriteTo = %v, want the output's error", err)
			}
			if calls != tc.wantCalls || (calls > 0 && !strings.Contains(err.Error(), `tensor "big"`)) {
				t.Errorf("%d calls (want %d), error %v", calls, tc.wantCalls, err)
			}
		})
	}
}
