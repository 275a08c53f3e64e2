package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// sizes are the awkward lengths of STYLE §2.3.2.
var sizes = []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 4097}

// guard is the sentinel written around destinations; a kernel that writes
// outside its range changes it. Its bits are unusual so an accidental equal
// value is implausible.
var guard = math.Float32frombits(0x7f8badf0) // a signalling-NaN pattern

const guardLen = 7

// guarded returns a buffer of guardLen sentinels, off more, n values, and
// guardLen sentinels, plus the n-long window that starts at index guardLen+off.
func guarded(n, off int) (buf, win []float32) {
	buf = make([]float32, 2*guardLen+off+n)
	for i := range buf {
		buf[i] = guard
	}
	return buf, buf[guardLen+off : guardLen+off+n]
}

// checkGuard fails t if anything outside win's place in buf changed.
func checkGuard(t *testing.T, buf []float32, off, n int) {
	t.Helper()
	for i, v := range buf {
		if i >= guardLen+off && i < guardLen+off+n {
			continue
		}
		if math.Float32bits(v) != math.Float32bits(guard) {
			t.Fatalf("guard element %d of %d overwritten with %v (window [%d,%d))", i, len(buf), v, guardLen+off, guardLen+off+n)
		}
	}
}

// same is the bit-identity test: equal bits, or both NaN. NaN payloads and
// signs are not part of the contract: which operand's payload an x86 add
// propagates depends on register allocation, not on our operation order.
func same(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// requireSame fails t at the first element whose bits differ.
func requireSame(t *testing.T, what string, want, got []float32) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !same(want[i], got[i]) {
			t.Fatalf("%s: element %d of %d = %v (%#08x), ref %v (%#08x)", what, i, len(want),
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// kind selects the values a test vector holds.
type kind int

const (
	normal  kind = iota // N(0,1)
	special             // N(0,1) with NaN, ±Inf, ±MaxFloat32, ±0 and subnormals sprinkled in
)

func (k kind) String() string { return [...]string{"normal", "special"}[k] }

var specials = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, 0, float32(math.Copysign(0, -1)),
	math.SmallestNonzeroFloat32, 1e-40,
}

func vec(r *rand.Rand, n int, k kind) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if k == special && r.IntN(8) == 0 {
			v[i] = specials[r.IntN(len(specials))]
		}
	}
	return v
}

func newRand(t testing.TB, salt ...uint64) *rand.Rand {
	h := uint64(0x5EED)
	for _, c := range t.Name() {
		h = h*131 + uint64(c)
	}
	for _, s := range salt {
		h = h*1_000_003 + s
	}
	return rand.New(rand.NewPCG(h, 0x9E3779B97F4A7C15))
}

var dtypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0}

// weightMode says how weight bytes are made.
type weightMode int

const (
	encoded weightMode = iota // N(0,1) values encoded as the dtype (realistic)
	rawBits                   // uniformly random bytes: every bit pattern, incl. NaN/Inf/subnormal scales
)

func (m weightMode) String() string { return [...]string{"encoded", "raw"}[m] }

// makeWeight builds a rows×cols weight whose Data starts at byte offset off of
// its backing array (to exercise unaligned data).
func makeWeight(r *rand.Rand, t tensor.DType, rows, cols, off int, mode weightMode) kernels.Weight {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, off+rows*int(rb))[off:]
	if mode == rawBits {
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		return kernels.Weight{DType: t, Data: data, Rows: rows, Cols: cols}
	}
	row := make([]float32, cols)
	for i := 0; i < rows; i++ {
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		dst := data[i*int(rb) : (i+1)*int(rb)]
		switch t {
		case tensor.F32:
			for j, v := range row {
				binary.LittleEndian.PutUint32(dst[4*j:], math.Float32bits(v))
			}
		case tensor.F16:
			for j, v := range row {
				binary.LittleEndian.PutUint16(dst[2*j:], tensor.F32ToF16(v))
			}
		case tensor.BF16:
			for j, v := range row {
				binary.LittleEndian.PutUint16(dst[2*j:], tensor.F32ToBF16(v))
			}
		case tensor.Q8_0:
			tensor.QuantizeRowQ8_0(dst, row)
		case tensor.Q4_0:
			tensor.QuantizeRowQ4_0(dst, row)
		case tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
			if err := tensor.QuantizeRow(dst, row, t); err != nil {
				panic(err)
			}
		default:
			panic(fmt.Sprint("makeWeight: dtype ", t))
		}
	}
	return kernels.Weight{DType: t, Data: data, Rows: rows, Cols: cols}
}

// colSizes are the awkward column counts a dtype accepts.
func colSizes(t tensor.DType) []int {
	if t.BlockSize() == 1 {
		return sizes
	}
	var out []int
	for _, n := range append(sizes, 96, 4096) {
		if n%t.BlockSize() == 0 {
			out = append(out, n)
		}
	}
	return out
}

// offsets are the start offsets to try: all of 0–3, or the two extremes
// under -short (the race build is ~20× slower).
func offsets() []int {
	if testing.Short() {
		return []int{0, 3}
	}
	return []int{0, 1, 2, 3}
}

// mustPanic runs f and fails t unless it panics with a message starting with prefix.
func mustPanic(t *testing.T, prefix string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one starting %q", prefix)
		}
		msg := fmt.Sprint(r)
		if len(msg) < len(prefix) || msg[:len(prefix)] != prefix {
			t.Fatalf("panic %q, want prefix %q", msg, prefix)
		}
	}()
	f()
}
