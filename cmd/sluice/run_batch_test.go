package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batch"
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
	if _, stderr, err := cli(t, "", "run", pfile, "--prompts", in, "--out", out, "--model", synth, "--ctx", "64"); err == nil || !strings.Contains(err.Error(), "1 line(s) failed") {
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

// Issue "Serve and embed" item 5: the ways a new user lost work.
func TestRunRefusals(t *testing.T) {
	tmp := t.TempDir()
	synth := filepath.Join(tmp, "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "-o", synth); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	run := func(stdin string, args ...string) (string, string, error) {
		return cli(t, stdin, append([]string{"run", "-m", synth, "-n", "4"}, args...)...)
	}
	a := write("a.txt", "one\ntwo\n")
	b := write("b.txt", "three\nfour\nfive\n")
	out := filepath.Join(tmp, "out.jsonl")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"out is prompts", []string{"--prompts", a, "--out", a}, "is the prompts file"},
		{"negative n", []string{"-n", "-1", "--prompts", a, "--out", out}, "-n is -1"},
		{"negative threads", []string{"--threads", "-2", "--prompts", a, "--out", out}, "-threads is -2"},
		{"negative ctx", []string{"--ctx", "-1", "--prompts", a, "--out", out}, "-ctx is -1"},
		{"unknown preset", []string{"nosuch", "--prompts", a, "--out", out}, `"nosuch" is neither a pipeline file nor a preset`},
		{"duplicate ids", []string{"--prompts", write("dup.jsonl", "{\"custom_id\":\"x\",\"prompt\":\"a\"}\n{\"custom_id\":\"x\",\"prompt\":\"b\"}\n"), "--out", out}, "nothing was run"},
	} {
		if _, _, err := run("", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want …%s…", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("a refused run created %s", out)
	}

	// Two text files into one OUT: ids are keyed by file and line.
	for _, in := range []string{a, b} {
		if _, stderr, err := run("", "greedy", "--prompts", in, "--out", out); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
	}
	res := readFile(t, out)
	for _, id := range []string{"a.txt:line-1", "a.txt:line-2", "b.txt:line-1", "b.txt:line-2", "b.txt:line-3"} {
		if strings.Count(res, `"custom_id":"`+id+`"`) != 1 {
			t.Fatalf("%s not once in:\n%s", id, res)
		}
	}

	// Progress without a terminal is a line every progressEvery; a global
	// flag after the command is taken.
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = time.Millisecond
	_, stderr, err := run("", "--prompts", a, "--out", filepath.Join(tmp, "progress.jsonl"), "-n", "64", "--log-level", "info")
	if err != nil || !strings.Contains(stderr, "tok/s, ETA") || !strings.Contains(stderr, "batch done") {
		t.Fatalf("%v\n%s", err, stderr)
	}

	// A second writer is refused while the first holds OUT.
	held, err := batch.OpenResults(out, batch.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run("", "--prompts", a, "--out", out); !errors.Is(err, batch.ErrLocked) {
		t.Fatalf("second writer: %v", err)
	}
	held.Close()

	// Standard input and output, a per-line stop string and options that
	// cannot be honoured.
	stdout, stderr, err := run(`{"custom_id":"s","prompt":"hello","max_tokens":8}`+"\n", "--prompts", "-", "--out", "-")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var r batch.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.CustomID != "s" || r.CompletionTokens != 8 {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	runes := []rune(r.Text)
	if len(runes) < 3 {
		t.Fatalf("text %q too short to cut", r.Text)
	}
	stop := string(runes[len(runes)/2])
	stopJSON, _ := json.Marshal(stop)
	lines := fmt.Sprintf("{\"custom_id\":\"s\",\"prompt\":\"hello\",\"max_tokens\":8,\"stop\":%s}\n{\"custom_id\":\"n\",\"prompt\":\"hello\",\"n\":2}\n", stopJSON)
	stdout, _, err = run(lines, "--prompts", "-", "--out", "-")
	if err == nil || !strings.Contains(err.Error(), "1 line(s) failed") {
		t.Fatalf("a failed line: %v\n%s", err, stdout)
	}
	got := map[string]batch.Result{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var res batch.Result
		json.Unmarshal([]byte(l), &res)
		got[res.CustomID] = res
	}
	if s := got["s"]; s.Text != r.Text[:strings.Index(r.Text, stop)] || s.FinishReason != "stop" {
		t.Errorf("stop %q: %+v", stop, s)
	}
	if !strings.Contains(got["n"].Error, `"n" is 2: not supported`) {
		t.Errorf("n = 2: %+v", got["n"])
	}

	// --retry-errors runs the error lines again, and only them.
	errOut := write("err.jsonl", "{\"custom_id\":\"a.txt:line-1\",\"error\":\"boom\"}\n")
	if _, _, err := run("", "--prompts", a, "--out", errOut); err == nil || !strings.Contains(err.Error(), "1 in an earlier one") {
		t.Fatalf("an earlier error line: %v", err)
	}
	if _, stderr, err := run("", "--prompts", a, "--out", errOut, "--retry-errors"); err != nil {
		t.Fatalf("--retry-errors: %v\n%s", err, stderr)
	}
	if res := readFile(t, errOut); strings.Contains(res, "boom") || strings.Count(res, "\n") != 2 {
		t.Fatalf("after --retry-errors:\n%s", res)
	}
}
