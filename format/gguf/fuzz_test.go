package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/internal/testutil"
)

// FuzzGGUFHeader feeds arbitrary bytes to Read. Whatever the input, Read must
// return either an *Error naming the file and an offset inside it, or a File
// whose tensors all lie inside the data section, aligned and disjoint, and
// whose KVs survive a Writer round trip unchanged.
func FuzzGGUFHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(writeFixture(f))
	f.Add(writeFixture(f, KV{AlignmentKey, uint32(64)}))
	f.Add(header(1, 0).tensorEntry("w", 8, 0, 32, 2).data(32, 68))
	f.Add(header(2, 0).tensorEntry("a", 0, 0, 16).tensorEntry("b", 0, 32, 8).data(32, 256))
	f.Add(oneKVNamed("k", 9, func(r *raw) { r.u32(9).u64(2).u32(8).u64(1).str("x").u32(7).u64(1).WriteByte(1) }))
	// The real header (KVs and tensor index, without the data) when present.
	if b, err := os.ReadFile(filepath.Join(testutil.ModelsDir(), "stories260K-gguf/stories260K.gguf")); err == nil {
		f.Add(b[:14176])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		size := int64(len(b))
		file, err := Read(bytes.NewReader(b), size, "fuzz.gguf")
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			if e.Path != "fuzz.gguf" || e.Offset < 0 || e.Offset > size {
				t.Fatalf("%v: offset %d outside a %d-byte file", err, e.Offset, size)
			}
			return
		}
		for i, ti := range file.Tensors {
			if ti.Offset < file.DataOffset || ti.Offset+ti.Size > size || (ti.Offset-file.DataOffset)%file.Alignment != 0 {
				t.Fatalf("tensor %d %+v: outside [%d,%d) or misaligned", i, ti, file.DataOffset, size)
			}
			if ti.Size <= 0 {
				t.Fatalf("tensor %d %+v: empty", i, ti)
			}
			for j, tj := range file.Tensors[:i] {
				if ti.Offset < tj.Offset+tj.Size && tj.Offset < ti.Offset+ti.Size {
					t.Fatalf("tensors %d and %d overlap: %+v %+v", j, i, tj, ti)
				}
			}
		}
		w := NewWriter()
		for _, kv := range file.KV {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatalf("Writer refuses a KV the reader accepted: %v", err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "again.gguf")
		if err != nil {
			t.Fatalf("re-reading written KVs: %v", err)
		}
		if diff := cmp.Diff(file.KV, again.KV, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("KV round trip (-read +rewritten):\n%s", diff)
		}
	})
}
