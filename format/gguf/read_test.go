package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/tensor"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		extra []KV
		align int64
	}{
		{"default alignment", nil, 32},
		{"alignment 64", []KV{{AlignmentKey, uint32(64)}}, 64},
		{"alignment 1", []KV{{AlignmentKey, uint32(1)}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := writeFixture(t, tc.extra...)
			f, err := Read(bytes.NewReader(b), int64(len(b)), "x.gguf")
			if err != nil {
				t.Fatal(err)
			}
			if f.Version != 3 || f.Alignment != tc.align || f.Path != "x.gguf" {
				t.Errorf("Version %d Alignment %d Path %q, want 3 %d x.gguf", f.Version, f.Alignment, f.Path, tc.align)
			}
			wantKV := append(append([]KV(nil), tc.extra...), fixtureKVs()...)
			if diff := cmp.Diff(wantKV, f.KV); diff != "" {
				t.Errorf("KVs (-want +got):\n%s", diff)
			}
			if f.DataOffset%tc.align != 0 {
				t.Errorf("DataOffset %d not aligned to %d", f.DataOffset, tc.align)
			}
			if len(f.Tensors) != len(fixtureTensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(fixtureTensors))
			}
			for i, ft := range fixtureTensors {
				got := f.Tensors[i]
				want := tensorBytes(t, ft, byte(i+1))
				if diff := cmp.Diff(tensor.Info{Name: ft.name, DType: ft.dt, Shape: ft.shape, Offset: got.Offset, Size: int64(len(want))}, got); diff != "" {
					t.Errorf("tensor %d (-want +got):\n%s", i, diff)
				}
				if (got.Offset-f.DataOffset)%tc.align != 0 || got.Offset < f.DataOffset {
					t.Errorf("%s at %d: not aligned to %d in data section at %d", ft.name, got.Offset, tc.align, f.DataOffset)
				}
				if !bytes.Equal(b[got.Offset:got.Offset+got.Size], want) {
					t.Errorf("%s: data differs", ft.name)
				}
				byName, ok := f.Tensor(ft.name)
				if !ok || byName.Offset != got.Offset {
					t.Errorf("Tensor(%q) = %v, %v", ft.name, byName, ok)
				}
			}
			last := f.Tensors[len(f.Tensors)-1]
			if last.Offset+last.Size != int64(len(b)) {
				t.Errorf("file has %d bytes after the last tensor", int64(len(b))-last.Offset-last.Size)
			}
			if _, ok := f.Tensor("missing"); ok {
				t.Error("Tensor(missing) found")
			}
		})
	}
}

// TestTruncatedEveryPrefix cuts the fixture at every length: each prefix must
// give an *Error naming the file and an offset inside it, never a panic.
func TestTruncatedEveryPrefix(t *testing.T) {
	b := writeFixture(t)
	for n := range len(b) {
		f, err := Read(bytes.NewReader(b[:n]), int64(n), "x.gguf")
		if err == nil {
			t.Fatalf("prefix %d of %d: parsed (%d KVs, %d tensors), want an error", n, len(b), len(f.KV), len(f.Tensors))
		}
		e, ok := errors.AsType[*Error](err)
		if !ok {
			t.Fatalf("prefix %d: error %T %v, want *Error", n, err, err)
		}
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("prefix %d: %v: want ErrTruncated", n, err)
		}
		if e.Offset < 0 || e.Offset > int64(n) || e.Path != "x.gguf" {
			t.Errorf("prefix %d: %v: offset %d outside the file", n, err, e.Offset)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "gguf: x.gguf: offset ") || !strings.Contains(msg, "want") && !strings.Contains(msg, "end of file") {
			t.Errorf("prefix %d: message %q does not say where and what was expected", n, msg)
		}
	}
}

