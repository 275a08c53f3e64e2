package server_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/server"
)

// BenchmarkStreamingClients is the server under N concurrent streaming
// clients (OpenAI Go client, loopback): each iteration every client streams
// a 32-token completion; tok/s is the aggregate over the iteration. The model
// is stories260K when ../shared/models is present, else the tiny synthetic.
//
//	go test -run '^$' -bench StreamingClients -benchtime 3x ./server
func BenchmarkStreamingClients(b *testing.B) {
	var l *model.Loaded
	if testutil.HaveModels() {
		dir := testutil.Models(b)
		var err error
		l, err = model.Load(context.Background(), model.LoadOptions{Path: filepath.Join(dir, "stories260K-gguf", "stories260K.gguf"), Threads: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
	} else {
		l = synthModel(b)
	}
	const maxTok = 32
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			eng := engine(b, l, clients, maxTok)
			f := newFixture(b, server.Options{Engine: eng, MaxWaiting: clients})
			client := openai.NewClient(option.WithBaseURL(f.ts.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
				option.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}))
			var tokens int64
			var elapsed time.Duration
			for b.Loop() {
				t0 := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for i := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						st := client.Completions.NewStreaming(context.Background(), completionParams(fmt.Sprintf("Once upon a time %d", i%7), maxTok))
						defer st.Close()
						n := 0
						for st.Next() {
							n += len(st.Current().Choices)
						}
						mu.Lock()
						tokens += int64(n)
						mu.Unlock()
					}()
				}
				wg.Wait()
				elapsed += time.Since(t0)
			}
			b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tok/s")
		})
	}
}
