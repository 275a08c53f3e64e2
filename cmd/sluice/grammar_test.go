package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestGrammarCheck(t *testing.T) {
	const schema = `{"type":"object","properties":{"id":{"type":"integer","minimum":1},"name":{"type":"string","maxLength":20}},"required":["id","name"],"additionalProperties":false}`
	dir := t.TempDir()
	sf := filepath.Join(dir, "s.json")
	gf := filepath.Join(dir, "g.gbnf")
	in := filepath.Join(dir, "in.json")
	for p, s := range map[string]string{sf: schema, gf: "root ::= \"a\" [0-9]+\n", in: `{"id":3,"name":"Zoë"}`} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, stdin string
		args        []string
		code        int
		want        string // in stdout (code 0) or the error
	}{
		{"schema ok", `{"id":1,"name":"x"}`, []string{"--json-schema", schema}, 0, "ok: 19 bytes"},
		{"schema file and input file", "", []string{"--json-schema-file", sf, in}, 0, "ok: 22 bytes"},
		{"stdin dash", `{"id":1,"name":"x"}`, []string{"--json-schema-file", sf, "-"}, 0, "ok"},
		{"out of range", `{"id":0,"name":"x"}`, []string{"--json-schema", schema}, 1, `standard input: not in the language: byte 6: found '0', expected '1'..'9'`},
		{"wrong order", `{"name":"x","id":1}`, []string{"--json-schema", schema}, 1, `byte 2: found 'n', expected 'i'`},
		{"short", `{"id":1`, []string{"--json-schema", schema}, 1, `byte 7: found end of input, expected one of ',', '0'..'9'`},
		{"trailing newline", "{\"id\":1,\"name\":\"x\"}\n", []string{"--json-schema", schema}, 1, `byte 19: found '\n', expected end of input`},
		{"unsupported keyword", `{}`, []string{"--json-schema", `{"type":"object","patternProperties":{"a":{}}}`}, 2, `keyword "patternProperties"`},
		{"invalid schema JSON", `{}`, []string{"--json-schema", `{"type":`}, 2, `invalid JSON`},
		{"empty enum", `1`, []string{"--json-schema", `{"enum":[]}`}, 2, `keyword "enum": empty`},
		{"empty language", `1`, []string{"--json-schema", `{"type":"integer","minimum":3,"maximum":2}`}, 2, `no JSON value satisfies the schema`},
		{"gbnf ok", `a12`, []string{"--grammar-file", gf}, 0, "ok: 3 bytes"},
		{"gbnf text", `ab`, []string{"--grammar", `root ::= "a" "b"`}, 0, "ok"},
		{"gbnf mismatch", `ab`, []string{"--grammar-file", gf}, 1, `byte 1: found 'b', expected '0'..'9'`},
		{"gbnf syntax error", `a`, []string{"--grammar", "root ::= \"a\"\nx ::= [a-"}, 2, `line 2 col 10: unterminated character class`},
		{"gbnf file error names the file", `a`, []string{"--grammar-file", sf}, 2, sf + `: grammar: line 1 col 1: expected a rule name, found '{'`},
		{"two sources", `a`, []string{"--grammar", `root ::= "a"`, "--json-schema", `{}`}, 2, "exactly one of"},
		{"no source", `a`, nil, 2, "exactly one of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := cli(t, c.stdin, append([]string{"grammar", "check"}, c.args...)...)
			code := 0
			if err != nil {
				code = exitCode(err)
			}
			if code != c.code {
				t.Fatalf("exit %d (%v), want %d", code, err, c.code)
			}
			got := out
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q, want it to contain %q", got, c.want)
			}
		})
	}
	out, _, err := cli(t, "", "grammar", "check", "--print-grammar", "--grammar", `root ::= "a"{2}`)
	if err != nil || out != "root ::= \"a\" \"a\"\n" {
		t.Errorf("--print-grammar: %q, %v", out, err)
	}
}

