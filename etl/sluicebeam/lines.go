package sluicebeam

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/jobs"
)

func init() {
	register.DoFn3x1[context.Context, string, func(string), error](&linesFn{})
	register.Emitter1[string]()
	beam.RegisterType(reflect.TypeOf((*linesFn)(nil)).Elem())
}

// GenerateLines runs the lines of batch files, a PCollection<string> of one
// line each (OpenAI Batch request lines or sluice's JSONL, as sluice run
// reads them), and returns a PCollection<string> of their result lines,
// each what sluice run writes for the same line: an OpenAI Batch output line
// for an OpenAI Batch request, sluice's result line for the others. The
// requests are built, and the results written, by the same code as sluice
// run's and the server's (jobs.Batch): chat rendering through the model's
// template, sampling overrides, stop strings, best_of, response_format. A
// line that cannot run is its error line, never a failed bundle.
func GenerateLines(s beam.Scope, cfg Config, lines beam.PCollection) beam.PCollection {
	s = s.Scope("sluicebeam.GenerateLines")
	return beam.ParDo(s, &linesFn{Config: cfg}, lines)
}

// linesFn is GenerateLines' DoFn. Only Config is serialized.
type linesFn struct {
	Config Config

	eng  *shared
	runs [2]*jobs.Batch // sluice's result lines, OpenAI Batch output lines
	mu   sync.Mutex
	out  []string
	wg   sync.WaitGroup
}

func (f *linesFn) Setup(ctx context.Context) error {
	eng, err := acquire(ctx, f.Config)
	if err != nil {
		return err
	}
	f.eng = eng
	f.runs[0] = jobs.NewBatch(eng.e, jobs.BatchOptions{Model: f.Config.Model})
	f.runs[1] = jobs.NewBatch(eng.e, jobs.BatchOptions{OpenAI: true, Model: f.Config.Model})
	return nil
}

func (f *linesFn) StartBundle(context.Context, func(string)) { f.out = f.out[:0] }

// ProcessElement submits one line and returns; its result line is emitted
// by FinishBundle.
func (f *linesFn) ProcessElement(ctx context.Context, line string, _ func(string)) error {
	rd := batch.NewReader(strings.NewReader(line), "element", batch.Auto)
	r, err := rd.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil // a blank line
		}
		return err
	}
	b := f.runs[0]
	if isOpenAI(line) {
		b = f.runs[1]
	}
	if r.Err != nil {
		f.emitLine(b.ErrorLine(r, batch.CodeInvalidRequest, r.Err.Error()))
		return nil
	}
	req, stops, err := b.Request(r, "element")
	if err != nil {
		f.emitLine(b.ErrorLine(r, batch.CodeInvalidRequest, err.Error()))
		return nil
	}
	f.wg.Add(1)
	err = b.Submit(context.WithoutCancel(ctx), req, stops, func(res sluice.Result) {
		defer f.wg.Done()
		if out, _, ok := b.Line(r, res); ok {
			f.emitLine(out)
		}
	})
	if err != nil {
		f.wg.Done()
		if errors.Is(err, sluice.ErrClosed) {
			return err // the worker is going away: let the runner retry the bundle
		}
		f.emitLine(b.ErrorLine(r, batch.CodeServerError, err.Error()))
	}
	return nil
}

// isOpenAI reports whether a line is an OpenAI Batch request (it has a
// "body"), whose result is an OpenAI Batch output line.
func isOpenAI(line string) bool {
	var probe struct {
		Body json.RawMessage `json:"body"`
	}
	return json.Unmarshal([]byte(line), &probe) == nil && len(probe.Body) > 0
}

func (f *linesFn) emitLine(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":` + strconv.Quote(err.Error()) + `}`)
	}
	f.mu.Lock()
	f.out = append(f.out, string(b))
	f.mu.Unlock()
}

// FinishBundle waits for the bundle's requests and emits their lines.
func (f *linesFn) FinishBundle(_ context.Context, emit func(string)) error {
	f.wg.Wait()
	f.mu.Lock()
	out := f.out
	f.out = nil
	f.mu.Unlock()
	for _, l := range out {
		emit(l)
	}
	return nil
}

func (f *linesFn) Teardown() {
	if f.eng != nil {
		release(f.eng)
		f.eng = nil
	}
}
