// Package prune removes weights by magnitude: unstructured (per matrix, or
// globally across several matrices, to an exact sparsity) and N:M structured
// (at most N nonzeros in every M consecutive weights of a row, 2:4 being the
// pattern sparse tensor cores and our Sparse24 kernel exploit).
//
// Every selection is deterministic. Weights are ordered by (|w|, position) and
// the first ones in that order are pruned: the smallest magnitudes go first
// and, among equal magnitudes, the earlier position goes first. Position is
// the index within the matrix, and for a global prune the matrix's place in the
// list comes before that.
package prune

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Sentinel errors.
var (
	// ErrSparsity: a sparsity outside [0, 1] or an impossible N:M pattern.
	ErrSparsity = errors.New("prune: invalid sparsity")
	// ErrNotFinite: a NaN weight (it has no magnitude to rank).
	ErrNotFinite = errors.New("prune: NaN weight")
	// ErrShape: a slice does not match the rows × cols it was given.
	ErrShape = errors.New("prune: shape mismatch")
	// ErrNotSparse24: a group of 4 holds more than 2 nonzeros, or encoded 2:4
	// data is malformed.
	ErrNotSparse24 = errors.New("prune: not 2:4 sparse")
)

// Count returns how many weights are pruned for a sparsity over n weights:
// k = round(sparsity·n), rounding halves away from zero.
func Count(sparsity float64, n int) int {
	return int(math.Round(sparsity * float64(n)))
}

// Magnitude zeroes the k = Count(sparsity, len(w)) weights of w that come first
// in (|w|, index) order, and returns k. Afterwards w holds exactly k zeros,
// unless it held more than k zeros to begin with (they rank first, so they are
// part of the k, and any extra stay zero).
func Magnitude(w []float32, sparsity float64) (int, error) {
	return MagnitudeGlobal([][]float32{w}, sparsity)
}

// MagnitudeGlobal prunes several matrices together: the k = Count(sparsity, n)
// smallest of all n weights, so a matrix of small weights loses more than its
// share. Ties are broken by (matrix, index) order.
func MagnitudeGlobal(ws [][]float32, sparsity float64) (int, error) {
	if !(sparsity >= 0 && sparsity <= 1) { // also rejects NaN
		return 0, fmt.Errorf("%w: %v (want 0 ≤ sparsity ≤ 1)", ErrSparsity, sparsity)
	}
	n := 0
	for mi, w := range ws {
		for i, v := range w {
			if v != v {
				return 0, fmt.Errorf("%w: matrix %d, index %d", ErrNotFinite, mi, i)
			}
		}
		n += len(w)
	}
	k := Count(sparsity, n)
	if k == 0 {
		return 0, nil
	}
	thr, ties := selectK(ws, n, k)
	for _, w := range ws {
		for i, v := range w {
			switch key := magKey(v); {
			case key < thr:
				w[i] = 0
			case key == thr && ties > 0:
				w[i] = 0
				ties--
			}
		}
	}
	return k, nil
}

// magKey orders magnitudes: for non-NaN floats the bit pattern of |v| is
// monotonic in |v| (+Inf is the largest), so integer compares replace float
// ones and a radix select applies.
func magKey(v float32) uint32 { return math.Float32bits(v) &^ (1 << 31) }

// smallSelect is the size below which sorting the keys beats two passes over
// 65536 radix buckets.
const smallSelect = 1 << 13

// selectK finds the k-th smallest key of the n weights (1 ≤ k ≤ n). It returns
// the threshold key and how many weights equal to it are among the k smallest
// (the rest of the k are strictly below it).
func selectK(ws [][]float32, n, k int) (thr uint32, ties int) {
	if n <= smallSelect {
		return selectSort(ws, n, k)
	}
	return selectRadix(ws, k)
}

// selectSort sorts a copy of the keys: O(n log n), for small inputs.
func selectSort(ws [][]float32, n, k int) (thr uint32, ties int) {
	keys := make([]uint32, 0, n)
	for _, w := range ws {
		for _, v := range w {
			keys = append(keys, magKey(v))
		}
	}
	slices.Sort(keys)
	thr = keys[k-1]
	below, _ := slices.BinarySearch(keys, thr) // index of the first key equal to thr
	return thr, k - below
}

// selectRadix is a two-pass radix select over 16-bit digits: O(n) time and
// 65536 counters of memory, for large inputs.
func selectRadix(ws [][]float32, k int) (thr uint32, ties int) {
	var hist [1 << 16]int
	for _, w := range ws {
		for _, v := range w {
			hist[magKey(v)>>16]++
		}
	}
	below := 0 // weights with a key strictly below the bucket being examined
	hi := 0
	for ; below+hist[hi] < k; hi++ {
		below += hist[hi]
	}
	clear(hist[:])
	for _, w := range ws {
		for _, v := range w {
			if key := magKey(v); int(key>>16) == hi {
				hist[key&0xffff]++
			}
		}
	}
	lo := 0
	for ; below+hist[lo] < k; lo++ {
		below += hist[lo]
	}
	return uint32(hi)<<16 | uint32(lo), k - below
}

// NM prunes a row-major (rows, cols) matrix to the N:M pattern: in every group
// of m consecutive weights of a row (groups start at column 0 of each row and
// never straddle rows), the m−n that come first in (|w|, index) order become
// zero, so at most n nonzeros remain. A short last group of g < m columns keeps
// min(n, g). NM(w, rows, cols, 2, 4) is 2:4 sparsity.
func NM(w []float32, rows, cols, n, m int) error {
	if m < 1 || m > 1024 || n < 0 || n > m {
		return fmt.Errorf("%w: %d:%d (want 0 ≤ N ≤ M, 1 ≤ M ≤ 1024)", ErrSparsity, n, m)
	}
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return fmt.Errorf("%w: (%d, %d) matrix needs %d weights, got %d", ErrShape, rows, cols, rows*cols, len(w))
	}
	for i, v := range w {
		if v != v {
			return fmt.Errorf("%w: row %d, column %d", ErrNotFinite, i/cols, i%cols)
		}
	}
	order := make([]int, 0, m)
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		for g := 0; g < cols; g += m {
			grp := row[g:min(g+m, cols)]
			drop := len(grp) - n
			if drop <= 0 {
				continue
			}
			// Insertion sort of positions by (key, position): m is small.
			order = order[:0]
			for i := range grp {
				j := len(order)
				order = append(order, i)
				for j > 0 && magKey(grp[order[j-1]]) > magKey(grp[i]) {
					order[j] = order[j-1]
					j--
				}
				order[j] = i
			}
			for _, i := range order[:drop] {
				grp[i] = 0
			}
		}
	}
	return nil
}

// Zeros counts the zero weights (±0) of w.
func Zeros(w []float32) int {
	z := 0
	for _, v := range w {
		if v == 0 {
			z++
		}
	}
	return z
}
