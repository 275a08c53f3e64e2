package server_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// settle waits (bounded) until cond holds.
func settle(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not settle", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// 64 streaming clients at once on loopback, every tenth disconnecting after
// its second chunk: the others get exactly the text of a direct engine run,
// and afterwards no KV page is in use and no goroutine is left over.
func TestLoad(t *testing.T) {
	const clients, maxTok = 64, 16
	eng := engine(t, synthModel(t), 8, maxTok)
	f := newFixture(t, server.Options{Engine: eng, MaxWaiting: clients})
	ctx := context.Background()
	words := strings.Fields("once upon a time there was a little girl named Lily who liked to play in the park")
	prompt := func(i int) string { return strings.Join(words[:1+(i*5)%len(words)], " ") }
	want := map[string]string{}
	for i := range clients {
		if _, ok := want[prompt(i)]; !ok {
			want[prompt(i)] = complete(t, eng, sluice.Request{Prompt: prompt(i), MaxNewTokens: maxTok}).Completion
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := openai.NewClient(option.WithBaseURL(f.ts.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	baseline := runtime.NumGoroutine()
	before := eng.Stats()

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave := i%10 == 3
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st := client.Completions.NewStreaming(cctx, completionParams(prompt(i), maxTok))
			defer st.Close()
			var text strings.Builder
			chunks := 0
			for st.Next() {
				for _, c := range st.Current().Choices {
					text.WriteString(c.Text)
				}
				if chunks++; leave && chunks == 2 {
					cancel()
					return
				}
			}
			if err := st.Err(); err != nil {
				errs <- fmt.Errorf("client %d: %v", i, err)
				return
			}
			if leave {
				return // finished before it could leave
			}
			if text.String() != want[prompt(i)] {
				errs <- fmt.Errorf("client %d (%q): %q, want %q", i, prompt(i), text.String(), want[prompt(i)])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	settle(t, "KV pages in use", func() bool { st := eng.Stats(); return st.Cache.PagesInUse == 0 && st.Active == 0 && st.Queued == 0 })
	// Sharing is timing: on a loaded machine (make test runs packages side
	// by side) the clients' requests can arrive spread out, so the average
	// rows a step is no evidence either way (one make test saw 1397 rows in
	// 949 steps); that some step carried several of them is.
	if st := eng.Stats(); st.MaxSeqs < 2 {
		t.Errorf("no step carried two sessions (%d rows in %d steps): the clients did not share the batch", st.Rows-before.Rows, st.Steps-before.Steps)
	}
	tr.CloseIdleConnections()
	settle(t, "goroutines", func() bool { return runtime.NumGoroutine() <= baseline })
}
