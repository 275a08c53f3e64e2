// Command sluice-beam is a runnable Beam pipeline around sluicebeam.Generate:
// it reads a prompt file (JSON lines with "custom_id" and "prompt", or
// OpenAI Batch /v1/completions lines), completes every prompt and writes one
// JSON result per line.
//
//	go run ./cmd/sluice-beam --model tiny.gguf --prompts prompts.jsonl --out results.jsonl
//
// It runs on prism, in-process, by default. On a distributed runner every
// worker opens --model itself, so the file must be at that path on each of
// them (see the README): for Flink or Spark through a portable job server,
//
//	go run ./cmd/sluice-beam --runner universal --endpoint localhost:8099 \
//	    --environment_type DOCKER --environment_config IMAGE ...
//
// and for Dataflow, --runner dataflow with its --project, --region and
// --staging_location.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// prompts and results
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // plain paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/s3"    // s3:// prompts and results
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners" // the --runner flag
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/etl/sluicebeam"
)

var (
	modelPath = flag.String("model", "", "model file, at this path on every worker")
	tokenizer = flag.String("tokenizer", "", "llama2.c tokenizer.bin (for a .bin model)")
	pipeline  = flag.String("pipeline", "greedy", "sluice preset name")
	maxNew    = flag.Int("n", 0, "max new tokens per prompt without max_tokens (default: the pipeline's)")
	inFlight  = flag.Int("max-in-flight", 0, "prompts per forward pass on each worker (default: the pipeline's)")
	prompts   = flag.String("prompts", "", "prompt file (JSONL)")
	out       = flag.String("out", "", "results file (JSONL)")
)

func init() {
	register.Function3x1(parseLine)
	register.Function2x1(resultLine)
	register.Function1x1(errorLine)
	register.Emitter1[sluicebeam.Prompt]()
	register.Emitter1[sluicebeam.Result]()
}

// parseLine reads one prompt line; a line that is not one becomes an error
// Result, so one bad line never fails the job.
func parseLine(line string, emit func(sluicebeam.Prompt), bad func(sluicebeam.Result)) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	r, err := batch.NewReader(strings.NewReader(line), "prompts", batch.Auto).Next()
	if errors.Is(err, io.EOF) {
		return nil
	}
	switch {
	case err != nil:
		return err
	case r.Err != nil:
		bad(sluicebeam.Result{CustomID: r.CustomID, Error: r.Err.Error()})
	case r.CustomID == "line-1":
		bad(sluicebeam.Result{CustomID: fmt.Sprintf("%.40s", line), Error: `a line without "custom_id": a Beam job has no line numbers to key it by`})
	case len(r.Messages) > 0:
		bad(sluicebeam.Result{CustomID: r.CustomID, Error: "chat lines are not supported by sluice-beam; use sluice run"})
	case r.Temperature != nil || r.Seed != nil || r.TopP != nil || r.TopK != nil || r.MinP != nil || r.Stop != nil || r.Adapter != "":
		bad(sluicebeam.Result{CustomID: r.CustomID, Error: "per-line sampling, stop and adapter options are not supported by sluice-beam; set the pipeline"})
	default:
		emit(sluicebeam.Prompt{CustomID: r.CustomID, Prompt: r.Prompt, MaxTokens: r.MaxTokens})
	}
	return nil
}

func resultLine(_ string, r sluicebeam.Result) string { return errorLine(r) }

func errorLine(r sluicebeam.Result) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf(`{"custom_id":%q,"error":%q}`, r.CustomID, err.Error())
	}
	return string(b)
}

// build is the pipeline: prompts file → Generate → results file.
func build(cfg sluicebeam.Config, in, outPath string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	lines := textio.Read(s, in)
	ok, bad := beam.ParDo2(s, parseLine, lines)
	done := beam.ParDo(s, resultLine, sluicebeam.Generate(s, cfg, ok))
	failed := beam.ParDo(s, errorLine, bad)
	textio.Write(s, outPath, beam.Flatten(s, done, failed))
	return p
}

func main() {
	flag.Parse()
	beam.Init()
	if *modelPath == "" || *prompts == "" || *out == "" {
		log.Fatal("sluice-beam: --model, --prompts and --out are required")
	}
	cfg := sluicebeam.Config{Model: *modelPath, Tokenizer: *tokenizer, Pipeline: *pipeline, MaxNewTokens: *maxNew, MaxInFlight: *inFlight}
	runner := *runners.Runner // prism (in-process), universal (a portable job server: Flink, Spark), dataflow
	if runner == "" {
		runner = "prism"
	}
	if _, err := beam.Run(context.Background(), runner, build(cfg, *prompts, *out)); err != nil {
		log.Fatalf("sluice-beam: %v", err)
	}
}
