package model

// sluice's own tensor layouts register themselves with package tensor (and
// their kernels with package kernels) when imported. Every model load goes
// through this package, so importing them here means any GGUF written by
// `sluice quantize` or `sluice prune` opens, binds and runs wherever a model
// can be loaded, and the GGUF reader no longer rejects their dtype ids.
import (
	_ "github.com/sluicehq/sluice/compress/prune" // DTypeSparse24
	_ "github.com/sluicehq/sluice/compress/quant" // DTypeInt8G32 … DTypeNF4
)