// TestTruncatedTensorMessage pins the message for data cut inside a tensor.
func TestTruncatedTensorMessage(t *testing.T) {
	b := writeFixture(t)
	f, err := Read(bytes.NewReader(b), int64(len(b)), "x.gguf")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Tensor("blk.0.attn_q.weight")
	cut := int(q.Offset + 10)
	_, err = Read(bytes.NewReader(b[:cut]), int64(cut), "x.gguf")
	// The error points at the tensor's index entry: its offset field.
	want := `tensor "blk.0.attn_q.weight" data [` + itoa(q.Offset) + `,+` + itoa(q.Size) + `) runs past end of file (size ` + itoa(int64(cut)) + `)`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "gguf: x.gguf: offset ") {
		t.Errorf("got %v\nwant ... %s", err, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCorrupt(t *testing.T) {
	oneKV := func(typ uint32, value func(r *raw)) []byte {
		r := header(0, 1)
		r.str("k").u32(typ)
		value(r)
		return r.Bytes()
	}
	oneTensor := func(typ uint32, off uint64, ne ...uint64) []byte {
		r := header(1, 0).tensorEntry("w", typ, off, ne...)
		return r.data(32, 256)
	}
	tests := []struct {
		name     string
		file     []byte
		sentinel error
		msg      string // substring of the error
		offset   int64
	}{
		{"empty", nil, ErrTruncated, "magic: want 4 bytes", 0},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), ErrBadMagic, `magic "GGML", want "GGUF"`, 0},
		{"version 1", append([]byte("GGUF"), 1, 0, 0, 0), ErrUnsupported, "version 1 is unsupported (want 2 or 3)", 4},
		{"version 4", append([]byte("GGUF"), 4, 0, 0, 0), ErrUnsupported, "version 4 is unsupported", 4},
		{"huge kv_count", header(0, 1<<62).Bytes(), ErrTruncated, "kv_count 4611686018427387904 needs at least 18446744073709551615 bytes, but only 0 are left before the end of file (size 24)", 16},
		{"huge tensor_count", header(math.MaxUint64, 0).Bytes(), ErrTruncated, "tensor_count 18446744073709551615 needs at least 18446744073709551615 bytes after 0 KVs", 8},
		{"huge key length", header(0, 1).u64(1 << 60).u64(0).Bytes(), ErrTruncated, "kv[0] key: length 1152921504606846976 runs past end of file", 24},
		{"huge string value", oneKV(8, func(r *raw) { r.u64(math.MaxUint64) }), ErrTruncated, `kv "k" string value: length 18446744073709551615 runs past end of file`, 37},
		{"huge array length", oneKV(9, func(r *raw) { r.u32(6).u64(1 << 61) }), ErrTruncated, `kv "k": array of 2305843009213693952 float32 needs at least 9223372036854775808 bytes, but only 0 are left`, 41},
		{"huge string array", oneKV(9, func(r *raw) { r.u32(8).u64(1 << 40).u64(0) }), ErrTruncated, `array of 1099511627776 string`, 41},
		{"unknown value type", oneKV(13, func(r *raw) { r.u32(0) }), ErrUnsupported, `kv "k": unknown value type 13 (want 0..12)`, 33},
		{"unknown array type", oneKV(9, func(r *raw) { r.u32(99).u64(0) }), ErrUnsupported, `kv "k": unknown array element type 99`, 37},
		{"bad bool", oneKV(7, func(r *raw) { r.WriteByte(2) }), ErrCorrupt, `kv "k": bool byte 2, want 0 or 1`, 37},
		{"bad bool in array", oneKV(9, func(r *raw) { r.u32(7).u64(3); r.Write([]byte{0, 1, 7}) }), ErrCorrupt, `kv "k": element 2: bool byte 7, want 0 or 1`, 51},
		{"nested too deep", oneKV(9, func(r *raw) {
			for range 20 {
				r.u32(9).u64(1)
			}
		}), ErrUnsupported, "arrays nested deeper than 8", 37 + 8*12},
		{"duplicate key", func() []byte {
			r := header(0, 2)
			r.str("k").u32(0).WriteByte(1)
			r.str("k").u32(0).WriteByte(2)
			return r.Bytes()
		}(), ErrCorrupt, `duplicate key "k" (first at offset 24)`, 38},
		{"alignment not a power of two", oneKVNamed(AlignmentKey, 4, func(r *raw) { r.u32(48) }), ErrCorrupt, "general.alignment: alignment 48, want a power of two", 49},
		{"alignment zero", oneKVNamed(AlignmentKey, 4, func(r *raw) { r.u32(0) }), ErrCorrupt, "alignment 0", 49},
		{"alignment string", oneKVNamed(AlignmentKey, 8, func(r *raw) { r.str("32") }), ErrCorrupt, "value of type string, want an unsigned integer", 49},
		{"n_dims 5", oneTensor(0, 0, 1, 1, 1, 1, 1), ErrCorrupt, `tensor "w": n_dims 5, want 1..4`, 33},
		{"n_dims 0", oneTensor(0, 0), ErrCorrupt, `tensor "w": n_dims 0, want 1..4`, 33},
		{"ne zero", oneTensor(0, 0, 4, 0), ErrCorrupt, `tensor "w": ne[1] = 0`, 45},
		{"ne huge", oneTensor(0, 0, 1<<40), ErrCorrupt, `tensor "w": ne[0] = 1099511627776`, 37},
		{"unknown ggml type", oneTensor(4, 0, 32), ErrUnsupported, `tensor "w": unknown ggml type 4`, 45},
		{"unknown ggml type 1000", oneTensor(1000, 0, 32), ErrUnsupported, `unknown ggml type 1000`, 45},
		{"partial block", oneTensor(uint32(tensor.Q8_0), 0, 33), ErrCorrupt, `tensor "w": shape [33] of q8_0: tensor: 33 elements of q8_0 is not a whole number of 32-element blocks`, 45},
		{"offset not aligned", oneTensor(0, 4, 8), ErrCorrupt, `tensor "w": data offset 4 is not a multiple of the alignment 32`, 49},
		{"data out of range", oneTensor(0, 0, 65), ErrTruncated, `tensor "w" data [64,+260) runs past end of file (size 320)`, 49},
		{"offset huge", oneTensor(0, 1<<63, 1), ErrCorrupt, `data offset 9223372036854775808 is impossibly large`, 49},
		{"offset past end", oneTensor(0, 1<<40, 1), ErrTruncated, `tensor "w" data [1099511627840,+4) runs past end of file (size 320)`, 49},
		{"overlapping", func() []byte {
			r := header(2, 0).tensorEntry("a", 0, 0, 16).tensorEntry("b", 0, 32, 8)
			return r.data(32, 256)
		}(), ErrCorrupt, `tensor "b" data [128,+32) overlaps tensor "a" data [96,+64)`, 82},
		{"duplicate tensor", func() []byte {
			r := header(2, 0).tensorEntry("a", 0, 0, 8).tensorEntry("a", 0, 32, 8)
			return r.data(32, 256)
		}(), ErrCorrupt, `duplicate tensor name "a" (first is tensor[0])`, 57},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			_, err := Read(bytes.NewReader(tc.file), int64(len(tc.file)), "bad.gguf")
			runtime.ReadMemStats(&ms1)
			if err == nil {
				t.Fatal("parsed, want an error")
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("%v: want %v", err, tc.sentinel)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("%T, want *Error", err)
			}
			if !strings.Contains(err.Error(), tc.msg) || e.Path != "bad.gguf" || e.Offset != tc.offset {
				t.Errorf("got  %v\nwant gguf: bad.gguf: offset %d: ...%s...", err, tc.offset, tc.msg)
			}
			// Counts are validated against the file size before allocating.
			if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte file", alloc, len(tc.file))
			}
		})
	}
}

