package tokenizer

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// The patterns of the pre-tokenizer table. Where llama.cpp rewrites a
// Hugging Face pattern (possessive quantifiers, (?i:…), \p{…} next to
// non-ASCII literals), the table holds llama.cpp's form: it is what the
// vocabularies are checked against.
const (
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// patLlama3 is Llama 3's (?i:'s|'t|'re|'ve|'m|'ll|'d)|… with the
	// case-insensitive group spelled out.
	patLlama3   = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen2    = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patNewlines = `[^\n]+|[\n]+`
	// patDigitGroups is not a pattern for the matcher: llama.cpp's name for
	// its AFMoE digit splitter (splitDigitGroups).
	patDigitGroups = `\p{AFMoE_digits}`
	patTinyAya     = `\d{1,3}(?=(?:\d{3})*\b)`
	patContr       = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	patBloom       = " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"
	// GPT-4o's upper-then-lower and upper-run word rules; llama.cpp writes
	// [\p{Lu}…]* as ((?=[\p{L}])([^a-z]))* because its collapsed view has no
	// case outside ASCII.
	patWordsCased = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+`
	patWordsUpper = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*`
	patDeepseekV3 = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
	patCJKJapan   = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
	patCJKKorean  = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
	patDeepseekL  = "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"
	patAfmoeCJK   = "[\u4E00-\u9FFF\u3400-\u4DBF\u8C48-\uFAFF\u3040-\u309F\u30A0-\u30FF\uFF65-\uFF9F\u2F00-\u2FDF\u0E40-\u0E7F\u0E80-\u0EFF\u1780-\u17FF\u1000-\u109F\uAA60-\uAA7F\uA9E0-\uA9FF\uAC00-\uD7AF\u1100-\u11FF]+"
	patDeepseekP  = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"
)

// preType is one of llama.cpp's pre-tokenizer types (LLAMA_VOCAB_PRE_TYPE_*):
// its pattern sequence and the flags llama.cpp sets for it.
type preType struct {
	name     string   // llama.cpp's type, lower case ("llama3", "qwen2", …)
	patterns []string // applied in order (unicode_regex_split)
	// ignoreMerges: a pre-token that is a whole piece is emitted as is,
	// without merging (HF ignore_merges).
	ignoreMerges bool
	addBOS       bool // add_bos default (the GGUF key overrides it)
	noBOS        bool // no default BOS id (ChatGLM), before the GGUF key
	// raw: SentencePiece-style BPE (llama.cpp's byte_encode off, with
	// escape_whitespaces on): the pieces are raw UTF-8 with "▁" for a
	// space, spaces in the text become "▁" before splitting, merges run on
	// UTF-8 characters, and a piece missing from the vocabulary falls back
	// to its bytes' "<0xXX>" pieces (dropped where there is none).
	raw bool
	// newlineWhole: a pre-token of newlines only that is itself a piece is
	// that piece, not merged (llama.cpp's Gemma 4 rule).
	newlineWhole bool
	// forceBOS: add_bos is true even when the GGUF key says false
	// (llama.cpp's Gemma 4 override).
	forceBOS bool
}

