package main

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type eosGen struct {
	GeneratedIDs []int32 `json:"generated_ids"`
	Completion   string  `json:"completion"`
	Finish       string  `json:"finish_reason"`
	Beams        []struct {
		IDs []int32 `json:"ids"`
	} `json:"beams"`
}

// --eos-id ends plain, speculative (specexec, chain, lookup) and beam
// decoding at the first time the id is chosen, on generate, run and bench;
// repeated, it adds ids; an id outside the vocabulary or not a number is a
// usage error naming the flag.
func TestEOSID(t *testing.T) {
	bin, tok, _, _ := stories(t)
	gen := func(extra ...string) eosGen {
		t.Helper()
		args := append([]string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "40", "-p", "Once upon a time", "--json"}, extra...)
		out, stderr, err := cli(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		var g eosGen
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
		return g
	}
	greedy := gen()
	if len(greedy.GeneratedIDs) != 40 || greedy.Finish != "length" {
		t.Fatalf("greedy: %+v", greedy)
	}
	// A word that first appears some way into the text, and one after it.
	k := 6
	for slices.Index(greedy.GeneratedIDs, greedy.GeneratedIDs[k]) != k {
		k++
	}
	id := greedy.GeneratedIDs[k]
	later := greedy.GeneratedIDs[len(greedy.GeneratedIDs)-1]
	ids := strconv.Itoa(int(id))
	for _, mode := range [][]string{
		nil,
		{"--draft", draftModel(t), "--spec", "specexec", "--budget", "16"},
		{"--draft", draftModel(t), "--spec", "chain", "--draft-max", "4"},
		{"--spec", "lookup", "--draft-max", "3"},
	} {
		for _, flags := range [][]string{{"--eos-id", ids}, {"--eos-id", strconv.Itoa(int(later)), "--eos-id", ids}} {
			g := gen(append(slices.Clone(flags), mode...)...)
			if !slices.Equal(g.GeneratedIDs, greedy.GeneratedIDs[:k]) || g.Finish != "stop" {
				t.Errorf("%v %v: ids %v finish %s, want %v stop", flags, mode, g.GeneratedIDs, g.Finish, greedy.GeneratedIDs[:k])
			}
		}
	}
	// Beam search: every returned hypothesis that ends before -n ends on the
	// id (HF keeps the EOS in the hypothesis), and none holds it earlier.
	for _, beams := range []string{"1", "3"} {
		g := gen("--eos-id", ids, "--beams", beams, "--num-return", beams)
		if beams == "1" {
			for _, es := range []string{"true", "never"} {
				if h := gen("--eos-id", ids, "--beams", beams, "--early-stopping", es); !slices.Equal(h.GeneratedIDs, g.GeneratedIDs) {
					t.Errorf("--beams 1 --early-stopping %s: %v, with false %v", es, h.GeneratedIDs, g.GeneratedIDs)
				}
			}
		}
		for _, h := range g.Beams {
			if i := slices.Index(h.IDs, id); i >= 0 && i != len(h.IDs)-1 || i < 0 && len(h.IDs) != 40 {
				t.Errorf("--beams %s: hypothesis %v: id %d at %d", beams, h.IDs, id, i)
			}
		}
		if slices.Contains(g.GeneratedIDs, id) || beams != "1" && len(g.Beams) == 0 {
			t.Errorf("--beams %s: %+v", beams, g)
		}
		// --beams 1 is greedy decoding (Hugging Face sends num_beams 1 to
		// greedy search), in every --early-stopping mode.
		if beams == "1" && (!slices.Equal(g.GeneratedIDs, greedy.GeneratedIDs[:k]) || g.Finish != "stop") {
			t.Errorf("--beams 1 (greedy): ids %v finish %s, want %v stop", g.GeneratedIDs, g.Finish, greedy.GeneratedIDs[:k])
		}
	}

	// run: the batch line stops there too.
	in := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(in, []byte(`{"custom_id":"a","prompt":"Once upon a time","max_tokens":40}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cli(t, "", "run", "-m", bin, "--tokenizer", tok, "--prompts", in, "--out", "-", "--eos-id", ids)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	var line struct {
		Text   string `json:"text"`
		Finish string `json:"finish_reason"`
	}
	if err := json.Unmarshal([]byte(out), &line); err != nil || line.Text != gen("--eos-id", ids).Completion || line.Finish != "stop" {
		t.Errorf("run --eos-id: %v %q", err, out)
	}

	// bench: the generated text (its MD5) is generate's with the same prompt.
	out, stderr, err = cli(t, "", "bench", "-m", bin, "--tokenizer", tok, "--prompt", "Once upon a time", "--gen-tokens", "40", "--runs", "1", "--threads", "1", "--json", "--eos-id", ids)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	var rep struct {
		TextMD5 string `json:"text_md5"`
	}
	sum := md5.Sum([]byte(gen("--eos-id", ids).Completion))
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.TextMD5 != hex.EncodeToString(sum[:]) {
		t.Errorf("bench --eos-id: text md5 %q (%v), want generate's %x", rep.TextMD5, err, sum)
	}

	// run and bench run no beam search: --beams there is refused, not ignored.
	for _, cmd := range [][]string{{"run", "-m", bin, "--tokenizer", tok, "--prompts", in, "--out", "-"}, {"bench", "-m", bin, "--tokenizer", tok, "--runs", "1"}} {
		if _, _, err := cli(t, "", append(cmd, "--beams", "3")...); err == nil || !strings.Contains(err.Error(), "beam search runs in generate only") {
			t.Errorf("%s --beams 3: %v", cmd[0], err)
		}
	}
	for _, bad := range []struct{ arg, want string }{{"512", "--eos-id 512: the vocabulary has 512 tokens"}, {"-1", "-1"}, {"x", `"x"`}} {
		_, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "--eos-id", bad.arg)
		if err == nil || !strings.Contains(err.Error()+stderr, bad.want) || !strings.Contains(err.Error()+stderr, "eos-id") {
			t.Errorf("--eos-id %s: %v\n%s", bad.arg, err, stderr)
		}
	}
}

// generate without -m runs the built-in stories260K: the same text as the
// repository's file.
func TestGenerateBuiltInModel(t *testing.T) {
	bin, tok, _, _ := stories(t)
	want, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "40", "-p", "Lily and Tom")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	got, stderr, err := cli(t, "", "generate", "--temp", "0", "-n", "40", "-p", "Lily and Tom")
	if err != nil || got != want {
		t.Fatalf("built-in model: %v %s\n%q, want %q", err, stderr, got, want)
	}
}
