package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama" // registers the llama architecture
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tokenizer"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

// modelFlags are the flags every command that loads a model shares; a given
// flag overrides the pipeline file's [model] table.
type modelFlags struct {
	fs                   *flag.FlagSet
	model, tok, tier     *string
	tokPre               *string
	threads, ctx, pageTk *int
	budget               int64
	kvBudget             int64
	spillDir             *string
	kvType               string
	prefixCache          *bool
	prefixCacheSize      int64
}

func addModelFlags(fs *flag.FlagSet, modelName string) *modelFlags {
	m := &modelFlags{
		fs:          fs,
		model:       fs.String(modelName, "", "model file: .gguf, or a llama2.c .bin (then --tokenizer is needed)"),
		tok:         fs.String("tokenizer", "", "llama2.c tokenizer.bin"),
		tokPre:      fs.String("tokenizer-pre", "", "byte-level BPE pre-tokenizer `NAME` to use instead of the GGUF's tokenizer.ggml.pre"),
		tier:        fs.String("tier", "", "where weights live: auto (default: ram when the file fits in half the available memory and the budget, else mmap, or ssd with --mem-budget), ram, mmap or ssd (pin what fits, stream the other layers from the file)"),
		threads:     fs.Int("threads", 0, "kernel threads (default: all cores)"),
		ctx:         fs.Int("ctx", 0, "KV tokens per sequence (default: the model's context)"),
		pageTk:      fs.Int("page-tokens", 0, "KV cache page size in tokens"),
		spillDir:    fs.String("spill-dir", "", "directory of the KV spill file under --kv-budget (default: the system's temp directory)"),
		prefixCache: fs.Bool("prefix-cache", true, "reuse the KV pages of prompt prefixes earlier requests computed ([cache] prefix_cache in a pipeline)"),
	}
	fs.Func("prefix-cache-size", "bound on cached KV `BYTES` no request holds, with a unit: 256MiB (default: --kv-budget when set, else the KV pool)", func(s string) error {
		n, err := offload.ParseBytes(s)
		m.prefixCacheSize = n
		return err
	})
	fs.Func("mem-budget", "bound on resident weight `BYTES`, with a unit: 512MiB, 2GB, 1.5GiB (default: none)", func(s string) error {
		n, err := offload.ParseBytes(s)
		m.budget = n
		return err
	})
	fs.Func("kv-budget", "bound on KV-cache `BYTES` in memory, with a unit: 64MiB, 1GB (default: none); pages beyond it go to a spill file and are read back when needed", func(s string) error {
		n, err := offload.ParseBytes(s)
		m.kvBudget = n
		return err
	})
	fs.Func("kv-type", "KV cache element `TYPE`: f16 (binary16 pages: half the memory and attention bandwidth) or f32 (default: "+pipelines.DefaultKVType+"; [cache] kv_type in a pipeline)", func(s string) error {
		if s != "f16" && s != "f32" {
			return fmt.Errorf("%q, want f16 or f32", s)
		}
		m.kvType = s
		return nil
	})
	return m
}

func (m *modelFlags) apply(p *pipelines.Pipeline) {
	set := setFlags(m.fs)
	if *m.model != "" {
		p.Model.Path = *m.model
	}
	if *m.tok != "" {
		p.Model.Tokenizer = *m.tok
	}
	if *m.tokPre != "" {
		p.Model.TokenizerPre = *m.tokPre
	}
	if *m.tier != "" {
		p.Model.Tier = *m.tier
	}
	if set["threads"] {
		p.Model.Threads = *m.threads
	}
	if set["ctx"] {
		p.Model.Context = *m.ctx
	}
	if set["page-tokens"] {
		p.Model.PageTokens = *m.pageTk
	}
	if set["mem-budget"] {
		p.Model.MemBudget = m.budget
	}
	if set["kv-budget"] {
		p.Cache.KVBudget = m.kvBudget
	}
	if set["spill-dir"] {
		p.Cache.SpillDir = *m.spillDir
	}
	if set["kv-type"] {
		p.Cache.KVType = m.kvType
	}
	if set["prefix-cache"] {
		p.Cache.NoPrefixCache = !*m.prefixCache
	}
	if set["prefix-cache-size"] {
		p.Cache.PrefixCacheSize = m.prefixCacheSize
	}
}

