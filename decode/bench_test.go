package decode_test

import (
	"testing"

	"github.com/sluicehq/sluice/decode"
)

// BenchmarkDecodeStories measures plain-loop decode on stories260K (1 thread).
func BenchmarkDecodeStories(b *testing.B) {
	l := loadStories((*testing.T)(nil), b)
	eng, err := decode.New(l, decode.Options{AddBOS: true, MaxNewTokens: 200, NoStop: true})
	if err != nil {
		b.Fatal(err)
	}
	toks := 0
	for b.Loop() {
		s := eng.Generate(b.Context(), decode.Request{Prompt: "Once"})
		toks += s.Generated()
	}
	b.ReportMetric(float64(toks)/b.Elapsed().Seconds(), "tok/s")
}
