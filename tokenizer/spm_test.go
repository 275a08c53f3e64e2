package tokenizer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSPMKeyOrder: sorting by spmKey is sorting by (score descending, left
// ascending) under float comparison, for awkward scores too.
func TestSPMKeyOrder(t *testing.T) {
	scores := []float32{0, float32(math.Copysign(0, -1)), 1, -1, -1e10, -1e9, 1e-45, -1e-45,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, -31740, 3.5}
	type pair struct {
		score float32
		left  int32
	}
	var ps []pair
	for _, s := range scores {
		for _, l := range []int32{0, 1, 7, math.MaxInt32} {
			ps = append(ps, pair{s, l})
		}
	}
	for _, a := range ps {
		for _, b := range ps {
			want := a.score > b.score || (a.score == b.score && a.left < b.left)
			if got := spmKey(a.score, a.left) < spmKey(b.score, b.left); got != want {
				t.Fatalf("key(%v,%d) < key(%v,%d) = %v, want %v", a.score, a.left, b.score, b.left, got, want)
			}
		}
	}
}

func TestMergeHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 17, 1000} {
		var q []mergePair
		var want []uint64
		for range n {
			k := r.Uint64N(50) // many duplicates
			q = pushPair(q, mergePair{key: k})
			want = append(want, k)
		}
		slices.Sort(want)
		var got []uint64
		for len(q) > 0 {
			var p mergePair
			p, q = popPair(q)
			got = append(got, p.key)
		}
		if !slices.Equal(want, got) && !(len(want) == 0 && len(got) == 0) {
			t.Fatalf("n=%d: popped %v, want %v", n, got, want)
		}
	}
}

func TestPartition(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", "<|a|>", "<|a|><|a|>", "x", ""}
	types := []TokenType{TypeUnknown, TypeControl, TypeControl, TypeUserDefined, TypeControl, TypeNormal, TypeUserDefined}
	v := newVocab(pieces, types, 1, 2, 0, func(s string) string { return s })
	raw := func(s string) fragment { return fragment{text: s, id: -1} }
	tok := func(id int32) fragment { return fragment{text: pieces[id], id: id} }
	tests := []struct {
		name  string
		text  string
		parse bool
		want  []fragment
	}{
		{"empty", "", true, nil},
		{"no specials", "xyz", true, []fragment{raw("xyz")}},
		{"control only when parsing", "a<s>b", false, []fragment{raw("a<s>b")}},
		{"control parsed", "a<s>b</s>", true, []fragment{raw("a"), tok(1), raw("b"), tok(2)}},
		{"unknown parsed", "<unk>", true, []fragment{tok(0)}},
		{"user-defined always", "a<|a|>b", false, []fragment{raw("a"), tok(3), raw("b")}},
		{"longest first", "<|a|><|a|><|a|>", true, []fragment{tok(4), tok(3)}},
		{"longer control skipped without parsing", "<|a|><|a|>", false, []fragment{tok(3), tok(3)}},
		{"adjacent", "<s><s>", true, []fragment{tok(1), tok(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := v.partition(tc.text, tc.parse)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(fragment{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewSPMErrors(t *testing.T) {
	tests := []struct {
		name string
		o    SPMOptions
	}{
		{"scores length", SPMOptions{Pieces: []string{"a", "b"}, Scores: []float32{0}}},
		{"types length", SPMOptions{Pieces: []string{"a"}, Scores: []float32{0}, Types: []TokenType{1, 1}}},
		{"BOS out of range", SPMOptions{Pieces: []string{"a"}, Scores: []float32{0}, BOS: 1, EOS: -1, Unk: -1}},
		{"EOS below -1", SPMOptions{Pieces: []string{"a"}, Scores: []float32{0}, BOS: -1, EOS: -2, Unk: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSPM(tc.o); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if _, err := NewBPE(BPEOptions{Pieces: []string{"a"}, Types: []TokenType{1, 1}, BOS: -1, EOS: -1, Unk: -1}); err == nil {
		t.Error("NewBPE with short types: no error")
	}
}

// TestByteFallbackOrder: a byte with no "<0xXX>" piece uses a one-byte
// piece, then unk, then nothing.
func TestByteFallbackOrder(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", "<0x41>", " ", "B"}
	tests := []struct {
		name string
		unk  int32
		text string
		want []int32
	}{
		{"byte piece", 0, "A", []int32{4, 3}},
		{"one-byte piece", 0, "B", []int32{4, 5}},
		{"unk", 0, "C", []int32{4, 0}},
		{"dropped without unk", -1, "C", []int32{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			types := inferTypes(pieces, 1, 2, tc.unk, true)
			types[0] = TypeUnknown
			tok, err := NewSPM(SPMOptions{Pieces: pieces, Scores: make([]float32, len(pieces)), Types: types, BOS: 1, EOS: 2, Unk: tc.unk})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tok.Encode(tc.text, EncodeOptions{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
