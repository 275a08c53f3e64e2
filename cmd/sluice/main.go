// Command sluice runs open-weight language models as a dataflow graph of stages.
//
// main only calls run; run owns flags, the global logger and progress bars, so
// it can be tested in-process with its own stdin, stdout and stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/kernels"
	"golang.org/x/term"
)

// command is one subcommand (the go tool's base.Command, trimmed).
type command struct {
	name, usage, short string
	run                func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch: its streams and the process-wide logger.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            zerolog.Logger
	stderrTTY      bool
}

var commands []*command

func init() {
	commands = []*command{
		{"generate", "generate [-m MODEL (default: the built-in stories260K)] [--tokenizer TOK] [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--threads N] [--pipeline FILE] [--lora DIR[:scale]]...", "generate text from a prompt", cmdGenerate},
		{"run", runUsage, "run a batch of prompts (a file, or an OpenAI Batch file) through a pipeline", cmdRun},
		{"tokenize", "tokenize -m MODEL_OR_VOCAB [--tokenizer TOK] [--bos] [--parse-special] [--tokenizer-pre NAME] [--inp CASES.inp]", "print the token ids of standard input", cmdTokenize},
		{"inspect", "inspect MODEL [--json]", "show a model's architecture, tensors and memory needs", cmdInspect},
		{"validate", "validate PIPELINE", "check a pipeline file and show what it would build", cmdValidate},
		{"gen-model", "gen-model --preset tiny|tiny-k|15m|110m|1b|7b --dtype f32|f16|bf16|q8_0|q4_0 [--arch A] [--layers N] [--seed S] -o FILE.gguf", "write a seeded synthetic model (llama, llama3, qwen2, qwen3, phi3, gemma2, gemma3)", cmdGenModel},
		{"eval", "eval -m MODEL [--tokenizer T] --text FILE [--ref MODEL2 [--ref-tokenizer T2]] [--ctx N] [--json] | eval --make-text -m MODEL -o FILE [--tokens N] [--seed S]", "perplexity, KL divergence and top-1 agreement over a text", cmdEval},
		{"lora", "lora merge -m BASE [--tokenizer T] --adapter DIR[:scale] -o OUT [--scale S] [--permute-qk]", "merge PEFT LoRA adapters into a new model file", cmdLora},
		{"convert", "convert IN -o OUT.gguf [--tokenizer TOKENIZER.bin] [--tokenizer-pre NAME] [--name NAME]", "convert a llama2.c .bin or a Hugging Face llama/mistral/qwen2 directory (with its tokenizer.json) to GGUF", cmdConvert},
		{"bench", "bench -m MODEL [--tokenizer TOK] [--threads N] [--prompt-tokens 512] [--gen-tokens 128] [--runs 5] [--json]", "measure prefill and decode speed", cmdBench},
		{"quantize", "quantize -m IN [--tokenizer TOK] -o OUT.gguf --type q8_0|q4_0|int8-gN|int4-gN|nf4", "write a copy of a model with quantized weight matrices", cmdQuantize},
		{"serve", serveUsage, "serve the OpenAI-compatible HTTP API", cmdServe},
		{"prune", "prune -m IN [--tokenizer TOK] -o OUT.gguf (--sparsity S [--global] | --nm N:M)", "write a copy of a model with magnitude-pruned weight matrices", cmdPrune},
		{"grammar", grammarUsage, "check a text against a GBNF grammar or JSON Schema (as generation would constrain it)", cmdGrammar},
		{"version", "version", "print the version of this build", cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if err != errUsage {
			fmt.Fprintln(os.Stderr, "sluice:", err)
		}
		os.Exit(exitCode(err))
	}
}

var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.code
	}
	return 1
}

// run is the whole program.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	global := flag.NewFlagSet("sluice", flag.ContinueOnError)
	global.SetOutput(stderr)
	level := global.String("log-level", "warn", "log level: debug, info, warn, error")
	global.Usage = func() { usage(stderr) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // usage printed
		}
		return errUsage
	}
	args = global.Args()
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, stderrTTY: isTTY(stderr)}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if e.stderrTTY {
		e.log = zerolog.New(zerolog.ConsoleWriter{Out: stderr}).Level(lvl).With().Timestamp().Logger()
	} else {
		e.log = zerolog.New(stderr).Level(lvl).With().Timestamp().Logger()
	}
	name := args[0]
	if name == "help" {
		if len(args) == 1 {
			usage(stdout)
			return nil
		}
		// "help CMD" is "CMD -h" with the usage on stdout.
		if c := lookup(args[1]); c != nil && len(args) == 2 {
			he := *e
			he.stderr = stdout
			return helpOK(c.run(e.log.WithContext(ctx), &he, []string{"-h"}))
		}
		fmt.Fprintf(stderr, "sluice help: unknown command %q\n", strings.Join(args[1:], " "))
		usage(stderr)
		return errUsage
	}
	if c := lookup(name); c != nil {
		return helpOK(c.run(e.log.WithContext(ctx), e, args[1:]))
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", name)
	usage(stderr)
	return errUsage
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// helpOK turns a command's -h (flag.ErrHelp: its usage is printed) into
// success.
func helpOK(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice runs open-weight language models as a dataflow graph of stages.")
	fmt.Fprintln(w, "\nUsage: sluice [--log-level L] <command> [flags]\n\nCommands:")
	cs := append([]*command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w, "\nRun 'sluice help <command>' or 'sluice <command> -h' for a command's flags.")
}

// flags makes a command's flag set, printing its usage line on -h.
func (e *env) flags(c string) *flag.FlagSet {
	fs := flag.NewFlagSet(c, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	// The global flags are taken after the command too: sluice run … --log-level info.
	fs.Func("log-level", "log level: debug, info, warn, error (as before the command)", func(s string) error {
		lvl, err := zerolog.ParseLevel(s)
		if err == nil {
			e.log = e.log.Level(lvl)
		}
		return err
	})
	fs.Usage = func() {
		if cmd := lookup(c); cmd != nil {
			fmt.Fprintf(fs.Output(), "Usage: sluice %s\n\n%s.\n", cmd.usage, cmd.short)
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags that may be interleaved with positional arguments. On
// -h it returns flag.ErrHelp (the usage is printed), which run treats as
// success; on a bad flag, errUsage.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// cmdVersion prints the module version, the VCS revision and the Go version
// this binary was built from.
func cmdVersion(_ context.Context, e *env, args []string) error {
	fs := e.flags("version")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("version: unexpected arguments %q: %w", pos, errUsage)
	}
	fmt.Fprintln(e.stdout, version())
	fmt.Fprintf(e.stdout, "kernels: %s (this CPU; SLUICE_ISA=%s caps it)\n", kernels.Impl(), strings.Join(kernels.ISANames(), "|"))
	return nil
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "sluice (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	out := "sluice " + v
	if rev != "" {
		out += " " + rev[:min(len(rev), 12)] + dirty
		if when != "" {
			out += " " + when
		}
	}
	return out + " " + bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// setFlags reports which flags were given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("want exactly one %s, got %d argument(s): %s: %w", what, len(args), strings.Join(args, " "), errUsage)
	}
	return args[0], nil
}
