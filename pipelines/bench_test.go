package pipelines

import "testing"

func BenchmarkParse(b *testing.B) {
	data, err := presetFS.ReadFile("sample.toml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "sample.toml"); err != nil {
			b.Fatal(err)
		}
	}
}
