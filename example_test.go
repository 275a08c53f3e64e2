package sluice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// tinyModel writes a seeded synthetic model (random weights, so the text is
// noise) and returns its path.
func tinyModel() (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		panic(err)
	}
	p, _ := synth.LookupPreset("tiny")
	path = filepath.Join(dir, "tiny.gguf")
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	if err := synth.Write(f, synth.Options{Preset: p, DType: tensor.F32, Seed: 1}); err != nil {
		panic(err)
	}
	f.Close()
	return path, func() { os.RemoveAll(dir) }
}

// Open loads a model and starts the engine; Complete runs one request to its
// end. Greedy decoding gives the same tokens every time.
func ExampleEngine_Complete() {
	path, cleanup := tinyModel()
	defer cleanup()
	ctx := context.Background()
	eng, err := sluice.Open(ctx, sluice.Options{Model: path})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	a, _ := eng.Complete(ctx, sluice.Request{Tokens: []int32{1, 42}, MaxNewTokens: 8})
	b, _ := eng.Complete(ctx, sluice.Request{Tokens: []int32{1, 42}, MaxNewTokens: 8})
	fmt.Println(len(a.Tokens), a.Finish, a.CompletionTokens, fmt.Sprint(a.Tokens) == fmt.Sprint(b.Tokens))
	// Output: 10 length 8 true
}

// Generate streams the tokens of one request as they are sampled; requests
// from several goroutines share each step's batch.
func ExampleEngine_Generate() {
	path, cleanup := tinyModel()
	defer cleanup()
	ctx := context.Background()
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight = 8
	eng, err := sluice.Open(ctx, sluice.Options{Model: path, Pipeline: p})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	st, err := eng.Generate(ctx, sluice.Request{Prompt: "hello", MaxNewTokens: 5})
	if err != nil {
		panic(err)
	}
	n := 0
	for _, ok := st.Next(ctx); ok; _, ok = st.Next(ctx) {
		n++
	}
	fmt.Println(n, "tokens streamed;", st.Result().Finish)
	// Output: 5 tokens streamed; length
}

// A request's own context ends it alone, keeping what it generated.
func ExampleEngine_Generate_cancel() {
	path, cleanup := tinyModel()
	defer cleanup()
	eng, err := sluice.Open(context.Background(), sluice.Options{Model: path})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	// Cancel after the second token (a hook must not block; cancel does not).
	stop := func(int32, string) {
		if n++; n == 2 {
			cancel()
		}
	}
	st, err := eng.Generate(ctx, sluice.Request{Prompt: "hi", MaxNewTokens: 100, OnToken: stop})
	if err != nil {
		panic(err)
	}
	r := st.Result()
	fmt.Println(r.Finish, r.CompletionTokens >= 2)
	// Output: cancelled true
}
