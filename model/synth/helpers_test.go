package synth

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// sharedModel returns the path of a real test file (see testutil.Model), or
// skips the test when it is absent.
func sharedModel(t testing.TB, rel string) string {
	t.Helper()
	return testutil.Model(t, rel)
}

func mustPreset(t testing.TB, name string) Preset {
	t.Helper()
	p, err := LookupPreset(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeBytes runs Write into memory.
func writeBytes(t testing.TB, o Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, o); err != nil {
		t.Fatalf("Write(%+v): %v", o, err)
	}
	return buf.Bytes()
}

// readGGUF parses b with the project's GGUF reader, which also checks that
// every tensor lies inside the file, aligned and without overlap.
func readGGUF(t testing.TB, b []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)), "synth.gguf")
	if err != nil {
		t.Fatalf("gguf.Read: %v", err)
	}
	return f
}

// weights decodes the named tensor of the file in b to float32.
func weights(t testing.TB, b []byte, f *gguf.File, name string) []float32 {
	t.Helper()
	info, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("tensor %q missing", name)
	}
	n := int(info.Elements())
	out := make([]float32, n)
	rb, err := info.DType.RowBytes(info.Cols())
	if err != nil {
		t.Fatal(err)
	}
	for r := range info.Rows() {
		src := b[info.Offset+int64(r)*rb:]
		tensor.DequantizeRow(out[r*info.Cols():], src, info.DType, info.Cols())
	}
	return out
}
