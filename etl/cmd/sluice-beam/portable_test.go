package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/etl/sluicebeam"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// The example pipeline through a real portable job server, the path Flink,
// Spark and Dataflow take: prism runs as its own process, and sluice-beam
// (built as its own binary) submits the job to it with --runner universal
// and a LOOPBACK worker environment, so the job's graph, its DoFns and
// their Config cross the Fn API serialized (a type or DoFn that does not
// serialize fails here, where in-process prism would not notice). The
// results are the engine's own completions. make test-etl-portable builds
// both binaries and passes their paths in SLUICE_PRISM and SLUICE_BEAM.
func TestPortableJobServer(t *testing.T) {
	prismBin, beamBin := os.Getenv("SLUICE_PRISM"), os.Getenv("SLUICE_BEAM")
	if prismBin == "" || beamBin == "" {
		t.Skip("SLUICE_PRISM and SLUICE_BEAM are unset: make test-etl-portable builds prism and sluice-beam and runs this test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// prism on a port of its choosing (--job_port 0), read back from its
	// JSON log line "Serving JobManagement".
	prism := exec.CommandContext(ctx, prismBin, "--job_port", "0", "--serve_http=false", "--log_kind", "json", "--log_level", "info")
	stderr, err := prism.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := prism.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prism.Process.Kill()
		prism.Wait()
	})
	endpoint := make(chan string, 1)
	var prismLog strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			prismLog.WriteString(line + "\n")
			var rec struct {
				Msg      string `json:"msg"`
				Endpoint string `json:"endpoint"`
			}
			if !sent && json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "Serving JobManagement" && rec.Endpoint != "" {
				endpoint <- rec.Endpoint
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var ep string
	select {
	case ep = <-endpoint:
	case <-ctx.Done():
		t.Fatalf("prism never said where it serves:\n%s", prismLog.String())
	}

	tmp := t.TempDir()
	model := filepath.Join(tmp, "tiny.gguf")
	f, err := os.Create(model)
	if err != nil {
		t.Fatal(err)
	}
	preset, _ := synth.LookupPreset("tiny")
	if err := synth.Write(f, synth.Options{Preset: preset, DType: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	prompts := map[string]string{"a": "once upon a time", "b": "hello", "c": "the cat sat on the mat"}
	var lines strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&lines, "{\"custom_id\":%q,\"prompt\":%q}\n", id, prompts[id])
	}
	lines.WriteString("not json\n")
	in, out := filepath.Join(tmp, "prompts.jsonl"), filepath.Join(tmp, "results.jsonl")
	if err := os.WriteFile(in, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	job := exec.CommandContext(ctx, beamBin, "--runner", "universal", "--endpoint", ep, "--environment_type", "LOOPBACK",
		"--model", model, "--prompts", in, "--out", out, "--n", "6")
	jobOut, err := job.CombinedOutput()
	if err != nil {
		t.Fatalf("sluice-beam on prism at %s: %v\n%s\nprism:\n%s", ep, err, jobOut, prismLog.String())
	}
	// The universal runner's own record that the job went to the server.
	if !strings.Contains(string(jobOut), "Submitted job") {
		t.Fatalf("sluice-beam did not submit a job to %s:\n%s", ep, jobOut)
	}
	t.Logf("sluice-beam on prism at %s:\n%s", ep, jobOut)

	// The engine run directly gives each prompt's completion.
	eng, err := sluice.Open(ctx, sluice.Options{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	got := map[string]sluicebeam.Result{}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r sluicebeam.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[r.CustomID] = r
	}
	if len(got) != 4 {
		t.Fatalf("%d results, want 4 (3 completions and the bad line's error): %v", len(got), got)
	}
	for id, p := range prompts {
		want, err := eng.Complete(ctx, sluice.Request{Prompt: p, MaxNewTokens: 6})
		if err != nil {
			t.Fatal(err)
		}
		if r := got[id]; r.Error != "" || r.Text != want.Completion || r.CompletionTokens != 6 {
			t.Errorf("%s: %+v, the engine's completion %q", id, r, want.Completion)
		}
	}
}
