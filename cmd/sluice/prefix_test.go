package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sluice run reports cached_tokens per line: with the prefix cache (the
// default) every line after the first maps the long opening they share and
// the texts are those of --prefix-cache=false, whose lines report none;
// OpenAI Batch output carries usage.prompt_tokens_details.cached_tokens.
func TestRunPrefixCache(t *testing.T) {
	bin, tok, _, _ := stories(t)
	tmp := t.TempDir()
	system := strings.Repeat("Once upon a time there was a little girl named Lily who liked to play in the park. ", 3)
	var in, openai strings.Builder
	for i := range 6 {
		p := system + strings.Repeat("The dog ran. ", i+1)
		b, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprint("l", i), "prompt": p, "max_tokens": 8})
		fmt.Fprintln(&in, string(b))
		b, _ = json.Marshal(map[string]any{"custom_id": fmt.Sprint("o", i), "method": "POST", "url": "/v1/completions", "body": map[string]any{"prompt": p, "max_tokens": 8}})
		fmt.Fprintln(&openai, string(b))
	}
	prompts := filepath.Join(tmp, "p.jsonl")
	os.WriteFile(prompts, []byte(in.String()), 0o644)
	type line struct {
		ID     string `json:"custom_id"`
		Text   string `json:"text"`
		Prompt int    `json:"prompt_tokens"`
		Cached int    `json:"cached_tokens"`
	}
	runOut := func(name string, extra ...string) map[string]line {
		out := filepath.Join(tmp, name)
		args := append([]string{"run", "greedy", "--prompts", prompts, "--out", out, "-m", bin, "--tokenizer", tok, "--threads", "1"}, extra...)
		if _, stderr, err := cli(t, "", args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		got := map[string]line{}
		for _, s := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			got[l.ID] = l
		}
		return got
	}
	on, off := runOut("on.jsonl"), runOut("off.jsonl", "--prefix-cache=false")
	mapped := 0
	for id, l := range on {
		if l.Text != off[id].Text {
			t.Errorf("%s: %q with the prefix cache, %q without", id, l.Text, off[id].Text)
		}
		if off[id].Cached != 0 {
			t.Errorf("%s: %d cached tokens with --prefix-cache=false", id, off[id].Cached)
		}
		if l.Cached >= 48 && l.Cached < l.Prompt {
			mapped++
		}
	}
	if len(on) != 6 || mapped < 5 {
		t.Fatalf("%d lines, %d mapped the shared opening: %+v", len(on), mapped, on)
	}

	os.WriteFile(prompts, []byte(openai.String()), 0o644)
	out := filepath.Join(tmp, "openai.jsonl")
	if _, stderr, err := cli(t, "", "run", "greedy", "--prompts", prompts, "--out", out, "-m", bin, "--tokenizer", tok, "--threads", "1"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	mapped = 0
	for _, s := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
		var l struct {
			Response struct {
				Body struct {
					Usage struct {
						Prompt  int `json:"prompt_tokens"`
						Details *struct {
							Cached int `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					} `json:"usage"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if u := l.Response.Body.Usage; u.Details == nil {
			t.Fatalf("no usage.prompt_tokens_details: %s", s)
		} else if u.Details.Cached >= 48 {
			mapped++
		}
	}
	if mapped < 5 {
		t.Fatalf("%d of 6 OpenAI Batch lines report the shared opening as cached", mapped)
	}
}