func oneKVNamed(key string, typ uint32, value func(r *raw)) []byte {
	r := header(0, 1)
	r.str(key).u32(typ)
	value(r)
	return r.Bytes()
}

// TestVersion2 accepts the v2 layout, which only differs in the version field.
func TestVersion2(t *testing.T) {
	b := writeFixture(t)
	b[4] = 2
	f, err := Read(bytes.NewReader(b), int64(len(b)), "v2.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != 3 {
		t.Errorf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
}

// TestOtherGGMLTypes: tensors of ggml types sluice does not compute with
// (IQ quants, f64) are indexed with their ggml size so a model loader can
// name the unsupported tensor; the K-quants and Q4_1/Q5_0/Q5_1 are known.
func TestOtherGGMLTypes(t *testing.T) {
	tests := []struct {
		typ   uint32
		name  string
		ne    []uint64
		size  int64
		known bool
	}{
		{12, "q4_K", []uint64{512, 2}, 4 * 144, true},
		{14, "q6_K", []uint64{256}, 210, true},
		{3, "q4_1", []uint64{64}, 40, true},
		{10, "q2_K", []uint64{256}, 84, true},
		{11, "q3_K", []uint64{256}, 110, true},
		{13, "q5_K", []uint64{256}, 176, true},
		{15, "q8_K", []uint64{256}, 292, true},
		{6, "q5_0", []uint64{32}, 22, true},
		{7, "q5_1", []uint64{32}, 24, true},
		{23, "iq4_xs", []uint64{512}, 2 * 136, false},
		{20, "iq4_nl", []uint64{32}, 18, false},
		{28, "f64", []uint64{3}, 24, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := header(1, 0).tensorEntry("w", tc.typ, 0, tc.ne...)
			b := r.data(32, int(tc.size))
			f, err := Read(bytes.NewReader(b), int64(len(b)), "k.gguf")
			if err != nil {
				t.Fatal(err)
			}
			w := f.Tensors[0]
			if w.Size != tc.size || TypeName(w.DType) != tc.name || w.DType.Known() != tc.known {
				t.Errorf("got %v size %d name %s known %v, want size %d name %s known %v", w, w.Size, TypeName(w.DType), w.DType.Known(), tc.size, tc.name, tc.known)
			}
			if tc.known && w.DType.String() != tc.name {
				t.Errorf("DType.String() = %q, want %q", w.DType.String(), tc.name)
			}
			if w.Offset+w.Size != int64(len(b)) {
				t.Errorf("data [%d,+%d) in a %d-byte file", w.Offset, w.Size, len(b))
			}
		})
	}
	if got := TypeName(5); got != "ggml_type(5)" {
		t.Errorf("TypeName(5) = %q", got)
	}
}

