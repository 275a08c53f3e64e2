package quant

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// A Mix is one of llama.cpp's K-quant file types (`llama-quantize … Q4_K_M`):
// not one layout but a rule giving each tensor of a model its own type. Its
// rule is llama.cpp's llama_tensor_get_type for dense models without an
// importance matrix:
//
//   - output.weight (and token_embd.weight when there is no output.weight,
//     i.e. tied embeddings) becomes Q6_K, or Q8_0 when its rows are not whole
//     super-blocks; an untied token_embd.weight takes the mix's base type;
//   - attn_v (and fused attn_qkv) and ffn_down get more bits in some layers:
//     q4_k_m and q5_k_m give Q6_K to the layers use_more_bits picks (the
//     first and last eighth, and every third between), q4_k_s Q5_K to the
//     first 4 attn_v and the first eighth of ffn_down, q3_k_m Q5_K to the
//     first 2 attn_v (Q4_K after) and the first sixteenth of ffn_down (Q4_K
//     after), q2_k Q3_K to ffn_down and attn_output and Q3_K (Q4_K with
//     GQA ≥ 4) to attn_v; a 70B-type llama (80 layers with GQA) gets Q5_K
//     for attn_v tensors that would be Q3_K or Q4_K;
//   - a tensor whose rows are not whole 256-element super-blocks falls back
//     to Q5_0 (for Q4_K), Q5_1 (Q5_K), Q8_0 (Q6_K) or Q4_0 (Q2_K, Q3_K), and
//     to F16 when its rows are not whole 32-element blocks either;
//   - 1-D tensors, norms and names not ending in "weight" keep their type.
//
// Layers are counted as llama.cpp counts them: tensors in order of layer
// number and then name, attn_v by occurrence, ffn_down by layer. The
// Falcon and mixture-of-experts special cases are not implemented (sluice
// runs neither).
type Mix struct {
	Name     string       // "q4_k_m", as llama-quantize's names in lower case
	FileType uint32       // general.file_type, llama.cpp's LLAMA_FTYPE_MOSTLY_*
	Base     tensor.DType // the type of tensors no rule singles out
}

var mixes = []Mix{
	{"q2_k", 10, tensor.Q2_K},
	{"q3_k_m", 12, tensor.Q3_K},
	{"q4_k_s", 14, tensor.Q4_K},
	{"q4_k_m", 15, tensor.Q4_K},
	{"q5_k_s", 16, tensor.Q5_K},
	{"q5_k_m", 17, tensor.Q5_K},
	{"q6_k", 18, tensor.Q6_K},
}

// Mixes lists the supported mixes.
func Mixes() []Mix { return slices.Clone(mixes) }

// ParseMix finds a mix by name (case-insensitive).
func ParseMix(name string) (Mix, bool) {
	want := strings.ToLower(strings.TrimSpace(name))
	for _, m := range mixes {
		if m.Name == want {
			return m, true
		}
	}
	return Mix{}, false
}

func (m Mix) String() string { return m.Name }

// MixTensor is what a mix needs to know of a tensor: its name, its shape
// (outermost first, as tensor.Info: the last dimension is the row length)
// and its current type.
type MixTensor struct {
	Name  string
	Shape []int
	DType tensor.DType
}

// MixModel is what a mix needs to know of the model.
type MixModel struct {
	Arch           string // general.architecture
	Layers         int    // <arch>.block_count
	Heads, KVHeads int    // <arch>.attention.head_count, head_count_kv (0 = Heads)
}

// Plan returns the type of each tensor (in the order given) under m. A
// returned type equal to the tensor's own means "copy it unchanged" only
// for tensors Quantizable rejects; a quantizable F32 tensor is always given
// a quantized type or F16.
func (m Mix) Plan(ts []MixTensor, md MixModel) ([]tensor.DType, error) {
	if md.Layers <= 0 {
		return nil, fmt.Errorf("quant: mix %s: the model has %d layers", m.Name, md.Layers)
	}
	kv := md.KVHeads
	if kv == 0 {
		kv = md.Heads
	}
	gqa := 1
	if kv > 0 {
		gqa = md.Heads / kv
	}
	// llama.cpp's model type 70B: a llama of 80 layers with grouped KV heads.
	is70B := md.Arch == "llama" && md.Layers == 80 && md.Heads != kv
	tied := true
	nAttnV := 0
	for _, t := range ts {
		switch category(t.Name) {
		case catOutput:
			tied = false
		case catAttnV:
			nAttnV++
		}
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, lb := layerOf(ts[a].Name), layerOf(ts[b].Name)
		if la != lb {
			return cmp.Compare(la, lb)
		}
		return strings.Compare(ts[a].Name, ts[b].Name)
	})
	out := make([]tensor.DType, len(ts))
	iAttnV, iDown := 0, 0
	for _, i := range order {
		t := ts[i]
		if !Quantizable(t.Name, t.Shape) {
			out[i] = t.DType
			continue
		}
		cols := t.Shape[len(t.Shape)-1]
		typ := m.Base
		cat := category(t.Name)
		switch {
		case cat == catOutput || tied && cat == catTokenEmbd:
			if cols%typ.BlockSize() != 0 {
				typ = tensor.Q8_0
			} else {
				typ = tensor.Q6_K
			}
		case cat == catTokenEmbd:
		case cat == catAttnV:
			typ = m.attnV(typ, iAttnV, nAttnV, gqa)
			if is70B && (typ == tensor.Q3_K || typ == tensor.Q4_K) {
				typ = tensor.Q5_K
			}
			iAttnV++
		case cat == catFFNDown:
			typ = m.ffnDown(typ, iDown, md.Layers)
			iDown++
		case cat == catAttnOut:
			switch m.FileType {
			case 10:
				typ = tensor.Q3_K
			case 12:
				typ = tensor.Q4_K
			}
		}
		out[i] = fallback(typ, cols)
	}
	return out, nil
}

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth of the
// layers, and every third layer between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

