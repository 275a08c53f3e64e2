//go:build purego

package kernels

// pureGo is true when the build forces the generic kernels (-tags purego).
// Fast-path files carry `!purego` in their build constraint, so they are not
// compiled at all and the dispatch variables keep their generic defaults.
const pureGo = true