var preTypes = map[string]preType{
	"default":        {patterns: []string{`[\p{P}\$\+<=>\^~\|]+`, patGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}},
	"llama3":         {patterns: []string{patLlama3}, ignoreMerges: true, addBOS: true},
	"dbrx":           {patterns: []string{patLlama3}},
	"smaug":          {patterns: []string{patLlama3}},
	"deepseek-llm":   {patterns: []string{"[\r\n]", patDeepseekL, patDeepseekP, `\s+$`, patCJKKorean, `\p{N}+`}},
	"deepseek3-llm":  {patterns: []string{`\p{N}{1,3}`, patCJKJapan, patDeepseekV3}},
	"deepseek-coder": {patterns: []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, patCJKKorean, `\p{N}`}},
	"falcon":         {patterns: []string{"[\\p{P}\\$\\+<=>\\^~\\|`]+", patGPT2, `[0-9][0-9][0-9]`}},
	"starcoder":      {patterns: []string{`\p{N}`, patGPT2}},
	"gpt2":           {patterns: []string{patGPT2}},
	"qwen2":          {patterns: []string{patQwen2}},
	"qwen35":         {patterns: []string{`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"poro":           {patterns: []string{patBloom}},
	"bloom":          {patterns: []string{patBloom}},
	"chatglm4":       {patterns: []string{patLlama3}, noBOS: true},
	"viking":         {patterns: []string{patBloom, `\p{N}`}},
	"tekken":         {patterns: []string{patWordsCased + `|` + patWordsUpper + `|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true, addBOS: true},
	"chameleon":      {patterns: []string{`<sentinel:[0-9]+>`, `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`, `([\t\n]|    |  )`, `\p{N}`, "[\\p{P}!-/:-@\\[-`{-~]", patGPT2}, addBOS: true},
	"gpt4o":          {patterns: []string{patWordsCased + patContr + `?|` + patWordsUpper + patContr + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"superbpe":       {patterns: []string{`\p{N}+`, `(?=(\d{3})+(?!\d))`}},
	"bailingmoe":     {patterns: []string{`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`}},
	"seed-coder":     {patterns: []string{`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"ufakzeka":       {patterns: []string{`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"afmoe":          {patterns: []string{patDigitGroups, patAfmoeCJK, "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
	"tiny_aya":       {patterns: []string{patTinyAya, `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` + patContr + `?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` + patContr + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"minicpm5":       {patterns: []string{`\p{N}{1,3}`, `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true},
	"laguna":         {patterns: []string{patNewlines, patQwen2}},
	// Gemma 4 and Sarvam: SentencePiece-style BPE, cut at newlines only.
	"gemma4":     {patterns: []string{patNewlines}, raw: true, newlineWhole: true, addBOS: true, forceBOS: true},
	"sarvam-moe": {patterns: []string{patNewlines}, raw: true},
	"kimi-k2":    {patterns: []string{patKimiK2}},
}

// preNames maps every tokenizer.ggml.pre value llama.cpp accepts for a
// byte-level vocabulary (llama_vocab::load), and that sluice implements, to its
// pattern family (named after llama.cpp's pre-tokenizer type with those
// patterns and flags); "" (no key) is llama.cpp's fallback, "default".
var preNames = map[string]string{
	"": "default", "default": "default",
	"llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "falcon3": "llama3", "falcon-h1": "llama3",
	"pixtral": "llama3", "midm-2.0": "llama3", "lfm2": "llama3", "jina-v5-nano": "llama3",
	"deepseek-llm": "deepseek-llm", "deepseek-coder": "deepseek-coder", "deepseek-v3": "deepseek3-llm",
	"hunyuan-dense": "deepseek3-llm", "joyai-llm": "deepseek3-llm", "hy_v4": "deepseek3-llm",
	"falcon": "falcon", "mpt": "gpt2", "starcoder": "starcoder",
	"gpt-2": "gpt2", "phi-2": "gpt2", "jina-es": "gpt2", "jina-de": "gpt2", "gigachat": "gpt2", "jina-v2-es": "gpt2",
	"jina-v2-de": "gpt2", "a.x-4.0": "gpt2", "mellum": "gpt2", "modern-bert": "gpt2", "exaone4": "gpt2",
	"jina-v1-en": "gpt2", "jina-v2-code": "gpt2", "roberta-bpe": "gpt2",
	"refact": "starcoder", "command-r": "starcoder", "smollm": "starcoder", "codeshell": "starcoder",
	"exaone": "starcoder", "minerva-7b": "starcoder", "mellum2": "starcoder",
	"qwen2": "qwen2", "deepseek-r1-qwen": "qwen2", "kormo": "qwen2", "f2llmv2": "qwen2", "megrez": "qwen2",
	"stablelm2": "qwen2", "hunyuan": "qwen2", "solar-open": "qwen2", "grok-2": "qwen2",
	"qwen35": "qwen35",
	"olmo":   "gpt2", "dbrx": "dbrx", "smaug-bpe": "smaug", "poro-chat": "poro",
	"glm4": "chatglm4", "chatglm-bpe": "chatglm4", "viking": "viking", "jais": "gpt2",
	"tekken": "tekken", "bloom": "bloom", "gpt3-finnish": "bloom", "chameleon": "chameleon",
	"gpt-4o": "gpt4o", "llama4": "gpt4o", "kanana2": "gpt4o", "talkie": "gpt4o", "minimax-m2": "gpt4o",
	"tiny_aya": "tiny_aya", "cohere2moe": "tiny_aya", "superbpe": "superbpe", "trillion": "gpt2",
	"granite-docling": "gpt2", "bailingmoe": "bailingmoe", "bailingmoe2": "bailingmoe", "llada-moe": "bailingmoe",
	"seed-coder": "seed-coder", "ufakzeka": "ufakzeka", "afmoe": "afmoe", "laguna": "laguna", "minicpm5": "minicpm5",
	"gemma4": "gemma4", "granite-embed-multi-311m": "gemma4", "sarvam-moe": "sarvam-moe", "kimi-k2": "kimi-k2",
}

// cleanSpacesOff are the names for which llama.cpp turns clean_spaces (HF
// clean_up_tokenization_spaces) off; it is on for every other byte-level name.
// llama.cpp applies it in llama_detokenize only, not to streamed pieces;
// sluice's Decode keeps the text as the pieces spell it, and PreTokenizerInfo
// reports the flag.
var cleanSpacesOff = map[string]bool{
	"deepseek-llm": true, "deepseek-coder": true, "deepseek-v3": true, "command-r": true,
	"qwen2": true, "deepseek-r1-qwen": true, "kormo": true, "f2llmv2": true, "qwen35": true,
	"poro-chat": true, "viking": true, "tekken": true, "smollm": true, "chameleon": true,
	"gpt-4o": true, "llama4": true, "kanana2": true, "talkie": true, "tiny_aya": true, "cohere2moe": true,
	"superbpe": true, "trillion": true, "granite-docling": true, "bailingmoe": true, "bailingmoe2": true,
	"llada-moe": true, "seed-coder": true, "hunyuan": true, "hunyuan-dense": true, "hy_v4": true,
	"joyai-llm": true, "ufakzeka": true, "grok-2": true, "afmoe": true, "laguna": true,
	"minimax-m2": true, "solar-open": true, "sarvam-moe": true, "kimi-k2": true,
}

// preTokenizer is a name's compiled pre-tokenizer.
type preTokenizer struct {
	name   string // the tokenizer.ggml.pre value
	typ    string // its llama.cpp type
	steps  []splitter
	ignore bool // ignoreMerges
	addBOS bool
	noBOS  bool
	clean  bool
	// raw, newlineWhole, forceBOS: the preType flags.
	raw, newlineWhole, forceBOS bool
}

// The hand-written splitters, keyed by the pattern they implement.
var customSplitters = map[string]splitter{
	patGPT2:        splitGPT2,
	patLlama3:      splitLlama3,
	patQwen2:       splitQwen2,
	patNewlines:    splitNewlines,
	patDigitGroups: splitDigitGroups,
	patTinyAya:     splitDigitGroups, // llama.cpp runs the AFMoE splitter for it
	patKimiK2:      splitKimiK2,
}

var (
	compiledOnce sync.Once
	compiled     map[string]*preTokenizer
	compileErr   error
)

// compilePre builds the tokenizer of every type (once).
func compilePre() (map[string]*preTokenizer, error) {
	compiledOnce.Do(func() {
		byType := map[string][]splitter{}
		for typ, pt := range preTypes {
			var steps []splitter
			for _, pat := range pt.patterns {
				if c, ok := customSplitters[pat]; ok {
					steps = append(steps, c)
					continue
				}
				p, err := compileRx(pat)
				if err != nil {
					compileErr = fmt.Errorf("tokenizer: pre-tokenizer %s: %w", typ, err)
					return
				}
				steps = append(steps, func(t *preText, lo, hi int, emit func(int)) {
					p.split(t.view(p.collapsed), lo, hi, emit)
				})
			}
			byType[typ] = steps
		}
		compiled = map[string]*preTokenizer{}
		for name, typ := range preNames {
			pt := preTypes[typ]
			compiled[name] = &preTokenizer{name: name, typ: typ, steps: byType[typ],
				ignore: pt.ignoreMerges, addBOS: pt.addBOS, noBOS: pt.noBOS, clean: !cleanSpacesOff[name],
				raw: pt.raw, newlineWhole: pt.newlineWhole, forceBOS: pt.forceBOS}
		}
	})
	return compiled, compileErr
}

func lookupPre(name string) (*preTokenizer, bool) {
	m, err := compilePre()
	if err != nil {
		panic(err) // the table is fixed: TestPreTable compiles it
	}
	p, ok := m[name]
	return p, ok
}

// PreTokenizers lists the tokenizer.ggml.pre values NewBPE and FromGGUF
// accept, sorted ("" is the missing key).
func PreTokenizers() []string {
	return slices.Sorted(maps.Keys(preNames))
}

// PreTokenizerInfo describes a tokenizer.ggml.pre value as llama.cpp treats it.
type PreTokenizerInfo struct {
	Name     string   // the value
	Type     string   // its pattern family (a llama.cpp pre-tokenizer type with these patterns and flags)
	Patterns []string // the pattern sequence
	// IgnoreMerges, AddBOS, CleanSpaces: llama.cpp's ignore_merges,
	// add_bos default and clean_spaces for it (clean_spaces is reported,
	// not applied: see preType).
	IgnoreMerges, AddBOS, CleanSpaces bool
	// SPMStyle: the pieces are raw UTF-8 with "▁" for spaces and "<0xXX>"
	// byte pieces, not byte-level (llama.cpp's byte_encode off).
	SPMStyle bool
}

// LookupPreTokenizer returns what the table says of a tokenizer.ggml.pre value.
func LookupPreTokenizer(name string) (PreTokenizerInfo, bool) {
	p, ok := lookupPre(name)
	if !ok {
		return PreTokenizerInfo{}, false
	}
	return PreTokenizerInfo{Name: name, Type: p.typ, Patterns: slices.Clone(preTypes[p.typ].patterns),
		IgnoreMerges: p.ignore, AddBOS: p.addBOS, CleanSpaces: p.clean, SPMStyle: p.raw}, true
}

// split cuts s into pre-tokens and calls emit with each.
func (p *preTokenizer) split(t *preText, s string, emit func(string)) {
	t.reset(s)
	n := len(t.cp)
	if n == 0 {
		return
	}
	bounds, next := append(t.bounds[:0], n), t.next
	for _, step := range p.steps {
		next = next[:0]
		lo := 0
		for _, hi := range bounds {
			if hi > lo {
				step(t, lo, hi, func(end int) { next = append(next, end) })
			}
			lo = hi
		}
		bounds, next = next, bounds
	}
	t.bounds, t.next = bounds, next
	lo := 0
	for _, hi := range bounds {
		if hi > lo {
			emit(s[t.off[lo]:t.off[hi]])
		}
		lo = hi
	}
}

// unknownPre is the error for a tokenizer.ggml.pre value the table lacks.
func unknownPre(name string) error {
	known := slices.DeleteFunc(PreTokenizers(), func(s string) bool { return s == "" })
	return fmt.Errorf("pre-tokenizer %q (%s) is not one sluice knows; known: %s (force one with --tokenizer-pre NAME): %w",
		name, keyPre, strings.Join(known, ", "), ErrUnsupported)
}
