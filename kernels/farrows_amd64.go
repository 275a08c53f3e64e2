//go:build amd64 && !purego

package kernels

// farRows is the row distance h for a decode kernel that reads k rows
// h apart (rows r, r+h, …, r+(k−1)h for r < h) out of n rows of rb bytes:
// n/k, less one when that puts the streams a multiple of 4 KiB apart. Loads
// whose addresses differ by a multiple of 4 KiB alias in the core's memory
// disambiguation (only address bits 0–11 are compared early): 1b Q4_0
// decode, whose two streams were 1152 KiB apart, ran at 29–43 tok/s from
// run to run and at 49.5 steadily one row closer.
func farRows(n, k, rb int) int {
	h := n / k
	if h > 1 && h*rb%4096 == 0 {
		h--
	}
	return h
}
