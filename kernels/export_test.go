package kernels

import (
	"fmt"
	"time"
)

// Test hooks for the external test package (kernels_test imports kernels/ref,
// which imports kernels, so the comparison tests cannot live in package kernels).

// PureGo reports the purego build tag.
const PureGo = pureGo

// SetParallelMinMACs changes the work thresholds below which MatMul stays
// on one thread (the product, and quantizing its activations) and returns a
// func restoring them. Tests use 1 to force splitting.
func SetParallelMinMACs(v int) (restore func()) {
	old, oldQ, oldR := parallelMinMACs, parallelMinQuant, parallelMinRows
	parallelMinMACs, parallelMinQuant, parallelMinRows = v, v, v
	return func() { parallelMinMACs, parallelMinQuant, parallelMinRows = old, oldQ, oldR }
}

// SetPoolSpin changes how long Pool helpers and callers poll before parking
// and returns a func restoring it. Tests use 0 to force the parking paths.
func SetPoolSpin(d time.Duration) (restore func()) {
	old := spinFor
	spinFor = d
	return func() { spinFor = old }
}

// SetISA reselects every kernel as if SLUICE_ISA were name and returns a
// func restoring the selection from the environment, and the Impl name now
// in use. Not safe while kernels run.
func SetISA(name string) (restore func(), err error) {
	l, err := parseISA(name)
	if err != nil {
		return func() {}, err
	}
	setISA(l)
	return func() { setISA(isaCap) }, nil
}

// ISACap is the cap SLUICE_ISA set (the widest level when unset).
func ISACap() string { return isaCap.String() }

// ISASets are this architecture's SLUICE_ISA names, widest first.
func ISASets() []string {
	s := make([]string, len(isaNames))
	for i, n := range isaNames {
		s[len(s)-1-i] = n
	}
	return s
}

// AttentionExact reports whether Attention runs the generic kernel,
// bit-identical to ref (else a fast one, within requireAttnRef's tolerance).
func AttentionExact() bool {
	return fmt.Sprintf("%p", attentionImpl) == fmt.Sprintf("%p", attentionGeneric)
}

// SwiGLUExact reports whether SwiGLU runs the generic kernel.
func SwiGLUExact() bool { return fmt.Sprintf("%p", swiGLUImpl) == fmt.Sprintf("%p", swiGLUGeneric) }

// AttentionF16Exact reports whether Attention over binary16 pages runs the
// generic kernel (== ref bit for bit).
func AttentionF16Exact() bool {
	return fmt.Sprintf("%p", attentionF16Impl) == fmt.Sprintf("%p", attentionGeneric)
}
