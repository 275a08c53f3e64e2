package kernels

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// isaLevel orders the instruction sets a kernel set may use. The levels
// above generic are named per architecture: amd64's and arm64's share the
// numbers, and a program only ever knows its own architecture's names.
type isaLevel uint8

const (
	isaGeneric isaLevel = iota // portable Go, bit-identical to kernels/ref
	isaAVX2                    // amd64: AVX2 + FMA + F16C (256-bit)
	isaAVX512                  // amd64: AVX-512 F/BW/VL/DQ (+ VNNI where present)
	isaAMX                     // amd64: AVX-512 VNNI + AMX-INT8 tiles for Q8_0/Q4_0 panel batches

	isaNEON    = isaAVX2   // arm64: ASIMD (NEON), integer dots by SMULL/SADALP
	isaDotProd = isaAVX512 // arm64: ASIMD with the dot-product extension (SDOT)
)

// The AMX set changes only the matrix products: the row-wise kernels
// check level == isaAVX512, which it keeps (dispatch_amd64.go).

// isaNames are this architecture's names of the levels, generic first.
var isaNames = func() []string {
	if runtime.GOARCH == "arm64" {
		return []string{isaGeneric: "generic", isaNEON: "neon", isaDotProd: "neon-dotprod"}
	}
	return []string{isaGeneric: "generic", isaAVX2: "avx2", isaAVX512: "avx512", isaAMX: "avx512-amx"}
}()

// isaTop is the widest level of this architecture (no cap).
var isaTop = isaLevel(len(isaNames) - 1)

func (l isaLevel) String() string { return isaNames[l] }

// parseISA reads a SLUICE_ISA value: empty means no cap.
func parseISA(s string) (isaLevel, error) {
	if s == "" {
		return isaTop, nil
	}
	for l, n := range isaNames {
		if n == s {
			return isaLevel(l), nil
		}
	}
	return 0, fmt.Errorf("kernels: SLUICE_ISA=%q on %s: want %s", s, runtime.GOARCH, strings.Join(isaNames, ", "))
}

// isaCap is the widest instruction set dispatch may pick, from the
// environment variable SLUICE_ISA (generic, avx2, avx512 or avx512-amx
// on amd64; generic, neon or neon-dotprod on arm64), read once when the
// package initializes. It exists so that the narrower kernel sets can be
// run and measured on a machine that has the wider ones. A value it does not
// know stops the program: a misspelt cap that silently measured the wrong
// kernels would be worse.
var isaCap = func() isaLevel {
	l, err := parseISA(os.Getenv("SLUICE_ISA"))
	if err != nil {
		panic(err)
	}
	return l
}()

// level is the instruction set of the installed kernels (≤ isaCap and ≤
// what the CPU has), set by the selectors.
var level = isaGeneric

// selectors install, for a cap, the fastest kernels the CPU can run within
// it, after first resetting their dispatch variables to the generic
// defaults. Each build-tagged fast-path file appends one from its init() and
// runs it with isaCap; tests call setISA to run the narrower sets too.
var selectors []func(isaLevel)

// addSelector registers f and runs it with the cap from the environment.
func addSelector(f func(isaLevel)) {
	selectors = append(selectors, f)
	f(isaCap)
}

// setISA reselects every kernel under cap c (tests only: not safe while
// kernels run).
func setISA(c isaLevel) {
	implName, level, archsimdRows = "generic", isaGeneric, false
	for _, f := range selectors {
		f(c)
	}
}

// ISANames are the values SLUICE_ISA accepts on this architecture,
// narrowest first (generic, avx2, avx512, avx512-amx on amd64; generic, neon,
// neon-dotprod on arm64).
func ISANames() []string { return append([]string(nil), isaNames...) }
