package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/tensor"
)

// rawFile assembles a safetensors file by hand: length prefix, header, data.
func rawFile(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestReadHandMade(t *testing.T) {
	// Two tensors written in reverse name order, plus metadata, as a Python
	// writer would lay them out; F16 0x3C00 = 1.0, 0xC000 = -2.0.
	hdr := `{"__metadata__":{"format":"pt"},` +
		`"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},` +
		`"a":{"dtype":"F16","shape":[2],"data_offsets":[16,20]}}`
	data := append(f32bytes(1, 2, 3, 4), 0x00, 0x3C, 0x00, 0xC0)
	raw := rawFile(hdr, data)
	f, err := Read(bytes.NewReader(raw), int64(len(raw)), "hand.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	start := int64(8 + len(hdr))
	want := []tensor.Info{
		{Name: "b", DType: tensor.F32, Shape: []int{2, 2}, Offset: start, Size: 16},
		{Name: "a", DType: tensor.F16, Shape: []int{2}, Offset: start + 16, Size: 4},
	}
	if diff := cmp.Diff(want, f.Tensors); diff != "" {
		t.Errorf("Tensors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"format": "pt"}, f.Metadata); diff != "" {
		t.Errorf("Metadata (-want +got):\n%s", diff)
	}
	if f.DataOffset != start {
		t.Errorf("DataOffset = %d, want %d", f.DataOffset, start)
	}
	for _, tc := range []struct {
		name string
		want []float32
	}{{"a", []float32{1, -2}}, {"b", []float32{1, 2, 3, 4}}} {
		got, err := f.ReadF32(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ReadF32(%q) (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := f.ReadF32("missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadF32(missing) = %v, want ErrNotExist", err)
	}
}

func TestWriteOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	vals := []float32{0.5, -1.25, 3, 0, 1e-3, -7}
	var ts []Tensor
	for _, c := range []struct {
		name  string
		dt    tensor.DType
		shape []int
	}{
		{"w.f32", tensor.F32, []int{2, 3}},
		{"w.f16", tensor.F16, []int{3, 2}},
		{"w.bf16", tensor.BF16, []int{6}},
	} {
		tt, err := NewTensor(c.name, c.dt, c.shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tt)
	}
	scalar, err := NewTensor("scalar", tensor.F32, nil, []float32{42})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := NewTensor("empty", tensor.F32, []int{0, 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts = append(ts, scalar, empty)
	if err := WriteFile(path, ts, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset%8 != 0 {
		t.Errorf("DataOffset %d is not 8-byte aligned", f.DataOffset)
	}
	st, _ := os.Stat(path)
	for _, info := range f.Tensors {
		if info.Offset < f.DataOffset || info.Offset+info.Size > st.Size() {
			t.Errorf("%s: [%d,+%d) outside the data section", info.Name, info.Offset, info.Size)
		}
	}
	for _, c := range []struct {
		name string
		dt   tensor.DType
		conv func(float32) float32
	}{
		{"w.f32", tensor.F32, func(x float32) float32 { return x }},
		{"w.f16", tensor.F16, func(x float32) float32 { return tensor.F16ToF32(tensor.F32ToF16(x)) }},
		{"w.bf16", tensor.BF16, func(x float32) float32 { return tensor.BF16ToF32(tensor.F32ToBF16(x)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := f.ReadF32(c.name)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(vals))
			for i, v := range vals {
				want[i] = c.conv(v)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			info, _ := f.Tensor(c.name)
			if info.DType != c.dt {
				t.Errorf("dtype %v, want %v", info.DType, c.dt)
			}
		})
	}
	if got, err := f.ReadF32("scalar"); err != nil || len(got) != 1 || got[0] != 42 {
		t.Errorf("scalar = %v, %v; want [42]", got, err)
	}
	if got, err := f.ReadF32("empty"); err != nil || len(got) != 0 {
		t.Errorf("empty = %v, %v; want []", got, err)
	}
	if diff := cmp.Diff(map[string]string{"k": "v"}, f.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("WriteFile left %d files in the directory, want 1 (no temp files)", len(ents))
	}
}

func TestWriteErrors(t *testing.T) {
	good := Tensor{Name: "x", DType: tensor.F32, Shape: []int{2}, Data: make([]byte, 8)}
	tests := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"empty name", []Tensor{{Name: "", DType: tensor.F32, Data: make([]byte, 4)}}, "invalid tensor name"},
		{"reserved name", []Tensor{{Name: MetadataKey, DType: tensor.F32, Data: make([]byte, 4)}}, "invalid tensor name"},
		{"duplicate", []Tensor{good, good}, "appears twice"},
		{"quantized dtype", []Tensor{{Name: "q", DType: tensor.Q8_0, Shape: []int{32}, Data: make([]byte, 34)}}, "cannot store dtype q8_0"},
		{"short data", []Tensor{{Name: "s", DType: tensor.F32, Shape: []int{3}, Data: make([]byte, 8)}}, "needs 12 bytes, data has 8"},
		{"negative dim", []Tensor{{Name: "n", DType: tensor.F32, Shape: []int{-1}}}, "negative dimension"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewTensor("x", tensor.F32, []int{2, 2}, []float32{1}); err == nil || !strings.Contains(err.Error(), "holds 4 values, got 1") {
		t.Errorf("NewTensor with a short slice: %v", err)
	}
	if _, err := NewTensor("x", tensor.Q4_0, []int{1}, []float32{1}); err == nil {
		t.Errorf("NewTensor(q4_0) succeeded, want an error")
	}
}

// bigReader reports a huge size without holding the bytes: only the length
// prefix is ever read when the header length is rejected.
type bigReader struct{ prefix []byte }

func (r bigReader) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	if off < int64(len(r.prefix)) {
		copy(p, r.prefix[off:])
	}
	return len(p), nil
}

func TestReadErrors(t *testing.T) {
	const p = "bad.safetensors"
	tensorAt := func(hdr string) int64 { return 8 + int64(strings.Index(hdr, `"t"`)) }
	withHeader := func(hdr string, dataLen int) []byte { return rawFile(hdr, make([]byte, dataLen)) }
	const atT = -9 // the offset of the key "t" in the header
	type tc struct {
		name     string
		file     []byte
		sentinel error
		offset   int64 // -2: do not check
		msg      string
	}
	tests := []tc{
		{"empty file", nil, ErrTruncated, 0, "want at least 8"},
		{"header past end", rawFile("{}", nil)[:9], ErrTruncated, 0, "header length 2 runs past the end of the file (1 bytes after the length)"},
		{"not an object", withHeader(`[1,2]`, 0), ErrCorrupt, 8, "JSON object"},
		{"zero-length header", withHeader(``, 0), ErrCorrupt, 8, "JSON object"},
		{"syntax error", withHeader(`{"t": }`, 0), ErrCorrupt, -2, "bad JSON header"},
		{"trailing garbage", withHeader(`{} x`, 0), ErrCorrupt, 8 + 3, "trailing bytes"},
		{"duplicate key", withHeader(`{"t":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, 4), ErrCorrupt, -2, "appears twice"},
		{"unknown dtype", withHeader(`{"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8), ErrUnsupported, atT, "unknown safetensors dtype I64 in bad.safetensors:t"},
		{"missing dtype", withHeader(`{"t":{"shape":[1],"data_offsets":[0,4]}}`, 4), ErrCorrupt, 9, `missing "dtype"`},
		{"missing shape", withHeader(`{"t":{"dtype":"F32","data_offsets":[0,4]}}`, 4), ErrCorrupt, 9, `missing "shape"`},
		{"missing offsets", withHeader(`{"t":{"dtype":"F32","shape":[1]}}`, 4), ErrCorrupt, 9, `missing "data_offsets"`},
		{"shape not ints", withHeader(`{"t":{"dtype":"F32","shape":["a"],"data_offsets":[0,4]}}`, 4), ErrCorrupt, atT, "want {"},
		{"negative dim", withHeader(`{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), ErrCorrupt, atT, "negative dimension"},
		{"huge shape", withHeader(`{"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4), ErrCorrupt, atT, "too large"},
		{"three offsets", withHeader(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 8), ErrCorrupt, atT, "has 3 values"},
		{"reversed offsets", withHeader(`{"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), ErrCorrupt, atT, "reversed"},
		{"offsets past end", withHeader(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), ErrTruncated, atT, "past the end of the data section (4 bytes)"},
		{"size mismatch", withHeader(`{"t":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}`, 4), ErrCorrupt, atT, "needs 6"},
		{"overlap", withHeader(`{"u":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), ErrCorrupt, -2, `tensor "t" data [4,12) overlaps tensor "u" data [0,8)`},
		{"metadata not strings", withHeader(`{"__metadata__":{"a":1}}`, 0), ErrCorrupt, 8 + 16, "map strings to strings"},
		{"empty name", withHeader(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), ErrCorrupt, 8 + 1, "empty tensor name"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.file), int64(len(c.file)), p)
			if err == nil {
				t.Fatal("Read succeeded, want an error")
			}
			if !errors.Is(err, c.sentinel) {
				t.Errorf("error %v does not wrap %v", err, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file and %q", err, c.msg)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			want := c.offset
			if want == atT {
				want = tensorAt(string(c.file[8:]))
			}
			if want != -2 && e.Offset != want {
				t.Errorf("Offset = %d, want %d (%v)", e.Offset, want, err)
			}
		})
	}
	t.Run("syntax error offset points into the header", func(t *testing.T) {
		raw := rawFile(`{"t": }`, nil)
		_, err := Read(bytes.NewReader(raw), int64(len(raw)), p)
		if e, ok := errors.AsType[*Error](err); !ok || e.Offset < 8+4 || e.Offset > 8+7 {
			t.Errorf("err = %v, want an offset at the '}' (8+6) give or take the decoder's reporting", err)
		}
	})
	t.Run("header length over the limit", func(t *testing.T) {
		var pre [8]byte
		binary.LittleEndian.PutUint64(pre[:], MaxHeaderBytes+1)
		_, err := Read(bigReader{pre[:]}, 1<<40, p)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("err = %v, want the header limit error", err)
		}
	})
	t.Run("header length past end names both sizes", func(t *testing.T) {
		raw := rawFile(`{}`, nil)
		binary.LittleEndian.PutUint64(raw, 1000)
		_, err := Read(bytes.NewReader(raw), int64(len(raw)), p)
		if err == nil || !strings.Contains(err.Error(), "header length 1000 runs past the end of the file (2 bytes") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("Open missing file", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "nope.safetensors"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want ErrNotExist", err)
		}
	})
}

func writeShard(t *testing.T, path string, names ...string) {
	t.Helper()
	var ts []Tensor
	for i, n := range names {
		tt, err := NewTensor(n, tensor.F32, []int{2}, []float32{float32(i), float32(len(n))})
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tt)
	}
	if err := WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "a", "b")
	writeShard(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), "c")
	idx := Index{
		Metadata:  map[string]any{"total_size": 24},
		WeightMap: map[string]string{"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"},
	}
	if err := WriteIndex(filepath.Join(dir, IndexFile), idx); err != nil {
		t.Fatal(err)
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, s.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	fi, info, ok := s.Tensor("c")
	if !ok || fi != 1 || filepath.Base(s.Files[fi].Path) != "model-00002-of-00002.safetensors" || info.Offset < s.Files[fi].DataOffset {
		t.Errorf("Tensor(c) = %d, %+v, %v", fi, info, ok)
	}
	got, err := s.ReadF32("b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{1, 1}, got); diff != "" {
		t.Errorf("ReadF32(b) (-want +got):\n%s", diff)
	}
	if _, err := s.ReadF32("zzz"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadF32(zzz) = %v", err)
	}

	bad := []struct {
		name  string
		index string
		want  string
	}{
		{"bad json", `{"weight_map": {"a": }`, "offset"},
		{"no weight map", `{"metadata": {}}`, `missing "weight_map"`},
		{"escaping path", `{"weight_map": {"a": "../x.safetensors"}}`, "want a file name"},
		{"missing tensor", `{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"}}`, `tensor "d" in model-00002-of-00002.safetensors, but that shard does not hold it`},
		{"wrong shard", `{"weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}}`, `tensor "a" in model-00002-of-00002.safetensors, but it is in model-00001-of-00002.safetensors`},
		{"unlisted tensor", `{"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}}`, `tensor "b" in shard model-00001-of-00002.safetensors is not in weight_map`},
		{"missing shard", `{"weight_map": {"a": "gone.safetensors"}}`, "gone.safetensors"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".index.json")
			if err := os.WriteFile(p, []byte(tc.index), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenIndex(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenIndex error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("duplicate across shards", func(t *testing.T) {
		d := t.TempDir()
		writeShard(t, filepath.Join(d, "s1.safetensors"), "a")
		writeShard(t, filepath.Join(d, "s2.safetensors"), "a", "b")
		p := filepath.Join(d, IndexFile)
		os.WriteFile(p, []byte(`{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}`), 0o644)
		if _, err := OpenIndex(p); err == nil || !strings.Contains(err.Error(), `"a" appears in both s2.safetensors and s1.safetensors`) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestOpenDirSingle(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenDir(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenDir(empty) = %v, want ErrNotExist", err)
	}
	writeShard(t, filepath.Join(dir, SingleFile), "x")
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 1 || s.Names()[0] != "x" {
		t.Errorf("OpenDir = %d files, names %v", len(s.Files), s.Names())
	}
}

// FuzzHeader feeds arbitrary bytes to Read: it must never panic, and whatever
// it accepts must describe non-overlapping tensors inside the file whose sizes
// match their shapes.
func FuzzHeader(f *testing.F) {
	var good bytes.Buffer
	a, _ := NewTensor("a", tensor.F32, []int{2, 2}, []float32{1, 2, 3, 4})
	b, _ := NewTensor("b", tensor.BF16, []int{3}, []float32{1, 2, 3})
	Write(&good, []Tensor{a, b}, map[string]string{"m": "v"})
	f.Add(good.Bytes())
	f.Add(rawFile(`{"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(rawFile(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add(rawFile(`{"__metadata__":{"a":"b"}}`, nil))
	f.Add(rawFile(`{`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, raw []byte) {
		file, err := Read(bytes.NewReader(raw), int64(len(raw)), "fuzz")
		if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			return
		}
		var end int64
		for _, info := range file.Tensors {
			if info.Offset < file.DataOffset || info.Offset+info.Size > int64(len(raw)) {
				t.Fatalf("%s: [%d,+%d) outside the file", info.Name, info.Offset, info.Size)
			}
			if info.Size != info.Elements()*int64(info.DType.BlockBytes()) {
				t.Fatalf("%s: size %d does not match shape %v", info.Name, info.Size, info.Shape)
			}
			if info.Size > 0 {
				if info.Offset < end {
					t.Fatalf("%s overlaps the previous tensor", info.Name)
				}
				end = info.Offset + info.Size
			}
			if _, err := file.ReadF32(info.Name); err != nil {
				t.Fatalf("ReadF32(%s): %v", info.Name, err)
			}
		}
	})
}
