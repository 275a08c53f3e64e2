package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tokenizer"
)

type benchStats struct {
	Median, Min, Max float64
}

type benchReport struct {
	Model        string `json:"model"`
	Kernels      string `json:"kernels"`
	Threads      int    `json:"threads"`
	PromptTokens int    `json:"prompt_tokens"`
	// PromptText is whether the prompt is given text (--prompt,
	// --prompt-file), not random tokens.
	PromptText bool `json:"prompt_text,omitempty"`
	// TextMD5 is the MD5 of sequence 0's generated text (the same in every
	// run: bench fails otherwise), to compare greedy text across settings.
	TextMD5     string  `json:"text_md5,omitempty"`
	GenTokens   int     `json:"gen_tokens"`
	Runs        int     `json:"runs"`
	Parallel    int     `json:"parallel"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"` // aggregate over the parallel sequences
	// PerSeqDecodeTokS is one sequence's decode rate (llama-batched-bench's S_TG per sequence).
	PerSeqDecodeTokS float64            `json:"per_seq_decode_tok_s"`
	Prefill          benchStats         `json:"prefill"`
	Decode           benchStats         `json:"decode"`
	PerSeqDecode     benchStats         `json:"per_seq_decode"`
	PeakRSSBytes     int64              `json:"peak_rss_bytes"`
	BusyShare        map[string]float64 `json:"stage_busy_share"`
	// Spec is what speculative decoding did over all runs (absent without --spec).
	Spec *specReport `json:"spec,omitempty"`
	// Offload is the ssd tier's traffic (absent for ram and mmap).
	Offload *offloadReport `json:"offload,omitempty"`
	// KV is what the KV budget did over all runs (--kv-budget); DraftKV is
	// the same for the draft model's cache, which has its share of it.
	KV      *kvReport `json:"kv_spill,omitempty"`
	DraftKV *kvReport `json:"draft_kv_spill,omitempty"`
	// SharedPrefix is --shared-prefix: tokens in front of every prompt
	// (PromptTokens does not count them); Prefix is what the prefix cache
	// did over all runs (absent with --prefix-cache=false).
	SharedPrefix int           `json:"shared_prefix,omitempty"`
	Prefix       *prefixReport `json:"prefix_cache,omitempty"`
	// Grammar is what masking cost under --json-schema / --grammar.
	Grammar *grammarReport `json:"grammar,omitempty"`
	// Temperature and Seed are --temp and --seed when sampling (absent:
	// greedy).
	Temperature float64 `json:"temperature,omitempty"`
	Seed        uint64  `json:"seed,omitempty"`
	// CPUSeconds is the process's user+system CPU time over all runs
	// (prefill and decode; model loading excluded), and CPUMsPerToken that
	// over every generated token: on a shared machine a ratio of CPU times
	// is steadier than one of wall-clock rates.
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	CPUMsPerToken float64 `json:"cpu_ms_per_token,omitempty"`
}

// grammarReport is the grammar processors' time over all runs: rows masked
// (target and draft rows alike) and the mean time per row, and the same
// time per generated token (the time includes the masks jump-forward's
// Forced calls compute, which later rows find cached).
type grammarReport struct {
	Rows          int64   `json:"masked_rows"`
	PerRowMicros  float64 `json:"mask_us_per_row"`
	PerTokMicros  float64 `json:"mask_us_per_token"`
	MaskSeconds   float64 `json:"mask_seconds"`
	GeneratedToks int     `json:"generated_tokens"`
	// JumpForward is off with --no-jump-forward. JumpedTokens are the
	// tokens the grammar forced that jump-forward took without a target
	// pass of their own (sluice.Result.JumpedTokens): the target passes it
	// saved. TargetPasses counts every target pass of the runs (the
	// prompts' too), and TokensPerPass is the generated tokens of all
	// sequences per target pass.
	JumpForward   bool    `json:"jump_forward"`
	JumpedTokens  int     `json:"jumped_tokens"`
	TargetPasses  int64   `json:"target_passes"`
	TokensPerPass float64 `json:"tokens_per_target_pass"`
	// Completed of Sequences (over all runs) ended because their value was
	// complete (finish "stop"), not at --gen-tokens: a run's token mix (keys,
	// strings, numbers, the end) depends on how far the values got.
	Completed int `json:"completed_sequences"`
	Sequences int `json:"sequences"`
}

