//go:build race

package kernels_test

// raceEnabled: under -race, sync.Pool drops a random quarter of the items put
// back, so allocation counts of code using one are not deterministic.
const raceEnabled = true
