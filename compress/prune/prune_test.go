package prune

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/quick"

	gocmp "github.com/google/go-cmp/cmp"
)

// The seed's example: 50% of [[0.5, −0.1, 0.3], [0.05, −0.8, 0.2]] removes the
// three smallest magnitudes 0.05, 0.1 and 0.2.
func TestSeedExample(t *testing.T) {
	w := []float32{0.5, -0.1, 0.3, 0.05, -0.8, 0.2}
	k, err := Magnitude(w, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if k != 3 {
		t.Errorf("k = %d, want 3", k)
	}
	if diff := gocmp.Diff([]float32{0.5, 0, 0.3, 0, -0.8, 0}, w); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMagnitudeTable(t *testing.T) {
	tests := []struct {
		name     string
		in       []float32
		sparsity float64
		want     []float32
		wantK    int
	}{
		{"ties prune the earlier first", []float32{1, 1, 1, 1}, 0.5, []float32{0, 0, 1, 1}, 2},
		{"sign does not matter", []float32{-1, 1, -1, 1}, 0.25, []float32{0, 1, -1, 1}, 1},
		{"k rounds half away from zero", []float32{5, 4, 3, 2, 1}, 0.5, []float32{5, 4, 0, 0, 0}, 3},
		{"zero sparsity", []float32{3, 1, 2}, 0, []float32{3, 1, 2}, 0},
		{"full sparsity", []float32{3, -1, 2}, 1, []float32{0, 0, 0}, 3},
		{"existing zeros rank first", []float32{0, 7, 0, 1}, 0.25, []float32{0, 7, 0, 1}, 1},
		{"infinities rank last", []float32{float32(math.Inf(-1)), 1e30, 2}, 2.0 / 3, []float32{float32(math.Inf(-1)), 0, 0}, 2},
		{"negative zero", []float32{float32(math.Copysign(0, -1)), 1}, 0.5, []float32{0, 1}, 1},
		{"empty", nil, 0.5, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := slices.Clone(tc.in)
			k, err := Magnitude(w, tc.sparsity)
			if err != nil {
				t.Fatal(err)
			}
			if k != tc.wantK {
				t.Errorf("k = %d, want %d", k, tc.wantK)
			}
			if diff := gocmp.Diff(tc.want, w); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMagnitudeGlobal(t *testing.T) {
	a := []float32{0.1, 0.2, 0.3}
	b := []float32{10, 20, 0.15}
	k, err := MagnitudeGlobal([][]float32{a, b}, 0.5)
	if err != nil || k != 3 {
		t.Fatalf("k, err = %d, %v; want 3", k, err)
	}
	if diff := gocmp.Diff([][]float32{{0, 0, 0.3}, {10, 20, 0}}, [][]float32{a, b}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Ties across matrices: the earlier matrix loses first.
	c, d := []float32{1, 2}, []float32{1, 2}
	if _, err := MagnitudeGlobal([][]float32{c, d}, 0.25); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([][]float32{{0, 2}, {1, 2}}, [][]float32{c, d}); diff != "" {
		t.Errorf("ties (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		err  error
		want error
		msg  string
	}{
		{"negative sparsity", second(Magnitude([]float32{1}, -0.1)), ErrSparsity, "-0.1"},
		{"sparsity above 1", second(Magnitude([]float32{1}, 1.5)), ErrSparsity, "1.5"},
		{"NaN sparsity", second(Magnitude([]float32{1}, math.NaN())), ErrSparsity, "NaN"},
		{"NaN weight", second(MagnitudeGlobal([][]float32{{1}, {2, nan}}, 0.5)), ErrNotFinite, "matrix 1, index 1"},
		{"NM NaN", NM([]float32{1, 2, 3, nan}, 2, 2, 1, 2), ErrNotFinite, "row 1, column 1"},
		{"NM bad pattern", NM([]float32{1, 2, 3, 4}, 1, 4, 3, 2), ErrSparsity, "3:2"},
		{"NM shape", NM([]float32{1, 2, 3}, 2, 2, 2, 4), ErrShape, "needs 4 weights, got 3"},
		{"Compress24 shape", second(Compress24([]float32{1}, 1, 2)), ErrShape, "needs 2 weights, got 1"},
		{"Compress24 dense group", second(Compress24([]float32{0, 0, 0, 0, 1, 2, 3, 0}, 1, 8)), ErrNotSparse24, "row 0, columns 4–7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) || !strings.Contains(fmt.Sprint(tc.err), tc.msg) {
				t.Errorf("err = %v, want %v containing %q", tc.err, tc.want, tc.msg)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }

// referencePrune is the definition, by sorting: zero the first k in (|w|,
// position) order.
func referencePrune(ws [][]float32, k int) {
	type pos struct{ m, i int }
	var all []pos
	for m, w := range ws {
		for i := range w {
			all = append(all, pos{m, i})
		}
	}
	slices.SortStableFunc(all, func(a, b pos) int {
		return cmp.Compare(math.Abs(float64(ws[a.m][a.i])), math.Abs(float64(ws[b.m][b.i])))
	})
	for _, p := range all[:k] {
		ws[p.m][p.i] = 0
	}
}

// randWeights draws normal weights; with dup set, many magnitudes repeat so the
// tie rule is exercised.
func randWeights(r *rand.Rand, n int, dup bool) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64())
		if dup {
			w[i] = float32(r.IntN(7)-3) / 2
		}
		if w[i] == 0 {
			w[i] = 0.25
		}
	}
	return w
}

// Pruning reaches the requested sparsity exactly, keeps the largest magnitudes,
// and agrees element for element with the sort-based definition.
func TestPropertyMagnitude(t *testing.T) {
	check := func(seed uint64, n16 uint16, sp uint16, nmat uint8, dup bool) bool {
		r := rand.New(rand.NewPCG(seed, 11))
		sparsity := float64(sp%1001) / 1000
		var ws, ref [][]float32
		total := 0
		for range int(nmat%3) + 1 {
			w := randWeights(r, int(n16%500), dup)
			ws, ref = append(ws, w), append(ref, slices.Clone(w))
			total += len(w)
		}
		k, err := MagnitudeGlobal(ws, sparsity)
		if err != nil || k != Count(sparsity, total) {
			t.Logf("k=%d err=%v", k, err)
			return false
		}
		zeros := 0
		maxPruned, minKept := 0.0, math.Inf(1)
		for m, w := range ws {
			zeros += Zeros(w)
			for i, v := range w {
				if v == 0 {
					maxPruned = max(maxPruned, math.Abs(float64(ref[m][i])))
				} else {
					minKept = min(minKept, math.Abs(float64(v)))
				}
			}
		}
		if zeros != k || maxPruned > minKept {
			t.Logf("sparsity %v of %d: %d zeros (want %d), max pruned %v, min kept %v", sparsity, total, zeros, k, maxPruned, minKept)
			return false
		}
		referencePrune(ref, k)
		return gocmp.Equal(ref, ws)
	}
	if err := quick.Check(check, &quick.Config{MaxCount: runs(300)}); err != nil {
		t.Error(err)
	}
}

// runs scales a property test's iteration count down under -short (the race
// detector makes the sort-based reference slow).
func runs(n int) int {
	if testing.Short() {
		return n / 5
	}
	return n
}

// Both selection algorithms agree, on spread and on heavily tied keys.
func TestSelectSortEqualsRadix(t *testing.T) {
	check := func(seed uint64, n16 uint16, kk uint16, dup bool) bool {
		r := rand.New(rand.NewPCG(seed, 12))
		n := int(n16%3000) + 1
		w := randWeights(r, n, dup)
		k := int(kk)%n + 1
		ws := [][]float32{w[:n/2], w[n/2:]}
		t1, c1 := selectSort(ws, n, k)
		t2, c2 := selectRadix(ws, k)
		if t1 != t2 || c1 != c2 {
			t.Logf("n=%d k=%d: sort (%x, %d), radix (%x, %d)", n, k, t1, c1, t2, c2)
		}
		return t1 == t2 && c1 == c2
	}
	if err := quick.Check(check, &quick.Config{MaxCount: runs(100)}); err != nil {
		t.Error(err)
	}
}

// A large prune exercises both radix passes over many buckets.
func TestMagnitudeLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	n := 100_003
	if testing.Short() {
		n = 3*smallSelect + 1 // still above the sort cut-off: the radix path runs
	}
	w := randWeights(r, n, false)
	ref := slices.Clone(w)
	k, err := Magnitude(w, 0.437)
	if err != nil {
		t.Fatal(err)
	}
	referencePrune([][]float32{ref}, k)
	if !slices.Equal(ref, w) {
		t.Error("radix select disagrees with sorting")
	}
}

func TestNMTable(t *testing.T) {
	tests := []struct {
		name       string
		in         []float32
		rows, cols int
		n, m       int
		want       []float32
	}{
		{"2:4", []float32{1, -3, 2, 0.5, 4, 4, 4, 4}, 1, 8, 2, 4, []float32{0, -3, 2, 0, 0, 0, 4, 4}},
		{"groups restart each row", []float32{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 2, 6, 2, 4, []float32{0, 0, 3, 4, 5, 6, 0, 0, 3, 4, 5, 6}},
		{"short tail of 3 keeps 2", []float32{1, 2, 3, 4, 7, 5, 6}, 1, 7, 2, 4, []float32{0, 0, 3, 4, 7, 0, 6}},
		{"1:4", []float32{1, -9, 2, 3}, 1, 4, 1, 4, []float32{0, -9, 0, 0}},
		{"4:8 = 50%", []float32{8, 1, 7, 2, 6, 3, 5, 4}, 1, 8, 4, 8, []float32{8, 0, 7, 0, 6, 0, 5, 0}},
		{"0:2 prunes all", []float32{1, 2}, 1, 2, 0, 2, []float32{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := slices.Clone(tc.in)
			if err := NM(w, tc.rows, tc.cols, tc.n, tc.m); err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, w); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every group of 4 holds at most 2 nonzeros after 2:4, and what is kept is the
// group's two largest magnitudes.
func TestProperty24(t *testing.T) {
	check := func(seed uint64, rows8, cols8 uint8, dup bool) bool {
		r := rand.New(rand.NewPCG(seed, 24))
		rows, cols := int(rows8%9)+1, int(cols8%70)+1
		w := randWeights(r, rows*cols, dup)
		orig := slices.Clone(w)
		if err := NM(w, rows, cols, 2, 4); err != nil {
			return false
		}
		for row := range rows {
			for g := 0; g < cols; g += 4 {
				end := min(g+4, cols)
				grp, og := w[row*cols+g:row*cols+end], orig[row*cols+g:row*cols+end]
				if nz := len(grp) - Zeros(grp); nz > 2 || nz != min(2, len(grp)) {
					t.Logf("row %d group %d: %d nonzeros", row, g/4, nz)
					return false
				}
				ref := [][]float32{slices.Clone(og)}
				referencePrune(ref, max(0, len(og)-2))
				if !slices.Equal(ref[0], grp) {
					t.Logf("row %d group %d: got %v, want %v", row, g/4, grp, ref[0])
					return false
				}
			}
		}
		return true
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 300}); err != nil {
		t.Error(err)
	}
}

func TestCompress24HandMade(t *testing.T) {
	w := []float32{
		0, 5, 0, 7, // offsets 1, 3 → 0x0D
		0, 0, 0, 0, // spare slots at 0, 1 → 0x04
		9, 0, 0, 0, // 0 and a spare at 1 → 0x04
		0, 0, 6, 0, // a spare at 0, then 2 → 0x08
		0, -2, // short group: 1 and a spare at 0 → 0x04
	}
	s, err := Compress24(w, 1, len(w))
	if err != nil {
		t.Fatal(err)
	}
	want := &Sparse24{
		Rows: 1, Cols: 18,
		Values: []float32{5, 7, 0, 0, 9, 0, 0, 6, 0, -2},
		Index:  []byte{0x0D, 0x04, 0x04, 0x08, 0x04},
	}
	if diff := gocmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s.Bytes() != 45 {
		t.Errorf("Bytes = %d, want 45", s.Bytes())
	}
	back := make([]float32, len(w))
	s.Decompress(back)
	if diff := gocmp.Diff(w, back); diff != "" {
		t.Errorf("Decompress (-want +got):\n%s", diff)
	}
	// A short group of one column: the spare slot points past the end.
	s1, err := Compress24([]float32{3}, 1, 1)
	if err != nil || s1.Index[0] != 0x04 || s1.Values[1] != 0 {
		t.Errorf("one column: %+v, %v", s1, err)
	}
	y := make([]float32, 1)
	s1.MatVec(y, []float32{2})
	if y[0] != 6 {
		t.Errorf("one-column MatVec = %v, want 6", y[0])
	}
}

func denseMatVecSeq(dst, w, x []float32, rows, cols int) {
	for r := range rows {
		var acc float32
		for c, v := range w[r*cols : (r+1)*cols] {
			acc += float32(v * x[c])
		}
		dst[r] = acc
	}
}

// The compressed 2:4 matvec equals the dense matvec of the pruned matrix within
// a tolerance that scales with the row: only the summation order differs.
func TestMatVec24MatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, cols := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 33, 64, 172, 257, 768} {
		for _, rows := range []int{1, 3, 17} {
			t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
				w := randWeights(r, rows*cols, false)
				if err := NM(w, rows, cols, 2, 4); err != nil {
					t.Fatal(err)
				}
				s, err := Compress24(w, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				x := randWeights(r, cols, false)
				want, got := make([]float32, rows), make([]float32, rows+1)
				got[rows] = 12345 // guard: MatVec must not write past Rows
				denseMatVecSeq(want, w, x, rows, cols)
				s.MatVec(got, x)
				for i := range rows {
					var mag float64
					for c := range cols {
						mag += math.Abs(float64(w[i*cols+c] * x[c]))
					}
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*mag+1e-30 {
						t.Errorf("row %d: sparse %v, dense %v (|diff| %v > tol %v)", i, got[i], want[i], d, 1e-6*mag)
					}
				}
				if got[rows] != 12345 {
					t.Error("MatVec wrote past the end of dst")
				}
			})
		}
	}
}

func TestEncodeDecode24(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const rows, cols = 3, 10
	w := randWeights(r, rows*cols, false)
	if err := NM(w, rows, cols, 2, 4); err != nil {
		t.Fatal(err)
	}
	s, _ := Compress24(w, rows, cols)
	enc := s.Encode()
	if len(enc) != rows*RowBytes24(cols) || RowBytes24(cols) != 27 {
		t.Fatalf("encoded %d bytes, want %d×27", len(enc), rows)
	}
	back, err := Decode24(enc, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	corrupt := func(mut func(b []byte)) []byte {
		b := slices.Clone(enc)
		mut(b)
		return b
	}
	idx0 := 8 * Groups24(cols) // first index byte of row 0
	tests := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"short", enc[:len(enc)-1], ErrShape, "needs 81 bytes, got 80"},
		{"equal offsets", corrupt(func(b []byte) { b[idx0] = 0x05 }), ErrNotSparse24, "byte 24 (row 0, group 0): index 0x05"},
		{"decreasing offsets", corrupt(func(b []byte) { b[idx0] = 0x02 }), ErrNotSparse24, "index 0x02"},
		{"high bits", corrupt(func(b []byte) { b[idx0] |= 0x10 }), ErrNotSparse24, "want two increasing"},
		{"value past the end", corrupt(func(b []byte) {
			b[idx0+2] = 0x0C // group 2 covers columns 8–9: offsets 0 and 3, column 11 does not exist
			binary.LittleEndian.PutUint32(b[4*5:], math.Float32bits(1))
		}), ErrNotSparse24, "column 11 past the 10 columns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode24(tc.data, rows, cols)
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// Real weights: stories260K's w2 rows (172 columns, a short last group of 4 is
// impossible but the group of 128 used elsewhere is not: 172 = 43·4).
func TestRealModel(t *testing.T) {
	w, rows, cols := storiesW2(t)
	un := slices.Clone(w)
	k, err := Magnitude(un, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if Zeros(un) != k || k != len(w)/2 {
		t.Errorf("50%% prune: %d zeros, k %d, want %d", Zeros(un), k, len(w)/2)
	}
	st := slices.Clone(w)
	if err := NM(st, rows, cols, 2, 4); err != nil {
		t.Fatal(err)
	}
	s, err := Compress24(st, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	want, got, full := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	denseMatVecSeq(want, st, x, rows, cols)
	denseMatVecSeq(full, w, x, rows, cols)
	s.MatVec(got, x)
	var errPruned, errNorm, norm float64
	for i := range rows {
		errPruned = max(errPruned, math.Abs(float64(got[i]-want[i])))
		errNorm += float64(full[i]-got[i]) * float64(full[i]-got[i])
		norm += float64(full[i]) * float64(full[i])
	}
	if errPruned > 1e-4 {
		t.Errorf("compressed matvec differs from the dense pruned one by %v", errPruned)
	}
	// Magnitude 2:4 pruning keeps most of the output energy of real weights.
	rel := math.Sqrt(errNorm / norm)
	t.Logf("2:4: relative output error vs unpruned %.3f; %d → %d bytes", rel, 4*len(w), s.Bytes())
	if rel > 0.8 || rel == 0 {
		t.Errorf("relative output error %v, want in (0, 0.8]", rel)
	}
}

func storiesW2(t *testing.T) (w []float32, rows, cols int) {
	t.Helper()
	const path = "../../../shared/models/stories260K/stories260K.bin"
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skip("../shared/models absent: skipping real-model test")
	}
	if err != nil {
		t.Fatal(err)
	}
	var h [7]int
	for i := range h {
		h[i] = int(int32(binary.LittleEndian.Uint32(data[4*i:])))
	}
	dim, hidden, layers, heads, kvHeads, vocab := h[0], h[1], h[2], h[3], h[4], max(h[5], -h[5])
	kvDim := dim * kvHeads / heads
	off := 28 + 4*(vocab*dim+layers*dim+layers*dim*dim+2*layers*dim*kvDim+layers*dim*dim+layers*dim+layers*hidden*dim)
	w = make([]float32, layers*dim*hidden)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off+4*i:]))
	}
	return w, layers * dim, hidden
}

// FuzzDecode24 feeds arbitrary bytes to Decode24: no panic, and whatever it
// accepts re-encodes to the same bytes and multiplies without faults.
func FuzzDecode24(f *testing.F) {
	s, _ := Compress24([]float32{0, 5, 0, 7, 0, -2}, 1, 6)
	f.Add(uint8(1), uint8(6), s.Encode())
	f.Add(uint8(2), uint8(1), make([]byte, 18))
	f.Add(uint8(1), uint8(4), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x04})
	f.Fuzz(func(t *testing.T, rows8, cols8 uint8, data []byte) {
		rows, cols := int(rows8%16), int(cols8)
		s, err := Decode24(data, rows, cols)
		if err != nil {
			return
		}
		if !slices.Equal(s.Encode(), data) {
			t.Fatal("Encode(Decode24(b)) != b")
		}
		dense := make([]float32, rows*cols)
		s.Decompress(dense)
		s.MatVec(make([]float32, rows), make([]float32, cols))
		for row := range rows {
			for g := 0; g < cols; g += 4 {
				grp := dense[row*cols+g : row*cols+min(g+4, cols)]
				if len(grp)-Zeros(grp) > 2 {
					t.Fatalf("decoded group with %d nonzeros", len(grp)-Zeros(grp))
				}
			}
		}
	})
}
