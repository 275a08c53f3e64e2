// Package docs holds the project's design documents; its test holds
// ARCHITECTURE.md's package table to the code.
package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// TestImportTable: the "Packages and imports" table of ARCHITECTURE.md names
// every package of the module, and for each row the packages of ours its
// packages import (the third column) are exactly what `go list` says they
// import, so the table cannot drift from the code.
func TestImportTable(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := importTable(t, string(doc))
	imports := listImports(t)
	seen := map[string]bool{}
	for _, r := range rows {
		want := map[string]bool{}
		for _, p := range r.pkgs {
			seen[p] = true
			got, ok := imports[p]
			if !ok {
				t.Errorf("ARCHITECTURE.md names package %q, which go list does not know", p)
				continue
			}
			for _, i := range got {
				want[i] = true
				if !slices.Contains(r.imports, i) {
					t.Errorf("%s imports %s; its row in ARCHITECTURE.md does not say so (it lists %v)", p, i, r.imports)
				}
			}
		}
		for _, i := range r.imports {
			if !want[i] {
				t.Errorf("ARCHITECTURE.md says %v import %s; none does", r.pkgs, i)
			}
		}
	}
	for p := range imports {
		if !seen[p] {
			t.Errorf("package %s has no row in ARCHITECTURE.md's package table", p)
		}
	}
}

type row struct{ pkgs, imports []string }

var tick = regexp.MustCompile("`([^`]+)`")

// importTable reads the table under "## Packages and imports": the first
// column's and the third's backticked names; (root) is the module's root
// package, "—" an empty list, and a nested module's row is skipped.
func importTable(t *testing.T, doc string) []row {
	t.Helper()
	_, after, ok := strings.Cut(doc, "## Packages and imports")
	if !ok {
		t.Fatal(`ARCHITECTURE.md has no "## Packages and imports" section`)
	}
	var rows []row
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "| ---") || strings.HasPrefix(line, "| package") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cols) != 3 {
			t.Fatalf("table row without three columns: %q", line)
		}
		var r row
		switch {
		case strings.Contains(cols[0], "(root)"):
			r.pkgs = []string{"(root)"} // the root package, named after it
		case strings.Contains(cols[0], "nested module"):
			continue // a module of its own (etl/): go list of this one does not see it
		default:
			for _, m := range tick.FindAllStringSubmatch(cols[0], -1) {
				r.pkgs = append(r.pkgs, m[1])
			}
		}
		for _, m := range tick.FindAllStringSubmatch(cols[2], -1) {
			r.imports = append(r.imports, m[1])
		}
		if len(r.pkgs) == 0 {
			t.Fatalf("table row names no package: %q", line)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("ARCHITECTURE.md's package table has no rows")
	}
	return rows
}

// listImports is every package of the module (the etl/ module aside) and
// the packages of ours it imports, outside its tests.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	m := map[string][]string{}
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := short(p.ImportPath)
		if name == "docs" {
			continue
		}
		var ours []string
		for _, i := range p.Imports {
			if i == module || strings.HasPrefix(i, module+"/") {
				ours = append(ours, short(i))
			}
		}
		m[name] = ours
	}
	return m
}

func short(p string) string {
	if p == module {
		return "(root)"
	}
	return strings.TrimPrefix(p, module+"/")
}