// prefixReport is the prefix cache's counters summed over the runs (each
// run is a new engine with an empty cache).
type prefixReport struct {
	Lookups     int64 `json:"lookups"`
	Hits        int64 `json:"hits"`
	HitPages    int64 `json:"hit_pages"`
	HitTokens   int64 `json:"hit_tokens"`
	Published   int64 `json:"published_pages"`
	Evictions   int64 `json:"evictions"`
	CachedBytes int64 `json:"cached_bytes"` // idle cached pages at the end of the last run
}

func (k *prefixReport) add(s kvcache.PrefixStats) {
	k.Lookups += s.Lookups
	k.Hits += s.Hits
	k.HitPages += s.HitPages
	k.HitTokens += s.HitTokens
	k.Published += s.Published
	k.Evictions += s.Evictions
	k.CachedBytes = s.CachedBytes
}

type offloadReport struct {
	Budget         int64   `json:"budget_bytes"`
	Resident       int64   `json:"resident_bytes"` // pinned set + ring + chunk cache
	PinnedBytes    int64   `json:"pinned_bytes"`
	StreamedLayers int     `json:"streamed_layers"`
	RingBuffers    int     `json:"ring_buffers"`
	PrefetchAhead  int     `json:"prefetch_ahead"`
	BytesPerToken  float64 `json:"streamed_bytes_per_decode_token"` // read from the disk
	// The chunk cache (what the budget leaves after pins and ring): its
	// size, and over the counted runs its chunk hits and misses and the
	// bytes per token it served instead of the disk.
	CacheBytes         int64   `json:"chunk_cache_bytes"`
	ChunkHits          int64   `json:"chunk_hits"`
	ChunkMisses        int64   `json:"chunk_misses"`
	HitRate            float64 `json:"chunk_hit_rate"`
	CacheBytesPerToken float64 `json:"cache_bytes_per_decode_token"`
	LateLoads          int64   `json:"late_loads"`
	Loads              int64   `json:"loads"`
	WaitSeconds        float64 `json:"wait_seconds"`
	// PackedTensors counts streamed tensors laid out in panels after their
	// read, PackSeconds the time that took (off the compute's path).
	PackedTensors   int64   `json:"packed_tensors"`
	PackSeconds     float64 `json:"pack_seconds"`
	DiskBytesPerSec float64 `json:"disk_read_bytes_per_s,omitempty"` // --disk-bandwidth
	DiskDirect      bool    `json:"disk_read_direct,omitempty"`
	// BoundTokS is the decode rate the disk allows: bandwidth / bytes streamed per token.
	BoundTokS float64 `json:"disk_bound_tok_s,omitempty"`
}

// kvReport counts frames (one layer of one KV page) over all runs.
type kvReport struct {
	Budget         int64 `json:"budget_bytes"`
	FrameBytes     int64 `json:"frame_bytes"`
	Frames         int   `json:"frames"`      // the budget holds in memory
	PassFrames     int   `json:"pass_frames"` // of which a step may pin
	Hits           int64 `json:"hits"`
	Misses         int64 `json:"misses"`
	Spills         int64 `json:"spills"`
	Reloads        int64 `json:"reloads"`
	BytesWritten   int64 `json:"bytes_written"`
	BytesRead      int64 `json:"bytes_read"`
	CleanEvictions int64 `json:"clean_evictions"`
}

func (k *kvReport) add(s kvcache.SpillStats) {
	k.Budget, k.FrameBytes, k.Frames, k.PassFrames = s.Budget, s.FrameBytes, s.Frames, s.PassFrames
	k.Hits += s.Hits
	k.Misses += s.Misses
	k.Spills += s.Spills
	k.Reloads += s.Reloads
	k.BytesWritten += s.BytesWritten
	k.BytesRead += s.BytesRead
	k.CleanEvictions += s.CleanEvictions
}

