//go:build !race

package testutil

// Race reports whether the test binary was built with -race.
const Race = false
