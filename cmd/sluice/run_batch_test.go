package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// Must show 1 of the engine issue, through the CLI: 32 prompts of different
// lengths with max_in_flight = 32 give every result's text byte-identical to
// the same file run with max_in_flight = 1, greedy and seeded sampling, at 1
// and 2 threads, on stories260K and on a synthetic model.
func TestRunInFlightInvariance(t *testing.T) {
	tmp := t.TempDir()
	synth := filepath.Join(tmp, "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "--seed", "5", "-o", synth); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	type modelArgs struct {
		name string
		args []string
	}
	models := []modelArgs{{"synthetic", []string{"--model", synth}}}
	if testutil.HaveModels() {
		bin, tok, _, _ := stories(t)
		models = append(models, modelArgs{"stories260K", []string{"--model", bin, "--tokenizer", tok}})
	}
	words := strings.Fields("once upon a time there was a little girl named Lily who liked to play in the park with her dog and her friend Tom")
	var prompts strings.Builder
	for i := range 32 {
		fmt.Fprintf(&prompts, "{\"custom_id\":\"p%d\",\"prompt\":%q}\n", i, strings.Join(words[:(i*5)%len(words)], " "))
	}
	in := filepath.Join(tmp, "prompts.jsonl")
	os.WriteFile(in, []byte(prompts.String()), 0o644)
	n := "24"
	if testing.Short() {
		n = "8"
	}
	pipe := func(preset string, inFlight int) string {
		src := readFile(t, filepath.Join(testutil.Root(), "pipelines", preset+".toml"))
		src = strings.Replace(src, "max_in_flight  = 4", fmt.Sprintf("max_in_flight  = %d", inFlight), 1)
		src = strings.Replace(src, "max_new_tokens = 256", "max_new_tokens = "+n, 1)
		src = strings.Replace(src, "prefill_chunk  = 64", "prefill_chunk  = 7", 1)
		if preset == "sample" {
			src = strings.Replace(src, "repeat_last_n  = 64", "repeat_last_n  = 64\n  seed = 42", 1)
		}
		path := filepath.Join(tmp, fmt.Sprintf("%s-%d.toml", preset, inFlight))
		os.WriteFile(path, []byte(src), 0o644)
		return path
	}
	texts := func(out string) map[string]string {
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
			var r struct {
				ID    string `json:"custom_id"`
				Text  string `json:"text"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.Error != "" {
				t.Fatalf("result line %q: %v %s", line, err, r.Error)
			}
			m[r.ID] = r.Text
		}
		if len(m) != 32 {
			t.Fatalf("%d results, want 32", len(m))
		}
		return m
	}
	for _, m := range models {
		for _, preset := range []string{"greedy", "sample"} {
			for _, threads := range []string{"1", "2"} {
				t.Run(m.name+"/"+preset+"/threads="+threads, func(t *testing.T) {
					var got []map[string]string
					for _, inFlight := range []int{1, 32} {
						out := filepath.Join(t.TempDir(), "out.jsonl")
						args := append([]string{"run", pipe(preset, inFlight), "--prompts", in, "--out", out, "--threads", threads}, m.args...)
						if _, stderr, err := cli(t, "", args...); err != nil {
							t.Fatalf("%v\n%s", err, stderr)
						}
						got = append(got, texts(out))
					}
					for id, want := range got[0] {
						if got[1][id] != want {
							t.Fatalf("%s: max_in_flight 32 gave %q, 1 gave %q", id, got[1][id], want)
						}
					}
				})
			}
		}
	}
}

// Must show 6 (part): a prompt longer than the context fails its own line,
// naming the request; the others run. A step budget smaller than one prompt
// chunk is a pipeline error naming the key and its line.
func TestRunBadInput(t *testing.T) {
	tmp := t.TempDir()
	synth := filepath.Join(tmp, "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "f32", "-o", synth); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	in := filepath.Join(tmp, "prompts.jsonl")
	long := strings.Repeat("hello world ", 200)
	os.WriteFile(in, []byte(fmt.Sprintf("{\"custom_id\":\"long\",\"prompt\":%q}\n{\"custom_id\":\"ok\",\"prompt\":\"hi\"}\n", long)), 0o644)
	out := filepath.Join(tmp, "out.jsonl")
	src := strings.Replace(readFile(t, filepath.Join(testutil.Root(), "pipelines", "greedy.toml")), "max_new_tokens = 256", "max_new_tokens = 4", 1)
	pfile := filepath.Join(tmp, "p.toml")
	os.WriteFile(pfile, []byte(src), 0o644)
	if _, stderr, err := cli(t, "", "run", pfile, "--prompts", in, "--out", out, "--model", synth, "--ctx", "64"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	res := readFile(t, out)
	if !strings.Contains(res, `"error":"request long: prompt longer than the context: 1602 tokens, the context holds 64"`) || !strings.Contains(res, `"custom_id":"ok","text"`) {
		t.Fatalf("results:\n%s", res)
	}

	bad := strings.Replace(src, "prefill_chunk  = 64", "prefill_chunk  = 64\n  max_batch_tokens = 16", 1)
	os.WriteFile(pfile, []byte(bad), 0o644)
	_, _, err := cli(t, "", "validate", pfile)
	if err == nil || !strings.Contains(err.Error(), `stage "scheduler": max_batch_tokens: 16 is less than prefill_chunk = 64`) || !strings.Contains(err.Error(), "p.toml:") {
		t.Fatalf("max_batch_tokens < prefill_chunk: %v", err)
	}
}
