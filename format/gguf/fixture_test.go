package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// fixtureKVs has one KV of every scalar type, one array of every element type,
// an empty array and an array of arrays.
func fixtureKVs() []KV {
	return []KV{
		{"general.architecture", "llama"},
		{"general.name", "fixture ✓"},
		{"t.u8", uint8(200)},
		{"t.i8", int8(-100)},
		{"t.u16", uint16(60000)},
		{"t.i16", int16(-30000)},
		{"t.u32", uint32(4000000000)},
		{"t.i32", int32(-2000000000)},
		{"t.f32", float32(1e-5)},
		{"t.bool", true},
		{"t.u64", uint64(math.MaxUint64)},
		{"t.i64", int64(math.MinInt64)},
		{"t.f64", math.Pi},
		{"a.u8", []uint8{0, 1, 255}},
		{"a.i8", []int8{-128, 0, 127}},
		{"a.u16", []uint16{0, 65535}},
		{"a.i16", []int16{-32768, 32767}},
		{"a.u32", []uint32{1, 2, 3}},
		{"a.i32", []int32{-1, 0, 1}},
		{"a.f32", []float32{0.5, -2, float32(math.Inf(1))}},
		{"a.bool", []bool{true, false, true}},
		{"a.string", []string{"<unk>", "", "▁hello"}},
		{"a.u64", []uint64{0, math.MaxUint64}},
		{"a.i64", []int64{math.MinInt64, 7}},
		{"a.f64", []float64{math.E, -0.0}},
		{"a.empty", []string{}},
		{"a.nested", []any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{9}}}},
	}
}

type fixtureTensor struct {
	name  string
	dt    tensor.DType
	shape []int
}

// fixtureTensors are three tensors of different types and sizes, none a
// multiple of the alignment, so padding is exercised.
var fixtureTensors = []fixtureTensor{
	{"token_embd.weight", tensor.F32, []int{3, 5}},
	{"blk.0.attn_q.weight", tensor.Q8_0, []int{2, 64}},
	{"output_norm.weight", tensor.F16, []int{7}},
}

// tensorBytes returns deterministic, distinct contents for a fixture tensor.
func tensorBytes(t testing.TB, ft fixtureTensor, seed byte) []byte {
	t.Helper()
	cols := ft.shape[len(ft.shape)-1]
	row, err := ft.dt.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	rows := 1
	for _, d := range ft.shape[:len(ft.shape)-1] {
		rows *= d
	}
	b := make([]byte, int(row)*rows)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// writeFixture builds the fixture with the Writer; extra KVs go first.
func writeFixture(t testing.TB, extra ...KV) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range append(extra, fixtureKVs()...) {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i, ft := range fixtureTensors {
		if err := w.AddTensor(ft.name, ft.dt, ft.shape, tensorBytes(t, ft, byte(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

// raw assembles GGUF bytes field by field, for files the Writer refuses to make.
type raw struct{ bytes.Buffer }

func (r *raw) u32(v uint32) *raw { r.Write(binary.LittleEndian.AppendUint32(nil, v)); return r }
func (r *raw) u64(v uint64) *raw { r.Write(binary.LittleEndian.AppendUint64(nil, v)); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }

// header starts a v3 file with the given counts.
func header(nTensors, nKV uint64) *raw {
	r := &raw{}
	r.WriteString("GGUF")
	r.u32(3).u64(nTensors).u64(nKV)
	return r
}

// tensorEntry appends one tensor index entry; ne is innermost first.
func (r *raw) tensorEntry(name string, typ uint32, off uint64, ne ...uint64) *raw {
	r.str(name).u32(uint32(len(ne)))
	for _, n := range ne {
		r.u64(n)
	}
	return r.u32(typ).u64(off)
}

// padTo appends zeros up to the alignment, then size bytes of data.
func (r *raw) data(align, size int) []byte {
	for r.Len()%align != 0 {
		r.WriteByte(0)
	}
	r.Write(make([]byte, size))
	return r.Bytes()
}
