package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// serveOn runs Serve on a loopback port until the returned cancel.
func serveOn(t *testing.T, s *server.Server, grace time.Duration) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, grace) }()
	return "http://" + ln.Addr().String(), cancel, done
}

// Shutting down with time to spare lets a stream in flight finish with its
// whole text; with none, the stream ends at once, cancelled, and closes
// properly. Either way the engine is closed afterwards.
func TestGracefulShutdown(t *testing.T) {
	for _, c := range []struct {
		name   string
		grace  time.Duration
		finish string
	}{{"finishes", 30 * time.Second, "length"}, {"cancels", time.Nanosecond, "cancelled"}} {
		t.Run(c.name, func(t *testing.T) {
			eng := engine(t, synthModel(t), 2, 250)
			want := complete(t, eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 250})
			s, err := server.New(server.Options{Engine: eng, Model: "tiny"})
			if err != nil {
				t.Fatal(err)
			}
			base, stop, done := serveOn(t, s, c.grace)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: tr}))
			st := client.Completions.NewStreaming(context.Background(), completionParams("once upon a time", 250))
			if !st.Next() {
				t.Fatalf("no first chunk: %v", st.Err())
			}
			text := st.Current().Choices[0].Text
			stop()
			finish := ""
			for st.Next() {
				for _, ch := range st.Current().Choices {
					text += ch.Text
					if ch.FinishReason != "" {
						finish = string(ch.FinishReason)
					}
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if c.finish == "length" && (text != want.Completion || finish != "length") {
				t.Fatalf("finish %q, text %q; want the whole %q", finish, text, want.Completion)
			}
			if c.finish == "cancelled" && (finish != "cancelled" || !strings.HasPrefix(want.Completion, text) || text == want.Completion) {
				// The tiny model may outrun a nanosecond only by finishing.
				if finish != "length" {
					t.Fatalf("finish %q, text %q; want a cancelled prefix of %q", finish, text, want.Completion)
				}
			}
			t.Logf("finish %s after %d of %d bytes", finish, len(text), len(want.Completion))
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return")
			}
			if _, err := eng.Generate(context.Background(), sluice.Request{Prompt: "x"}); !errors.Is(err, sluice.ErrClosed) {
				t.Fatalf("engine after Serve: %v, want ErrClosed", err)
			}
		})
	}
}
