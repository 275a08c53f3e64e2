package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func BenchmarkReader(b *testing.B) {
	for _, tc := range []struct {
		name   string
		format Format
		line   string
	}{
		{"jsonl", JSONL, `{"custom_id": "%d", "prompt": "Once upon a time there was a little girl named Lily.", "max_tokens": 64}`},
		{"openai", OpenAIBatch, `{"custom_id": "%d", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "Once upon a time"}]}}`},
		{"text", Text, `Once upon a time there was a little girl named Lily. %d`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var in strings.Builder
			for i := range 1000 {
				fmt.Fprintf(&in, tc.line+"\n", i)
			}
			data := in.String()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				r := NewReader(strings.NewReader(data), "bench", tc.format)
				for {
					req, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil || req.Err != nil {
						b.Fatal(err, req.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

func BenchmarkWriter(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	r := Result{CustomID: "id-123", Text: strings.Repeat("Once upon a time. ", 50), PromptTokens: 12, CompletionTokens: 256, FinishReason: "length", PrefillMS: 3.2, DecodeMS: 812.5}
	for b.Loop() {
		buf.Reset()
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
}
