package spec

import (
	"errors"
	"slices"
	"testing"
)

func TestPromptLookup(t *testing.T) {
	o := LookupOptions{MaxNgram: 3, MinNgram: 1, NumDraft: 4}
	for _, tc := range []struct {
		name    string
		history []int32
		o       LookupOptions
		want    []int32
	}{
		{"trigram", []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, o, []int32{4, 5, 6, 9}},
		{"draft stops at the end of history", []int32{7, 8, 9, 5, 7, 8}, o, []int32{9, 5, 7, 8}},
		{"short continuation", []int32{1, 2, 3, 1, 2}, o, []int32{3, 1, 2}},
		// The longest n-gram wins over a more recent shorter one.
		{"longest first", []int32{1, 2, 3, 10, 11, 9, 3, 20, 1, 2, 3}, o, []int32{10, 11, 9, 3}},
		// Of two occurrences of the same n-gram, the most recent one.
		{"most recent", []int32{5, 6, 1, 5, 6, 2, 5, 6}, LookupOptions{MaxNgram: 2, MinNgram: 1, NumDraft: 2}, []int32{2, 5}},
		{"unigram fallback", []int32{4, 8, 1, 2, 9, 4}, o, []int32{8, 1, 2, 9}},
		{"overlapping run", []int32{3, 7, 7, 7}, o, []int32{7}},
		{"no match", []int32{1, 2, 3, 4}, o, nil},
		{"MinNgram excludes the unigram", []int32{4, 8, 1, 2, 9, 4}, LookupOptions{MaxNgram: 3, MinNgram: 2, NumDraft: 4}, nil},
		{"NumDraft 1", []int32{1, 2, 3, 1, 2}, LookupOptions{MaxNgram: 2, MinNgram: 1, NumDraft: 1}, []int32{3}},
		{"empty history", nil, o, nil},
		{"one token", []int32{5}, o, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PromptLookup(nil, tc.history, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("PromptLookup(%v) = %v, want %v", tc.history, got, tc.want)
			}
		})
	}
	// dst is appended to.
	got, _ := PromptLookup([]int32{42}, []int32{1, 2, 1}, o)
	if !slices.Equal(got, []int32{42, 2, 1}) {
		t.Errorf("append to dst: %v", got)
	}
}

func TestPromptLookupOptions(t *testing.T) {
	for _, o := range []LookupOptions{
		{MaxNgram: 3, MinNgram: 0, NumDraft: 1},
		{MaxNgram: 1, MinNgram: 2, NumDraft: 1},
		{MaxNgram: 3, MinNgram: 1, NumDraft: 0},
	} {
		if _, err := PromptLookup(nil, []int32{1, 1}, o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: err = %v, want ErrOptions", o, err)
		}
	}
}