// loadModel opens the pipeline's model, drawing a progress bar on a terminal.
// Adapter sets (--lora) are read and registered on the model after it loads.
func loadModel(ctx context.Context, e *env, p *pipelines.Pipeline, adapters ...loraSet) (*model.Loaded, error) {
	if p.Model.Path == "" {
		return nil, fmt.Errorf("no model: give -m MODEL or set [model] path in %s: %w", p.Source, errUsage)
	}
	tier, err := offload.ParseTier(p.Model.Tier)
	if err != nil {
		return nil, err
	}
	var bar *progressbar.ProgressBar
	progress := func(done, total int64) {
		if !e.stderrTTY || tier == offload.Mmap || tier == offload.SSD {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(e.stderr), progressbar.OptionShowBytes(true),
				progressbar.OptionSetDescription("loading"), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		bar.Set64(done)
	}
	l, err := model.Load(ctx, model.LoadOptions{
		Path: p.Model.Path, Tokenizer: p.Model.Tokenizer, TokenizerPre: p.Model.TokenizerPre, Tier: tier, Threads: p.Model.Threads,
		Logger: e.log, Progress: progress, Budget: p.Model.MemBudget,
	})
	if bar != nil {
		bar.Finish()
	}
	if err == nil {
		if err = loadAdapters(l, adapters); err != nil {
			l.Close()
			l = nil
		}
	}
	return l, err
}

// seedPipeline gives the sample stage a seed when the file and flags gave none,
// and logs it so the run can be repeated.
func seedPipeline(e *env, p *pipelines.Pipeline) {
	s, ok := p.StageOfKind(pipelines.KindSample)
	if !ok {
		return
	}
	ps := s.Params.(*pipelines.SampleParams)
	if ps.Seed == nil {
		var b [8]byte
		rand.Read(b[:])
		seed := binary.LittleEndian.Uint64(b[:]) >> 1
		ps.Seed = &seed
		if ps.Temperature > 0 {
			e.log.Info().Uint64("seed", seed).Msg("no --seed given: picked one")
		}
	}
}

// openEngine loads the pipeline's model (with a progress bar on a terminal and
// the adapter sets registered) and starts an engine on it.
func openEngine(ctx context.Context, e *env, p *pipelines.Pipeline, adapters ...loraSet) (*sluice.Engine, error) {
	l, err := loadModel(ctx, e, p, adapters...)
	if err != nil {
		return nil, err
	}
	var draft *model.Loaded
	if p.Draft != nil && p.Draft.Path != "" {
		if draft, err = sluice.OpenDraft(ctx, p, l, e.log); err != nil {
			l.Close()
			return nil, err
		}
	}
	eng, err := sluice.New(l, sluice.Options{Pipeline: p, Logger: e.log, Draft: draft})
	if err != nil {
		l.Close()
		if draft != nil {
			draft.Close()
		}
		return nil, err
	}
	return eng, nil
}

// closeEngine stops the engine, logs the per-stage metrics and closes the model.
func closeEngine(e *env, eng *sluice.Engine) error {
	err := eng.Close()
	for _, s := range eng.NodeStats() {
		e.log.Debug().Str("node", s.Name).Int64("in", s.In).Int64("out", s.Out).Dur("busy", s.Busy).
			Dur("blocked_send", s.BlockedOnSend).Dur("blocked_recv", s.BlockedOnRecv).Msg("stage")
	}
	err = errors.Join(err, eng.Loaded().Close())
	if d := eng.Draft(); d != nil {
		err = errors.Join(err, d.Close())
	}
	if st := eng.SpecStats(); st.Rounds > 0 {
		e.log.Info().Int64("target_passes", st.Rounds).Float64("tokens_per_pass", st.TokensPerPass()).
			Int64("draft_passes", st.DraftPasses).Dur("draft_time", st.DraftTime).Int("max_accepted", st.MaxDepth).
			Interface("budgets", st.Budgets).Int("last_budget", st.Budget).Msg("speculative decoding")
	}
	return err
}

func cmdGenerate(ctx context.Context, e *env, args []string) error {
	fs := e.flags("generate")
	mf := addModelFlags(fs, "m")
	sf := addSpecFlags(fs)
	eos := addEOSFlag(fs)
	prompt := fs.String("p", "", "prompt (default: empty, generation starts from BOS)")
	promptIDs := fs.String("prompt-ids", "", "the prompt as token ids separated by spaces or commas (\"1 15043 3186\"), used as given: no BOS is added (instead of -p)")
	n := fs.Int("n", 256, "new tokens to generate (0: until a stop token or the context is full)")
	temp := fs.Float64("temp", 0.8, "temperature; 0 is greedy")
	topK := fs.Int("top-k", 40, "top-k (0: off)")
	topP := fs.Float64("top-p", 0.95, "top-p nucleus mass (1: off)")
	minP := fs.Float64("min-p", 0.05, "min-p relative to the most likely token (0: off)")
	repeat := fs.Float64("repeat-penalty", 1, "repetition penalty (1: off)")
	seed := fs.Uint64("seed", 0, "sampling seed (default: random, logged at info level)")
	pipeline := fs.String("pipeline", "", "pipeline file (default: the greedy or sample preset)")
	chatMode := fs.Bool("chat", false, "render the prompt as one user message through the chat template and print only the reply")
	tmplName := fs.String("chat-template", "", "with --chat: "+strings.Join(chat.Builtins(), ", ")+" or a Jinja file (default: the model's own)")
	lf := addLoraFlags(fs, "all of them apply")
	asJSON := fs.Bool("json", false, "print one JSON object: prompt and generated ids, text, finish reason, speculation stats")
	gf := addGrammarFlags(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	set := setFlags(fs)
	constraint, _, _, err := gf.spec("generate")
	if err != nil {
		return err
	}
	if *sf.beams > 0 && !set["temp"] {
		*temp = 0 // beam search does not sample; an explicit --temp above 0 is refused
	}
	var p *pipelines.Pipeline
	switch {
	case *pipeline != "":
		p, err = pipelines.Load(*pipeline)
	case *temp == 0:
		p, err = pipelines.Preset("greedy")
	default:
		p, err = pipelines.Preset("sample")
	}
	if err != nil {
		return err
	}
	mf.apply(p)
	if err := sf.apply(p); err != nil {
		return err
	}
	if s, ok := p.StageOfKind(pipelines.KindSample); ok {
		ps := s.Params.(*pipelines.SampleParams)
		if set["temp"] || *pipeline == "" {
			ps.Temperature = *temp
		}
		if set["top-k"] || *pipeline == "" {
			ps.TopK = *topK
		}
		if set["top-p"] || *pipeline == "" {
			ps.TopP = *topP
		}
		if set["min-p"] || *pipeline == "" {
			ps.MinP = *minP
		}
		if set["repeat-penalty"] {
			ps.RepeatPenalty = *repeat
		}
		if set["seed"] {
			ps.Seed = seed
		}
	}
	seedPipeline(e, p)
	if p.Model.Path == "" && p.Model.Tokenizer == "" {
		// No model named: the one built in (package models).
		path, tok, remove, err := models.WriteStories260K("")
		if err != nil {
			return err
		}
		defer remove()
		p.Model.Path, p.Model.Tokenizer = path, tok
		e.log.Info().Msg("no -m: generating with the built-in stories260K")
	}
	if s, ok := p.StageOfKind(pipelines.KindScheduler); ok && (set["n"] || *pipeline == "") {
		s.Params.(*pipelines.SchedulerParams).MaxNewTokens = *n
	}
	sets := oneSet(lf.specs())
	eng, err := openEngine(ctx, e, p, sets...)
	if err != nil {
		return err
	}
	defer closeEngine(e, eng)
	beam, err := sf.beam()
	if err != nil {
		return err
	}
	if err := eos.check(eng.Loaded().Model.Arch().Vocab); err != nil {
		return err
	}
	req := sluice.Request{ID: "generate", Tokens: eng.Encode(*prompt), Beam: beam, Grammar: constraint}
	if *promptIDs != "" {
		if *prompt != "" || *chatMode {
			return fmt.Errorf("generate: --prompt-ids replaces -p and --chat; give one of them: %w", errUsage)
		}
		if req.Tokens, err = parsePromptIDs(*promptIDs); err != nil {
			return err
		}
	}
	if len(sets) > 0 {
		req.Adapter = sets[0].Name
	}
	if *chatMode {
		if req.Tokens, req.StopTokens, err = chatPrompt(eng, *tmplName, *prompt); err != nil {
			return err
		}
	}
	req.StopTokens = eos.stops(req.StopTokens)
	if *asJSON || beam != nil {
		res, _ := eng.Complete(ctx, req)
		if *asJSON {
			return writeGenerateJSON(e, eng, res)
		}
		if _, err := io.WriteString(e.stdout, res.Text+"\n"); err != nil {
			return err
		}
		return res.Err
	}
	// The prompt's text first (not in chat mode, which prints only the
	// reply), then each token's as it is sampled, as llama2.c's run.c
	// streams them.
	if !*chatMode {
		if _, err := io.WriteString(e.stdout, eng.Text(req.Tokens)); err != nil {
			return err
		}
	}
	st, err := eng.Generate(ctx, req)
	if err != nil {
		return err
	}
	for t, ok := st.Next(context.Background()); ok; t, ok = st.Next(context.Background()) {
		if _, err := io.WriteString(e.stdout, t.Text); err != nil {
			return err
		}
	}
	res := st.Result()
	if _, err := io.WriteString(e.stdout, "\n"); err != nil {
		return err
	}
	return res.Err
}

// parsePromptIDs reads --prompt-ids: decimal token ids separated by spaces
// and/or commas. Range checks against the vocabulary are the engine's (the
// request then fails naming the position and the id).
func parsePromptIDs(s string) ([]int32, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(fields) == 0 {
		return nil, fmt.Errorf("generate: --prompt-ids %q holds no token id: %w", s, errUsage)
	}
	ids := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("generate: --prompt-ids item %d is %q, want a token id (a non-negative integer): %w", i+1, f, errUsage)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// chatPrompt renders prompt as one user message with the chat template
// (named, or the model's own) and returns its tokens and the template's
// end-of-turn token ids.
func chatPrompt(eng *sluice.Engine, name, prompt string) ([]int32, []int32, error) {
	l := eng.Loaded()
	var t *chat.Template
	var err error
	if name != "" {
		t, err = chat.Load(name)
	} else {
		t, err = chat.ForModel(l.Source.GGUF, l.Tokenizer)
	}
	if err != nil {
		return nil, nil, err
	}
	bos, eos := chat.Specials(l.Tokenizer)
	text, err := t.Render([]chat.Message{{Role: "user", Content: prompt}}, chat.Options{AddGenerationPrompt: true, BOS: bos, EOS: eos})
	if err != nil {
		return nil, nil, err
	}
	addBOS := eng.Pipeline().AddBOS() && (bos == "" || !strings.HasPrefix(text, bos))
	stops, _ := t.Stops(l.Tokenizer)
	return l.Tokenizer.Encode(text, tokenizer.EncodeOptions{BOS: addBOS, ParseSpecial: true}), stops, nil
}

func cmdValidate(ctx context.Context, e *env, args []string) error {
	fs := e.flags("validate")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneArg(pos, "PIPELINE")
	if err != nil {
		return err
	}
	p, err := pipelines.Load(path)
	if err != nil {
		return err
	}
	p.Describe(e.stdout)
	return nil
}

// generateJSON is generate --json's object.
type generateJSON struct {
	PromptIDs    []int32     `json:"prompt_ids"`
	GeneratedIDs []int32     `json:"generated_ids"`
	Text         string      `json:"text"`
	Completion   string      `json:"completion"`
	Finish       string      `json:"finish_reason"`
	CachedTokens int         `json:"cached_tokens"` // prompt tokens the prefix cache supplied
	Error        string      `json:"error,omitempty"`
	Spec         *specReport `json:"spec,omitempty"`
	Beams        []beamJSON  `json:"beams,omitempty"`
}

// beamJSON is one sequence a beam search returned.
type beamJSON struct {
	IDs   []int32 `json:"ids"`
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

func writeGenerateJSON(e *env, eng *sluice.Engine, r sluice.Result) error {
	j := generateJSON{PromptIDs: r.Tokens[:r.PromptTokens], GeneratedIDs: r.Tokens[r.PromptTokens:], Text: r.Text, Completion: r.Completion, Finish: r.Finish, CachedTokens: r.CachedTokens}
	if j.GeneratedIDs == nil {
		j.GeneratedIDs = []int32{}
	}
	if r.Err != nil {
		j.Error = r.Err.Error()
	}
	for _, b := range r.Beams {
		j.Beams = append(j.Beams, beamJSON{IDs: b.Tokens, Text: b.Text, Score: b.Score})
	}
	if st := eng.SpecStats(); st.Rounds > 0 {
		j.Spec = &specReport{TargetPasses: st.Rounds, TokensPerPass: st.TokensPerPass(), DraftPasses: st.DraftPasses,
			DraftNodes: st.DraftNodes, MaxAccepted: st.MaxDepth, DraftSeconds: st.DraftTime.Seconds()}
		j.Spec.add(st)
		if ds, ok := eng.Pipeline().StageOfKind(pipelines.KindDraftTree); ok {
			dtp := ds.Params.(*pipelines.DraftTreeParams)
			j.Spec.Mode = dtp.Mode
			if dtp.Mode == "specexec" {
				j.Spec.Budget = dtp.Budget.String()
			}
		}
	}
	enc := json.NewEncoder(e.stdout)
	if err := enc.Encode(j); err != nil {
		return err
	}
	return r.Err
}