type specReport struct {
	Mode          string  `json:"mode"`
	TargetPasses  int64   `json:"target_passes"` // verifying passes, per sequence
	TokensPerPass float64 `json:"tokens_per_target_pass"`
	DraftPasses   int64   `json:"draft_passes"`
	DraftNodes    int64   `json:"draft_nodes"` // rows drafts added to target batches
	// ForcedNodes are the draft nodes a grammar forced, which entered the
	// drafts without a draft pass (jump-forward); DraftPassesPerToken is
	// draft passes per generated token.
	ForcedNodes         int64   `json:"forced_draft_nodes"`
	DraftPassesPerToken float64 `json:"draft_passes_per_token"`
	MaxAccepted         int     `json:"max_accepted_depth"`
	DraftSeconds        float64 `json:"draft_seconds"`
	TotalSeconds        float64 `json:"total_seconds"` // wall time of the runs, draft included
	// Budget is the draft_tree budget asked for ("auto" or a number);
	// Budgets counts the target passes (rounds) at each tree budget used,
	// LastBudget is the last one (with auto: where the chooser settled).
	Budget     string           `json:"budget,omitempty"`
	Budgets    map[string]int64 `json:"budgets,omitempty"`
	LastBudget int              `json:"last_budget,omitempty"`
	// TargetPasses by row count: how many, and their mean wall time.
	PassSeconds map[string]passReport `json:"target_pass_seconds,omitempty"`
}

type passReport struct {
	N     int64   `json:"n"`
	Mean  float64 `json:"mean"`
	Total float64 `json:"total"`
}

// add accumulates the budget and pass-time statistics of one engine.
func (r *specReport) add(ss decode.SpecStats) {
	for b, n := range ss.Budgets {
		if r.Budgets == nil {
			r.Budgets = map[string]int64{}
		}
		r.Budgets[strconv.Itoa(b)] += n
	}
	if ss.Budget > 0 {
		r.LastBudget = ss.Budget
	}
	for rows, pt := range ss.Passes {
		if r.PassSeconds == nil {
			r.PassSeconds = map[string]passReport{}
		}
		k := strconv.Itoa(rows)
		p := r.PassSeconds[k]
		p.N += pt.N
		p.Total += pt.Total.Seconds()
		p.Mean = p.Total / float64(p.N)
		r.PassSeconds[k] = p
	}
}

// budgetLine and passLine render Budgets and PassSeconds by ascending key.
func (r *specReport) budgetLine() string {
	var parts []string
	for _, k := range sortedNumKeys(r.Budgets) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, r.Budgets[k]))
	}
	return strings.Join(parts, ", ")
}

func (r *specReport) passLine() string {
	var parts []string
	for _, k := range sortedNumKeys(r.PassSeconds) {
		p := r.PassSeconds[k]
		parts = append(parts, fmt.Sprintf("%s rows %.3fs (%d)", k, p.Mean, p.N))
	}
	return strings.Join(parts, ", ")
}

func sortedNumKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return keys
}