// TestGrammarCheckTokens feeds texts through a real vocabulary's masks:
// SentencePiece pieces, byte-fallback pieces for characters the 512-token
// vocabulary lacks, and the end-of-generation token.
func TestGrammarCheckTokens(t *testing.T) {
	_, _, gg, _ := stories(t)
	const schema = `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"],"additionalProperties":false}`
	out, _, err := cli(t, `{"id":12,"name":"Zoë 😀 once upon a time"}`, "grammar", "check", "--json-schema", schema, "-m", gg)
	if err != nil || !strings.HasPrefix(out, "ok: 45 bytes, ") {
		t.Fatalf("%q, %v", out, err)
	}
	_, _, err = cli(t, `{"id":12,"name":"x"} `, "grammar", "check", "--json-schema", schema, "-m", gg)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "is not allowed by the mask: expected end of input") {
		t.Fatalf("trailing space: %v", err)
	}
	_, _, err = cli(t, `{"id":12`, "grammar", "check", "--json-schema", schema, "-m", gg)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "byte 8: found end of input") {
		t.Fatalf("short: %v", err)
	}
}

// generate under --json-schema: property-test schemas at 3 seeds at
// temperature 0.8 on stories260K; every output that finished with stop
// validates; --grammar holds the output to a GBNF grammar; bad constraints
// fail before the model loads, naming the problem.
func TestGenerateConstrained(t *testing.T) {
	bin, tok, _, _ := stories(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "grammar", "testdata", "property_schemas.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	schemas := strings.Split(strings.TrimSpace(string(b)), "\n")
	stopped, runs := 0, 0
	for i := 0; i < len(schemas); i += 6 {
		sch := testutil.Schema(t, schemas[i])
		for seed := 1; seed <= 3; seed++ {
			out, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0.8", "--seed", strconv.Itoa(seed),
				"-n", "200", "-p", "Once upon a time", "--json", "--json-schema", schemas[i])
			if err != nil {
				t.Fatalf("schema %d: %v\n%s", i, err, stderr)
			}
			var g eosGen
			if err := json.Unmarshal([]byte(out), &g); err != nil {
				t.Fatal(err)
			}
			runs++
			if g.Finish != "stop" {
				continue
			}
			stopped++
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(g.Completion))
			if err != nil {
				t.Fatalf("schema %d seed %d: not JSON: %q", i, seed, g.Completion)
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("schema %d seed %d: %q does not validate: %v", i, seed, g.Completion, err)
			}
		}
	}
	if stopped < runs/2 {
		t.Errorf("only %d of %d outputs finished", stopped, runs)
	}
	out, _, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "30", "-p", "Lily", "--json",
		"--grammar", `root ::= "Lily " ("ran" | "sat" | "sang") " home."`)
	if err != nil {
		t.Fatal(err)
	}
	var g eosGen
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	if g.Finish != "stop" || !slices.Contains([]string{"Lily ran home.", "Lily sat home.", "Lily sang home."}, g.Completion) {
		t.Errorf("--grammar: %q (%s)", g.Completion, g.Finish)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json-schema", `{"type":"object","patternProperties":{"a":{}}}`}, `keyword "patternProperties"`},
		{[]string{"--json-schema", `{"type":`}, "--json-schema: schema: invalid JSON"},
		{[]string{"--json-schema", `{"enum":[]}`}, `keyword "enum": empty`},
		{[]string{"--grammar", `root ::= [a-`}, "--grammar: grammar: line 1"},
		{[]string{"--grammar-file", filepath.Join(t.TempDir(), "none.gbnf")}, "--grammar-file: open"},
		{[]string{"--grammar", `root ::= "a"`, "--json-schema", `{}`}, "give one of"},
	} {
		_, _, err := cli(t, "", append([]string{"generate", "-m", bin, "--tokenizer", tok, "-n", "4"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// bench under --json-schema masks every row and reports the mask time.
func TestBenchConstrained(t *testing.T) {
	bin, tok, _, _ := stories(t)
	out, stderr, err := cli(t, "", "bench", "-m", bin, "--tokenizer", tok, "--runs", "1", "--prompt-tokens", "8", "--gen-tokens", "40", "--parallel", "2", "--json",
		"--json-schema", `{"type":"array","items":{"type":"string"}}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if g := r.Grammar; g == nil || g.Rows < int64(g.GeneratedToks) || g.GeneratedToks == 0 || !(g.PerRowMicros > 0) {
		t.Fatalf("grammar report %+v", r.Grammar)
	}
	if g := r.Grammar; g.Sequences != 2 || g.Completed > 2 {
		t.Errorf("grammar report counts %d of %d values complete, want 2 sequences", g.Completed, g.Sequences)
	}
	// A value of a few tokens completes well within 40: both sequences end
	// with "stop" and are counted complete.
	out, stderr, err = cli(t, "", "bench", "-m", bin, "--tokenizer", tok, "--runs", "1", "--prompt-tokens", "8", "--gen-tokens", "40", "--parallel", "2", "--json",
		"--json-schema", `{"enum":["yes","no"]}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	r = benchReport{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if g := r.Grammar; g == nil || g.Completed != 2 || g.Sequences != 2 || g.GeneratedToks >= 80 {
		t.Errorf("enum schema: grammar report %+v, want both values complete", r.Grammar)
	}
	if _, _, err := cli(t, "", "bench", "-m", bin, "--tokenizer", tok, "--json-schema", `{"enum":[]}`); err == nil || !strings.Contains(err.Error(), `"enum"`) {
		t.Errorf("bad schema: %v", err)
	}
}

// run reads response_format and grammar per line: every property-test
// schema at 3 seeds at temperature 0.8 on stories260K in one batch file;
// every line that finished with stop validates; a line whose schema the
// engine cannot enforce fails alone, naming the keyword.
func TestRunConstrained(t *testing.T) {
	bin, tok, _, _ := stories(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "grammar", "testdata", "property_schemas.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	schemas := strings.Split(strings.TrimSpace(string(b)), "\n")
	var in strings.Builder
	for i, s := range schemas {
		for seed := range 3 {
			fmt.Fprintf(&in, `{"custom_id":"s%d-%d","prompt":"Once upon a time","seed":%d,"temperature":0.8,"max_tokens":200,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}}`+"\n", i, seed, seed+1, s)
		}
	}
	in.WriteString(`{"custom_id":"bad","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","patternProperties":{"a":{}}}}}}` + "\n")
	in.WriteString(`{"custom_id":"gbnf","prompt":"x","grammar":"root ::= \"yes\" | \"no\""}` + "\n")
	dir := t.TempDir()
	pf, out := filepath.Join(dir, "p.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(pf, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := cli(t, "", "run", "-m", bin, "--tokenizer", tok, "--prompts", pf, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "1 line(s) failed") {
		t.Fatalf("want exactly the bad line to fail: %v\n%s", err, stderr)
	}
	stopped, total := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
		var r struct {
			CustomID     string `json:"custom_id"`
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
			Error        string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.CustomID == "bad":
			if !strings.Contains(r.Error, `keyword "patternProperties"`) || !strings.Contains(r.Error, "p.jsonl:") {
				t.Errorf("bad line: %q", r.Error)
			}
			continue
		case r.CustomID == "gbnf":
			if (r.Text != "yes" && r.Text != "no") || r.FinishReason != "stop" {
				t.Errorf("grammar line: %q %s", r.Text, r.FinishReason)
			}
			continue
		}
		total++
		if r.FinishReason != "stop" {
			continue
		}
		stopped++
		var i, seed int
		fmt.Sscanf(r.CustomID, "s%d-%d", &i, &seed)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
		if err != nil {
			t.Errorf("%s: not JSON: %q", r.CustomID, r.Text)
			continue
		}
		if err := testutil.Schema(t, schemas[i]).Validate(inst); err != nil {
			t.Errorf("%s: %q does not validate: %v", r.CustomID, r.Text, err)
		}
	}
	t.Logf("%d of %d lines finished with stop and validate", stopped, total)
	if total != 3*len(schemas) || stopped < total/2 {
		t.Errorf("%d lines, %d finished", total, stopped)
	}
}