func (m Mix) attnV(typ tensor.DType, i, n, gqa int) tensor.DType {
	switch m.FileType {
	case 10: // q2_k
		if gqa >= 4 {
			return tensor.Q4_K
		}
		return tensor.Q3_K
	case 12: // q3_k_m
		if i < 2 {
			return tensor.Q5_K
		}
		return tensor.Q4_K
	case 15, 17: // q4_k_m, q5_k_m
		if useMoreBits(i, n) {
			return tensor.Q6_K
		}
	case 14: // q4_k_s
		if i < 4 {
			return tensor.Q5_K
		}
	}
	return typ
}

func (m Mix) ffnDown(typ tensor.DType, i, n int) tensor.DType {
	switch m.FileType {
	case 10:
		return tensor.Q3_K
	case 12:
		if i < n/16 {
			return tensor.Q5_K
		}
		return tensor.Q4_K
	case 15, 17:
		if useMoreBits(i, n) {
			return tensor.Q6_K
		}
	case 14:
		if i < n/8 {
			return tensor.Q5_K
		}
	}
	return typ
}

// fallback is llama.cpp's tensor_type_fallback for rows of cols weights.
func fallback(typ tensor.DType, cols int) tensor.DType {
	if cols%typ.BlockSize() == 0 {
		return typ
	}
	switch typ {
	case tensor.Q2_K, tensor.Q3_K:
		typ = tensor.Q4_0
	case tensor.Q4_K:
		typ = tensor.Q5_0
	case tensor.Q5_K:
		typ = tensor.Q5_1
	case tensor.Q6_K:
		typ = tensor.Q8_0
	}
	if cols%typ.BlockSize() != 0 {
		return tensor.F16
	}
	return typ
}

// Quantizable is llama.cpp's tensor_allows_quantization for the tensors of
// the architectures sluice runs: 2-D or more, a name ending in "weight",
// not a norm, not a position or token-type embedding or an expert gate.
func Quantizable(name string, shape []int) bool {
	if len(shape) < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	for _, s := range []string{"_norm.weight", "ffn_gate_inp.weight", "position_embd.weight", "token_types.weight"} {
		if strings.Contains(name, s) {
			return false
		}
	}
	return true
}

type tensorCategory int

const (
	catOther tensorCategory = iota
	catTokenEmbd
	catOutput
	catAttnV // attn_v, attn_qkv, attn_kv_b
	catAttnOut
	catFFNDown
)

// category is llama.cpp's tensor_get_category, for the categories a dense
// mix treats differently.
func category(name string) tensorCategory {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"), strings.Contains(name, "attn_kv_b.weight"),
		strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"), strings.Contains(name, "attn_q.weight"):
		return catOther
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOut
	case strings.Contains(name, "ffn_up"), strings.Contains(name, "ffn_gate"):
		return catOther
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// layerOf is the n of a "blk.n." name, or -1 (llama.cpp's loader order).
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return n
}

// QuantizeMatrix encodes rows×cols float32 weights as t (a ggml type
// QuantizeRow supports, or F16/F32) into a new buffer.
func QuantizeMatrix(src []float32, rows, cols int, t tensor.DType) ([]byte, error) {
	if len(src) != rows*cols {
		return nil, fmt.Errorf("%w: %d values for %d×%d", ErrSize, len(src), rows, cols)
	}
	switch t {
	case tensor.F32:
		return tensor.F32Bytes(src), nil
	case tensor.F16:
		out := make([]byte, 2*len(src))
		for i, v := range src {
			h := tensor.F32ToF16(v)
			out[2*i], out[2*i+1] = byte(h), byte(h>>8)
		}
		return out, nil
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	out := make([]byte, int64(rows)*rb)
	// Rows are independent, so they are encoded by up to GOMAXPROCS
	// goroutines over contiguous row ranges: the bytes do not depend on the
	// split, and a 7B model's K-quant mix (the search of ggml's reference
	// rounding per sub-block) no longer takes one core for many minutes.
	workers := min(runtime.GOMAXPROCS(0), max(1, rows/quantizeMinRows))
	per := (rows + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*per, min(rows, (w+1)*per)
		wg.Go(func() {
			for r := lo; r < hi; r++ {
				if err := tensor.QuantizeRow(out[int64(r)*rb:int64(r+1)*rb], src[r*cols:(r+1)*cols], t); err != nil {
					errs[w] = fmt.Errorf("row %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs { // the first failing range's error, as a sequential loop would report it
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quantizeMinRows is the fewest rows per goroutine in QuantizeMatrix: below
// it a goroutine costs more than the rows it encodes.
const quantizeMinRows = 64