func stats(xs []float64) benchStats {
	s := slices.Clone(xs)
	slices.Sort(s)
	return benchStats{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

// cmdBench measures prefill and decode through the same graph generate uses:
// random prompt tokens (fixed seed) or a given text, greedy decoding that
// ignores stop tokens. Under --json-schema or --grammar every row is masked
// and a sequence ends where its value ends (the grammar then allows only an
// end token), so it may generate fewer than --gen-tokens; the report adds
// the mask time.
func cmdBench(ctx context.Context, e *env, args []string) error {
	fs := e.flags("bench")
	mf := addModelFlags(fs, "m")
	sf := addSpecFlags(fs)
	eos := addEOSFlag(fs)
	promptTokens := fs.Int("prompt-tokens", 512, "prompt length in tokens (prefill) of random tokens")
	promptText := fs.String("prompt", "", "the prompt as `TEXT`, tokenized with the model's vocabulary (BOS as the pipeline adds it), for every sequence, instead of --prompt-tokens random tokens: a draft predicts real text, not random tokens")
	promptFile := fs.String("prompt-file", "", "read the prompt text from `FILE` (as --prompt)")
	genTokens := fs.Int("gen-tokens", 128, "tokens to generate (decode)")
	runs := fs.Int("runs", 5, "runs; figures are the median, min and max")
	parallel := fs.Int("parallel", 1, "sequences decoded together in one batch (aggregate and per-sequence tok/s)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	ahead := fs.Int("prefetch-ahead", -1, "layers ahead the store is asked to load (0: prefetch off; default: the pipeline's)")
	timelineSVG := fs.String("timeline", "", "write the last decode passes' per-layer weight reads and compute (ssd tier) to this `FILE.svg`")
	diskBW := fs.Bool("disk-bandwidth", false, "ssd tier: first measure the O_DIRECT read bandwidth of the model file (as the store reads it) and report the decode rate it allows")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	temp := fs.Float64("temp", 0, "sampling temperature; 0 is greedy. Above 0 the sampler keeps top-k 40 and top-p 0.95 with min-p off (llama.cpp's defaults as node-llama-cpp sets them), so both engines draw from the same distribution")
	seed := fs.Uint64("seed", 1, "sampling seed with --temp (every run uses it, so runs repeat their text)")
	sharedPrefix := fs.Int("shared-prefix", 0, "put the same `N` random tokens in front of every sequence's prompt (the prefix cache computes them once; prefill tok/s counts them)")
	gf := addGrammarFlags(fs)
	noJump := fs.Bool("no-jump-forward", false, "under a grammar, feed every forced token in a pass of its own (and draft it with a draft pass), as before jump-forward: the baseline")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	constraint, _, _, err := gf.spec("bench")
	if err != nil {
		return err
	}
	if *noJump && constraint == nil {
		return fmt.Errorf("bench: --no-jump-forward needs a grammar (--json-schema, --json-schema-file, --grammar, --grammar-file): %w", errUsage)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["prompt"] && set["prompt-file"] {
		return fmt.Errorf("bench: --prompt and --prompt-file both given: %w", errUsage)
	}
	if (set["prompt"] || set["prompt-file"]) && set["prompt-tokens"] {
		return fmt.Errorf("bench: --prompt-tokens is for random prompts; a --prompt or --prompt-file is as long as its text: %w", errUsage)
	}
	if *promptFile != "" {
		b, err := os.ReadFile(*promptFile)
		if err != nil {
			return fmt.Errorf("bench: --prompt-file: %w", err)
		}
		*promptText = string(b)
	}
	usePrompt := set["prompt"] || set["prompt-file"]
	if usePrompt && *promptText == "" {
		return fmt.Errorf("bench: the prompt is empty: %w", errUsage)
	}
	if *promptTokens < 1 || *genTokens < 1 || *runs < 1 || *parallel < 1 {
		return fmt.Errorf("bench: --prompt-tokens, --gen-tokens, --runs and --parallel must be ≥ 1: %w", errUsage)
	}
	if *sharedPrefix < 0 {
		return fmt.Errorf("bench: --shared-prefix = %d, want ≥ 0: %w", *sharedPrefix, errUsage)
	}
	if *temp < 0 {
		return fmt.Errorf("bench: --temp %v: want ≥ 0 (0: greedy): %w", *temp, errUsage)
	}
	preset := "greedy"
	if *temp > 0 {
		preset = "sample"
	}
	p, err := pipelines.Preset(preset)
	if err != nil {
		return err
	}
	if *temp > 0 {
		s, _ := p.StageOfKind(pipelines.KindSample)
		ps := s.Params.(*pipelines.SampleParams)
		ps.Temperature, ps.TopK, ps.TopP, ps.MinP, ps.Seed = *temp, 40, 0.95, 0, seed
	}
	mf.apply(p)
	if err := sf.noBeams("bench"); err != nil {
		return err
	}
	if err := sf.apply(p); err != nil {
		return err
	}
	lp, _ := p.StageOfKind(pipelines.KindTransformerLayers)
	if *ahead >= 0 && lp != nil {
		lp.Params.(*pipelines.TransformerLayersParams).PrefetchAhead = *ahead
	}
	l, err := loadModel(ctx, e, p)
	if err != nil {
		return err
	}
	defer l.Close()
	var draft *model.Loaded
	if p.Draft != nil && p.Draft.Path != "" {
		if draft, err = sluice.OpenDraft(ctx, p, l, e.log); err != nil {
			return err
		}
		defer draft.Close()
	}
	a := l.Model.Arch()
	if err := eos.check(a.Vocab); err != nil {
		return err
	}
	var textPrompt []int32
	if usePrompt {
		if l.Tokenizer == nil {
			return fmt.Errorf("bench: --prompt needs a vocabulary: %s has none (give --tokenizer)", p.Model.Path)
		}
		textPrompt = l.Tokenizer.Encode(*promptText, tokenizer.EncodeOptions{BOS: p.AddBOS()})
		if len(textPrompt) == 0 {
			return fmt.Errorf("bench: the prompt %q encodes to no tokens", *promptText)
		}
		*promptTokens = len(textPrompt)
	}
	promptLen := *sharedPrefix + *promptTokens // every sequence's
	if promptLen+*genTokens > a.Context {
		return fmt.Errorf("bench: %d prompt (%d shared) + %d generated tokens exceed the model's context of %d", promptLen, *sharedPrefix, *genTokens, a.Context)
	}
	sp, _ := p.StageOfKind(pipelines.KindScheduler)
	sc := sp.Params.(*pipelines.SchedulerParams)
	sc.MaxNewTokens, sc.StopAtEOS, sc.MaxInFlight = *genTokens, false, *parallel
	// Prompts go in whole (one chunk each), and a step holds them all.
	sc.PrefillChunk, sc.MaxBatchTokens = promptLen, promptLen**parallel
	p.Model.Context = promptLen + *genTokens
	if ps := p.Sampler(); ps != nil {
		ps.NoJumpForward = *noJump
	} else if *noJump {
		return fmt.Errorf("bench: --no-jump-forward: the pipeline has no sample stage")
	}
	if needs := p.Needs(); needs.Rows > 0 {
		// Room for every sequence's draft too, and, since a draft reaching
		// past the context decodes plainly, context for every generated
		// token to be speculated.
		sc.MaxBatchTokens = max(sc.MaxBatchTokens, (needs.Rows+1)**parallel)
		p.Model.Context = min(a.Context, p.Model.Context+needs.Reach)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shared := make([]int32, *sharedPrefix)
	for j := range shared {
		shared[j] = int32(rng.IntN(a.Vocab))
	}
	prompts := make([][]int32, *parallel)
	for i := range prompts {
		prompts[i] = slices.Clone(shared)
		if textPrompt != nil {
			prompts[i] = append(prompts[i], textPrompt...)
			continue
		}
		for range *promptTokens {
			prompts[i] = append(prompts[i], int32(rng.IntN(a.Vocab)))
		}
	}
	var prefill, dec, perSeq []float64
	var spec *specReport
	var specEmitted int64
	if dp, ok := p.StageOfKind(pipelines.KindDraftTree); ok {
		dtp := dp.Params.(*pipelines.DraftTreeParams)
		spec = &specReport{Mode: dtp.Mode}
		if dtp.Mode == "specexec" {
			spec.Budget = dtp.Budget.String()
		}
	}
	busy := map[string]time.Duration{}
	var total time.Duration
	var off *offloadReport
	var kv, draftKV *kvReport
	var prefix *prefixReport
	var st0 offload.Stats
	var decodeTokens int
	var textMD5 string
	var gram *grammarReport
	if constraint != nil {
		gram = &grammarReport{JumpForward: !*noJump}
	}
	if st := l.Store.Stats(); st.RingBuffers > 0 || st.StreamedLayers > 0 || st.Pinned > 0 {
		off = &offloadReport{Budget: p.Model.MemBudget, Resident: st.Resident(), PinnedBytes: st.Pinned,
			StreamedLayers: st.StreamedLayers, RingBuffers: st.RingBuffers, CacheBytes: st.CacheBytes}
		if lp != nil {
			off.PrefetchAhead = lp.Params.(*pipelines.TransformerLayersParams).PrefetchAhead
		}
		if *diskBW {
			bw, direct, err := offload.ReadBandwidth(p.Model.Path, st.RingBytes/int64(max(st.RingBuffers, 1)), 1<<30)
			if err != nil {
				return err
			}
			off.DiskBytesPerSec, off.DiskDirect = bw, direct
		}
	}
	cpu0, cpuOK := processCPU()
	for run := range *runs {
		if run == *runs-1 && *timelineSVG != "" {
			if tl, ok := l.Store.(offload.Timeliner); ok {
				tl.StartTimeline()
			}
		}
		eng, err := sluice.New(l, sluice.Options{Pipeline: p, Logger: e.log, Draft: draft})
		if err != nil {
			return err
		}
		var mu sync.Mutex
		var res []sluice.Result
		for i, pr := range prompts {
			err := eng.Submit(ctx, sluice.Request{ID: strconv.Itoa(i), Index: uint64(i), Tokens: pr, StopTokens: *eos, Grammar: constraint}, func(r sluice.Result) {
				mu.Lock()
				res = append(res, r)
				mu.Unlock()
			})
			if err != nil {
				eng.Close()
				return err
			}
		}
		if err := eng.Drain(ctx); err != nil {
			return err
		}
		if gram != nil {
			gs := &eng.Grammars().Stats
			gram.Rows += gs.Rows()
			gram.MaskSeconds += gs.Time().Seconds()
			gram.TargetPasses += eng.Stats().Steps
		}
		if !p.Cache.NoPrefixCache {
			if prefix == nil {
				prefix = &prefixReport{}
			}
			prefix.add(eng.Stats().Cache.Prefix)
		}
		if sp := eng.Stats().Cache.Spill; sp.Budget > 0 {
			if kv == nil {
				kv = &kvReport{}
			}
			kv.add(sp)
		}
		if spec != nil {
			ss := eng.SpecStats()
			if ss.KV.Budget > 0 {
				if draftKV == nil {
					draftKV = &kvReport{}
				}
				draftKV.add(ss.KV)
			}
			spec.TargetPasses += ss.Rounds
			spec.DraftPasses += ss.DraftPasses
			spec.DraftNodes += ss.DraftNodes
			spec.ForcedNodes += ss.ForcedNodes
			spec.MaxAccepted = max(spec.MaxAccepted, ss.MaxDepth)
			spec.DraftSeconds += ss.DraftTime.Seconds()
			spec.add(ss)
			specEmitted += ss.Emitted
		}
		if len(res) != len(prompts) {
			return fmt.Errorf("bench: %d of %d sequences finished", len(res), len(prompts))
		}
		for _, r := range res {
			if r.ID != "0" {
				continue
			}
			sum := md5.Sum([]byte(r.Completion))
			h := hex.EncodeToString(sum[:])
			if textMD5 != "" && h != textMD5 {
				return fmt.Errorf("bench: run %d generated another text than run 1 (md5 %s, not %s): greedy or seeded decoding must repeat", run+1, h, textMD5)
			}
			textMD5 = h
		}
		// Prefill: all prompt tokens over the time to the last first token;
		// decode: the tokens after each first token over the span from the
		// last first token to the last end (all sequences decoding together).
		if run == 0 {
			st0 = l.Store.Stats()
		}
		var start, firstAll, endAll time.Time
		var decoded int
		var seqRate float64
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("bench: generation failed: %w", r.Err)
			}
			if start.IsZero() || r.Start.Before(start) {
				start = r.Start
			}
			if r.FirstToken.After(firstAll) {
				firstAll = r.FirstToken
			}
			if r.End.After(endAll) {
				endAll = r.End
			}
			decoded += max(r.CompletionTokens-1, 0)
			if gram != nil {
				gram.Sequences++
				if r.Finish == sluice.FinishStop {
					gram.Completed++
				}
			}
			decodeTokens += r.CompletionTokens
			if gram != nil {
				gram.JumpedTokens += r.JumpedTokens
			}
			if r.CompletionTokens > 1 { // an --eos-id may end a sequence at its first token
				seqRate += float64(r.CompletionTokens-1) / r.End.Sub(r.FirstToken).Seconds()
			}
		}
		prefill = append(prefill, float64(len(prompts)*promptLen)/firstAll.Sub(start).Seconds())
		if spec != nil {
			spec.TotalSeconds += endAll.Sub(start).Seconds()
		}
		dec = append(dec, float64(decoded)/endAll.Sub(firstAll).Seconds())
		perSeq = append(perSeq, seqRate/float64(len(res)))
		for _, st := range eng.NodeStats() {
			if st.Kind == "source" {
				continue // a source's generator waits on its input: not work
			}
			busy[st.Name] += st.Busy
			total += st.Busy
		}
	}
	cpu1, _ := processCPU()
	r := benchReport{
		Model: p.Model.Path, Kernels: kernels.Impl(), Threads: l.Pool.Threads(), PromptTokens: *promptTokens, GenTokens: *genTokens, Runs: *runs,
		Parallel: *parallel, Prefill: stats(prefill), Decode: stats(dec), PerSeqDecode: stats(perSeq),
		PeakRSSBytes: peakRSS(), BusyShare: map[string]float64{}, PromptText: usePrompt, TextMD5: textMD5,
	}
	r.PrefillTokS, r.DecodeTokS, r.PerSeqDecodeTokS = r.Prefill.Median, r.Decode.Median, r.PerSeqDecode.Median
	if *temp > 0 {
		r.Temperature, r.Seed = *temp, *seed
	}
	if cpuOK {
		r.CPUSeconds = (cpu1 - cpu0).Seconds()
		r.CPUMsPerToken = 1e3 * r.CPUSeconds / float64(max(decodeTokens, 1))
	}
	if spec != nil && spec.TargetPasses > 0 {
		spec.TokensPerPass = float64(specEmitted) / float64(spec.TargetPasses)
	}
	if spec != nil {
		spec.DraftPassesPerToken = float64(spec.DraftPasses) / float64(max(decodeTokens, 1))
	}
	r.Spec = spec
	if gram != nil {
		gram.GeneratedToks = decodeTokens
		gram.PerRowMicros = 1e6 * gram.MaskSeconds / float64(max(gram.Rows, 1))
		gram.PerTokMicros = 1e6 * gram.MaskSeconds / float64(max(decodeTokens, 1))
		gram.TokensPerPass = float64(decodeTokens) / float64(max(gram.TargetPasses, 1))
		r.Grammar = gram
	}
	r.KV, r.DraftKV = kv, draftKV
	r.SharedPrefix, r.Prefix = *sharedPrefix, prefix
	if off != nil {
		st := l.Store.Stats()
		// Streamed bytes per token over the runs after the first (prefill
		// passes stream the same layers once for the whole prompt chunk).
		n := decodeTokens
		if *runs > 1 {
			n = decodeTokens * (*runs - 1) / *runs
			st.BytesStreamed -= st0.BytesStreamed
			st.BytesFromCache -= st0.BytesFromCache
			st.ChunkHits -= st0.ChunkHits
			st.ChunkMisses -= st0.ChunkMisses
		}
		off.BytesPerToken = float64(st.BytesStreamed) / float64(max(n, 1))
		off.CacheBytesPerToken = float64(st.BytesFromCache) / float64(max(n, 1))
		off.ChunkHits, off.ChunkMisses, off.HitRate = st.ChunkHits, st.ChunkMisses, st.HitRate()
		off.Loads, off.LateLoads, off.WaitSeconds = st.Loads, st.LateLoads, st.Wait.Seconds()
		off.PackedTensors, off.PackSeconds = st.Packed, st.PackTime.Seconds()
		if off.DiskBytesPerSec > 0 && off.BytesPerToken > 0 {
			off.BoundTokS = off.DiskBytesPerSec / off.BytesPerToken
		}
		r.Offload = off
	}
	if *timelineSVG != "" {
		tl, ok := l.Store.(offload.Timeliner)
		if !ok {
			return fmt.Errorf("bench: --timeline needs the ssd tier (--tier ssd)")
		}
		f, err := os.Create(*timelineSVG)
		if err != nil {
			return err
		}
		if err := writeTimeline(f, tl.Timeline(), 3); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	for k, v := range busy {
		if total > 0 {
			r.BusyShare[k] = float64(v) / float64(total)
		}
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(r)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%s kernels, %d threads)\n", r.Model, r.Kernels, r.Threads)
	what := "random tokens"
	if r.PromptText {
		what = "tokens of text"
	}
	if r.SharedPrefix > 0 {
		what += fmt.Sprintf(" after %d shared", r.SharedPrefix)
	}
	fmt.Fprintf(tw, "prefill\t%.1f tok/s\t(min %.1f, max %.1f; %d %s, %d runs)\n", r.Prefill.Median, r.Prefill.Min, r.Prefill.Max, r.PromptTokens, what, r.Runs)
	fmt.Fprintf(tw, "decode\t%.1f tok/s\t(min %.1f, max %.1f; %d tokens × %d sequences)\n", r.Decode.Median, r.Decode.Min, r.Decode.Max, r.GenTokens, r.Parallel)
	if g := r.Grammar; g != nil {
		fmt.Fprintf(tw, "grammar mask\t%.1f µs per token\t(%.1f µs per masked row, %d rows for %d tokens; %d of %d values complete)\n", g.PerTokMicros, g.PerRowMicros, g.Rows, g.GeneratedToks, g.Completed, g.Sequences)
		fmt.Fprintf(tw, "jump-forward\t%v: %d forced tokens took no pass\t(%d target passes, %.2f generated tokens per pass)\n", g.JumpForward, g.JumpedTokens, g.TargetPasses, g.TokensPerPass)
	}
	if r.Parallel > 1 {
		fmt.Fprintf(tw, "decode per sequence\t%.1f tok/s\n", r.PerSeqDecode.Median)
	}
	if r.CPUSeconds > 0 {
		fmt.Fprintf(tw, "cpu\t%.2f ms per generated token\t(%.2f s user+system over the runs, prefill included)\n", r.CPUMsPerToken, r.CPUSeconds)
	}
	if r.Temperature > 0 {
		fmt.Fprintf(tw, "sampling\ttemperature %g, seed %d\n", r.Temperature, r.Seed)
	}
	fmt.Fprintf(tw, "peak rss\t%s\n", humanBytes(r.PeakRSSBytes))
	if o := r.Offload; o != nil {
		fmt.Fprintf(tw, "offload\tresident %s (budget %s): pinned %s, %d layers streamed through %d buffers, prefetch %d ahead\n",
			offload.FormatBytes(o.Resident), offload.FormatBytes(o.Budget), offload.FormatBytes(o.PinnedBytes), o.StreamedLayers, o.RingBuffers, o.PrefetchAhead)
		fmt.Fprintf(tw, "streamed\t%s per token from disk\t(%d layer reads, %d late, %.2f s waited)\n", offload.FormatBytes(int64(o.BytesPerToken)), o.Loads, o.LateLoads, o.WaitSeconds)
		if o.PackedTensors > 0 {
			fmt.Fprintf(tw, "panels\t%d streamed tensors laid out after their read\t(%.2f s, overlapping reads and compute)\n", o.PackedTensors, o.PackSeconds)
		}
		if o.CacheBytes > 0 {
			fmt.Fprintf(tw, "chunk cache\t%s per token from %s of cache\t(%d hits, %d misses: hit rate %.3f)\n",
				offload.FormatBytes(int64(o.CacheBytesPerToken)), offload.FormatBytes(o.CacheBytes), o.ChunkHits, o.ChunkMisses, o.HitRate)
		}
		if o.DiskBytesPerSec > 0 {
			fmt.Fprintf(tw, "disk\t%s/s read (O_DIRECT %v): allows %.2f tok/s\n", offload.FormatBytes(int64(o.DiskBytesPerSec)), o.DiskDirect, o.BoundTokS)
		}
	}
	for _, kr := range []struct {
		name string
		r    *kvReport
	}{{"kv", r.KV}, {"draft kv", r.DraftKV}} {
		if k := kr.r; k != nil {
			fmt.Fprintf(tw, "%s budget\t%s: %d frames of %s, a step pins up to %d\n", kr.name, offload.FormatBytes(k.Budget), k.Frames, offload.FormatBytes(k.FrameBytes), k.PassFrames-2)
			fmt.Fprintf(tw, "%s spill\t%d hits, %d misses; %d frames spilled (%s), %d reloaded (%s), %d evicted clean\n",
				kr.name, k.Hits, k.Misses, k.Spills, offload.FormatBytes(k.BytesWritten), k.Reloads, offload.FormatBytes(k.BytesRead), k.CleanEvictions)
		}
	}
	if k := r.Prefix; k != nil {
		fmt.Fprintf(tw, "prefix cache\t%d of %d lookups hit: %d tokens (%d pages) mapped; %d pages published, %d evicted, %s cached at the end\n",
			k.Hits, k.Lookups, k.HitTokens, k.HitPages, k.Published, k.Evictions, offload.FormatBytes(k.CachedBytes))
	}
	if r.TextMD5 != "" {
		fmt.Fprintf(tw, "text md5\t%s\t(sequence 0's generated text)\n", r.TextMD5)
	}
	if sp := r.Spec; sp != nil {
		fmt.Fprintf(tw, "spec %s\t%.2f tokens per target pass\t(%d target passes, %d draft passes, %d draft nodes, draft %.0f%% of the time)\n",
			sp.Mode, sp.TokensPerPass, sp.TargetPasses, sp.DraftPasses, sp.DraftNodes, 100*sp.DraftSeconds/max(sp.TotalSeconds, 1e-9))
		if sp.ForcedNodes > 0 || r.Grammar != nil {
			fmt.Fprintf(tw, "spec forced\t%d draft nodes without a draft pass\t(%.3f draft passes per generated token)\n", sp.ForcedNodes, sp.DraftPassesPerToken)
		}
		if len(sp.Budgets) > 0 {
			fmt.Fprintf(tw, "spec budget %s\trounds by tree budget: %s\t(last %d)\n", sp.Budget, sp.budgetLine(), sp.LastBudget)
		}
		if len(sp.PassSeconds) > 0 {
			fmt.Fprintf(tw, "target passes\t%s\t(mean wall time by rows, count)\n", sp.passLine())
		}
	}
	names := make([]string, 0, len(r.BusyShare))
	for k := range r.BusyShare {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if r.BusyShare[a] > r.BusyShare[b] {
			return -1
		}
		return 1
	})
	for _, k := range names[:min(len(names), 8)] {
		fmt.Fprintf(tw, "busy %s\t%.1f%%\n", k, 100*r.BusyShare[k])
	}
	return tw.Flush()
}

// peakRSS reads VmHWM from /proc (0 where unavailable).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