// shortReader claims more bytes than it has, as a file truncated while open.
type shortReader struct{ *bytes.Reader }

func TestReaderShorterThanSize(t *testing.T) {
	b := writeFixture(t)
	_, err := Read(shortReader{bytes.NewReader(b[:100])}, int64(len(b)), "short.gguf")
	if err == nil || !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "short.gguf") {
		t.Errorf("got %v, want a truncation error naming short.gguf", err)
	}
}

func TestAccessors(t *testing.T) {
	f := &File{KV: []KV{
		{"u8", uint8(7)}, {"i8neg", int8(-3)}, {"i32", int32(42)}, {"u64big", uint64(math.MaxUint64)},
		{"f32", float32(0.25)}, {"f64", 1.5}, {"s", "hi"}, {"b", true},
		{"strs", []string{"a", "b"}}, {"f32s", []float32{1, 2}}, {"f64s", []float64{0.5}},
		{"i32s", []int32{-1, 5}}, {"u32s", []uint32{1, 2}}, {"u32sbig", []uint32{math.MaxUint32}},
		{"i8s", []int8{-8, 8}}, {"i64s", []int64{1 << 40}}, {"u8s", []uint8{255}},
		{"general.architecture", "qwen2"},
	}}
	type res struct {
		V  any
		OK bool
	}
	tests := []struct {
		name string
		got  func() res
		want res
	}{
		{"Uint u8", func() res { v, ok := f.Uint("u8"); return res{v, ok} }, res{uint64(7), true}},
		{"Uint neg", func() res { v, ok := f.Uint("i8neg"); return res{v, ok} }, res{uint64(0), false}},
		{"Uint i32", func() res { v, ok := f.Uint("i32"); return res{v, ok} }, res{uint64(42), true}},
		{"Uint big", func() res { v, ok := f.Uint("u64big"); return res{v, ok} }, res{uint64(math.MaxUint64), true}},
		{"Uint string", func() res { v, ok := f.Uint("s"); return res{v, ok} }, res{uint64(0), false}},
		{"Uint missing", func() res { v, ok := f.Uint("nope"); return res{v, ok} }, res{uint64(0), false}},
		{"Int neg", func() res { v, ok := f.Int("i8neg"); return res{v, ok} }, res{int64(-3), true}},
		{"Int u8", func() res { v, ok := f.Int("u8"); return res{v, ok} }, res{int64(7), true}},
		{"Int too big", func() res { v, ok := f.Int("u64big"); return res{v, ok} }, res{int64(0), false}},
		{"Float f32", func() res { v, ok := f.Float("f32"); return res{v, ok} }, res{0.25, true}},
		{"Float f64", func() res { v, ok := f.Float("f64"); return res{v, ok} }, res{1.5, true}},
		{"Float int", func() res { v, ok := f.Float("i32"); return res{v, ok} }, res{42.0, true}},
		{"Float u64", func() res { v, ok := f.Float("u64big"); return res{v, ok} }, res{float64(math.MaxUint64), true}},
		{"Float string", func() res { v, ok := f.Float("s"); return res{v, ok} }, res{0.0, false}},
		{"String", func() res { v, ok := f.String("s"); return res{v, ok} }, res{"hi", true}},
		{"String wrong type", func() res { v, ok := f.String("b"); return res{v, ok} }, res{"", false}},
		{"Bool", func() res { v, ok := f.Bool("b"); return res{v, ok} }, res{true, true}},
		{"Bool wrong type", func() res { v, ok := f.Bool("u8"); return res{v, ok} }, res{false, false}},
		{"Strings", func() res { v, ok := f.Strings("strs"); return res{v, ok} }, res{[]string{"a", "b"}, true}},
		{"Float32s", func() res { v, ok := f.Float32s("f32s"); return res{v, ok} }, res{[]float32{1, 2}, true}},
		{"Float32s from f64", func() res { v, ok := f.Float32s("f64s"); return res{v, ok} }, res{[]float32{0.5}, true}},
		{"Float32s wrong", func() res { v, ok := f.Float32s("strs"); return res{v, ok} }, res{[]float32(nil), false}},
		{"Int32s", func() res { v, ok := f.Int32s("i32s"); return res{v, ok} }, res{[]int32{-1, 5}, true}},
		{"Int32s from u32", func() res { v, ok := f.Int32s("u32s"); return res{v, ok} }, res{[]int32{1, 2}, true}},
		{"Int32s u32 too big", func() res { v, ok := f.Int32s("u32sbig"); return res{v, ok} }, res{[]int32(nil), false}},
		{"Int32s from i8", func() res { v, ok := f.Int32s("i8s"); return res{v, ok} }, res{[]int32{-8, 8}, true}},
		{"Int32s i64 too big", func() res { v, ok := f.Int32s("i64s"); return res{v, ok} }, res{[]int32(nil), false}},
		{"Int32s from u8", func() res { v, ok := f.Int32s("u8s"); return res{v, ok} }, res{[]int32{255}, true}},
		{"Arch", func() res { return res{f.Arch(), true} }, res{"qwen2", true}},
		{"Arch empty", func() res { return res{(&File{}).Arch(), true} }, res{"", true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	f32 := make([]byte, 4*8)
	tests := []struct {
		name string
		do   func(w *Writer) error
		msg  string
	}{
		{"int", func(w *Writer) error { return w.AddKV("k", 3) }, `gguf: AddKV "k": gguf: unsupported: value of Go type int`},
		{"[]int", func(w *Writer) error { return w.AddKV("k", []int{3}) }, `value of Go type []int`},
		{"empty key", func(w *Writer) error { return w.AddKV("", uint8(1)) }, "empty key"},
		{"duplicate key", func(w *Writer) error { w.AddKV("k", uint8(1)); return w.AddKV("k", uint8(2)) }, `AddKV "k": gguf: corrupt: duplicate key`},
		{"array of scalars in []any", func(w *Writer) error { return w.AddKV("k", []any{uint8(1)}) }, "element 0 of an array of arrays is uint8"},
		{"bad alignment", func(w *Writer) error { return w.AddKV(AlignmentKey, uint32(3)) }, "alignment 3, want a power of two"},
		{"alignment float", func(w *Writer) error { return w.AddKV(AlignmentKey, float32(32)) }, "want an unsigned integer"},
		{"too deep", func(w *Writer) error {
			var v any = []uint8{1}
			for range 10 {
				v = []any{v}
			}
			return w.AddKV("k", v)
		}, "arrays nested deeper than 8"},
		{"wrong size", func(w *Writer) error { return w.AddTensor("w", tensor.F32, []int{2, 5}, f32) }, `AddTensor "w": f32 [2 5] needs 40 bytes, got 32`},
		{"partial block", func(w *Writer) error { return w.AddTensor("w", tensor.Q8_0, []int{33}, f32) }, "not a whole number of 32-element blocks"},
		{"unknown dtype", func(w *Writer) error { return w.AddTensor("w", 23, []int{256}, f32) }, "unsupported dtype"},
		{"5 dims", func(w *Writer) error { return w.AddTensor("w", tensor.F32, []int{1, 1, 1, 1, 8}, f32) }, "5 dimensions, want 1..4"},
		{"0 dims", func(w *Writer) error { return w.AddTensor("w", tensor.F32, nil, f32) }, "0 dimensions"},
		{"zero dim", func(w *Writer) error { return w.AddTensor("w", tensor.F32, []int{0, 8}, f32) }, "dimension outside"},
		{"empty name", func(w *Writer) error { return w.AddTensor("", tensor.F32, []int{8}, f32) }, "empty name"},
		{"duplicate tensor", func(w *Writer) error {
			w.AddTensor("w", tensor.F32, []int{8}, f32)
			return w.AddTensor("w", tensor.F32, []int{8}, f32)
		}, "duplicate tensor name"},
		{"func nil", func(w *Writer) error { return w.AddTensorFunc("w", tensor.F32, []int{8}, nil) }, `AddTensorFunc "w": nil write func`},
		{"func partial block", func(w *Writer) error { return w.AddTensorFunc("w", tensor.Q4_0, []int{2, 33}, nopWrite) }, "not a whole number of 32-element blocks"},
		{"func 5 dims", func(w *Writer) error { return w.AddTensorFunc("w", tensor.F32, []int{1, 1, 1, 1, 8}, nopWrite) }, `AddTensorFunc "w": gguf: unsupported: 5 dimensions`},
		{"func empty name", func(w *Writer) error { return w.AddTensorFunc("", tensor.F32, []int{8}, nopWrite) }, "AddTensorFunc: empty name"},
		{"func duplicate of AddTensor", func(w *Writer) error {
			w.AddTensor("w", tensor.F32, []int{8}, f32)
			return w.AddTensorFunc("w", tensor.F32, []int{8}, nopWrite)
		}, "duplicate tensor name"},
		{"AddTensor duplicate of func", func(w *Writer) error {
			w.AddTensorFunc("w", tensor.F32, []int{8}, nopWrite)
			return w.AddTensor("w", tensor.F32, []int{8}, f32)
		}, "duplicate tensor name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(NewWriter())
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want ...%s...", err, tc.msg)
			}
		})
	}
}

func nopWrite(io.Writer) error { return nil }

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	w := NewWriter()
	if err := w.AddKV("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4*64)
	for i := range data {
		data[i] = byte(i)
	}
	if err := w.AddTensor("a", tensor.F32, []int{64}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left behind: %v", path, err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || f.Arch() != "llama" || len(f.Tensors) != 1 || f.Tensors[0].Offset != f.DataOffset {
		t.Errorf("got %+v", f)
	}
	// A failed write leaves neither the file nor the temporary.
	bad := filepath.Join(dir, "no-such-dir", "m.gguf")
	if err := w.WriteFile(bad); err == nil || !strings.Contains(err.Error(), "gguf:") {
		t.Errorf("WriteFile into a missing dir: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("Open missing: %v", err)
	}
}

// TestKVOrderAndEmptyFile: a file with KVs only (as the vocab-only GGUFs)
// round-trips and keeps the KV order.
func TestKVOnly(t *testing.T) {
	w := NewWriter()
	for _, k := range []string{"z", "a", "m"} {
		if err := w.AddKV(k, k); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "kv.gguf")
	if err != nil {
		t.Fatal(err)
	}
	want := []KV{{"z", "z"}, {"a", "a"}, {"m", "m"}}
	if diff := cmp.Diff(want, f.KV, cmpopts.EquateEmpty()); diff != "" || len(f.Tensors) != 0 {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteToError(t *testing.T) {
	w := NewWriter()
	if err := w.AddTensor("a", tensor.F32, []int{1 << 19}, make([]byte, 4<<19)); err != nil {
		t.Fatal(err)
	}
	n, err := w.WriteTo(&failWriter{n: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "gguf: write: disk full") || n > 1<<20 {
		t.Errorf("WriteTo = %d, %v", n, err)
	}
}
