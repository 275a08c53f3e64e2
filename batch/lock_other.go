//go:build !unix

package batch

import "os"

// lock is a no-op where flock is missing: two batches writing one results
// file are not caught there.
func lock(*os.File) error { return nil }
