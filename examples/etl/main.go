// Command etl is a small ETL-style job that embeds the engine: it reads
// records (JSON lines with an "id" and a "text" field) from standard input,
// asks the model to continue each text, and writes one JSON line per record
// with the completion, in input order, to standard output. Requests are
// submitted as fast as the engine takes them, so they share its continuous
// batch; results are reordered before writing.
//
//	go run ./examples/etl -m model.gguf -n 32 < records.jsonl > out.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pipelines"
)

type record struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

type output struct {
	ID         string `json:"id"`
	Completion string `json:"completion,omitempty"`
	Tokens     int    `json:"completion_tokens"`
	Finish     string `json:"finish_reason"`
	Error      string `json:"error,omitempty"`
}

func main() {
	modelPath := flag.String("m", "", "model file (.gguf)")
	tok := flag.String("tokenizer", "", "llama2.c tokenizer.bin, for a .bin model")
	n := flag.Int("n", 32, "new tokens per record")
	inFlight := flag.Int("parallel", 8, "records decoded together")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *modelPath, *tok, *n, *inFlight, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "etl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, modelPath, tok string, n, inFlight int, in io.Reader, out io.Writer) error {
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = inFlight, n
	eng, err := sluice.Open(ctx, sluice.Options{Model: modelPath, Tokenizer: tok, Pipeline: p})
	if err != nil {
		return err
	}
	defer eng.Close()

	var mu sync.Mutex
	results := map[int]output{}
	var wg sync.WaitGroup
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	count := 0
	for ; sc.Scan(); count++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// Callbacks of earlier lines write results as they finish.
			mu.Lock()
			results[count] = output{ID: fmt.Sprintf("line %d", count+1), Finish: sluice.FinishError, Error: err.Error()}
			mu.Unlock()
			continue
		}
		i := count
		wg.Add(1)
		err := eng.Submit(ctx, sluice.Request{ID: r.ID, Index: uint64(i), Prompt: r.Text}, func(res sluice.Result) {
			o := output{ID: res.ID, Completion: res.Completion, Tokens: res.CompletionTokens, Finish: res.Finish}
			if res.Err != nil {
				o.Error = res.Err.Error()
			}
			mu.Lock()
			results[i] = o
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			wg.Done()
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	wg.Wait()
	enc := json.NewEncoder(out)
	for i := range count {
		if err := enc.Encode(results[i]); err != nil {
			return err
		}
	}
	return nil
}
