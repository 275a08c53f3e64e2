package tensor

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// halves is a toy extension layout for the tests: one int8 per weight,
// decoded as q/2, plus a 1-byte header per row (so RowBytes is not a multiple
// of any block).
var halves = Codec{
	Name:     "test-halves",
	RowBytes: func(cols int) int64 { return int64(cols) + 1 },
	DequantizeRow: func(dst []float32, src []byte, cols int) {
		for i := range dst[:cols] {
			dst[i] = float32(int8(src[1+i])) / 2
		}
	},
}

const halvesID DType = 2000

func init() {
	if err := RegisterCodec(halvesID, halves); err != nil {
		panic(err)
	}
}

func TestCodecDType(t *testing.T) {
	if got := halvesID.String(); got != "test-halves" {
		t.Errorf("String = %q", got)
	}
	if !halvesID.Known() || DType(2001).Known() {
		t.Errorf("Known: registered %v, unregistered %v", halvesID.Known(), DType(2001).Known())
	}
	if got := DType(2001).String(); got != "ggml_type(2001)" {
		t.Errorf("unregistered String = %q", got)
	}
	if bs := halvesID.BlockSize(); bs != 1 {
		t.Errorf("BlockSize = %d, want 1", bs)
	}
	for _, n := range []int{0, 1, 7, 172} {
		rb, err := halvesID.RowBytes(n)
		if err != nil || rb != int64(n)+1 {
			t.Errorf("RowBytes(%d) = %d, %v; want %d", n, rb, err, n+1)
		}
	}
	if _, err := halvesID.RowBytes(-1); err == nil {
		t.Error("RowBytes(-1): no error")
	}
	if _, err := DType(2001).RowBytes(4); err == nil {
		t.Error("RowBytes of an unregistered extension id: no error")
	}
	dst := make([]float32, 3)
	DequantizeRow(dst, []byte{0xff, 2, 0xfe, 7}, halvesID, 3)
	if diff := cmp.Diff([]float32{1, -1, 3.5}, dst); diff != "" {
		t.Errorf("DequantizeRow (-want +got):\n%s", diff)
	}
	pt, err := ParseDType("test-halves")
	if err != nil || pt != halvesID {
		t.Errorf("ParseDType = %v, %v", pt, err)
	}
	if got := Extensions(); len(got) == 0 || got[len(got)-1] != halvesID {
		t.Errorf("Extensions = %v, want it to list %d", got, halvesID)
	}
}

func TestRegisterCodecErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   DType
		c    Codec
	}{
		{"ggml range", Q8_0, Codec{Name: "x1", RowBytes: halves.RowBytes, DequantizeRow: halves.DequantizeRow}},
		{"just below", FirstExtension - 1, Codec{Name: "x2", RowBytes: halves.RowBytes, DequantizeRow: halves.DequantizeRow}},
		{"duplicate id", halvesID, Codec{Name: "x3", RowBytes: halves.RowBytes, DequantizeRow: halves.DequantizeRow}},
		{"duplicate name", 2002, halves},
		{"builtin name", 2003, Codec{Name: "q8_0", RowBytes: halves.RowBytes, DequantizeRow: halves.DequantizeRow}},
		{"no name", 2004, Codec{RowBytes: halves.RowBytes, DequantizeRow: halves.DequantizeRow}},
		{"no RowBytes", 2005, Codec{Name: "x5", DequantizeRow: halves.DequantizeRow}},
		{"no DequantizeRow", 2006, Codec{Name: "x6", RowBytes: halves.RowBytes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := RegisterCodec(tc.id, tc.c)
			if !errors.Is(err, ErrCodec) {
				t.Fatalf("err = %v, want ErrCodec", err)
			}
			if tc.id != halvesID && tc.id.Known() && tc.id >= FirstExtension {
				t.Errorf("failed registration left %d known", tc.id)
			}
		})
	}
	if halvesID.String() != "test-halves" {
		t.Errorf("a rejected duplicate replaced the codec: %q", halvesID.String())
	}
}
