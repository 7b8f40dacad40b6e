package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/pab-dev/pab/"

// row is one package of docs/ARCHITECTURE.md's table: its place in the table (the order
// imports must follow) and the pab packages it may import.
type row struct {
	pos     int
	imports map[string]bool
}

var ticked = regexp.MustCompile("`([a-z0-9/]+)`")

// readTable parses the package table: "| `pkg` | what it is | `a`, `b` (`pkg/sub`: `c`) |".
// The helpers row ("`internal/*` helpers") is not a package; a parenthesis "(`x`: ...)" in
// the imports cell gives the imports of the subpackage x.
func readTable(t *testing.T, path string) map[string]row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]row{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) < 3 {
			continue
		}
		m := ticked.FindStringSubmatch(cells[0])
		if m == nil || strings.Contains(cells[0], "*") {
			continue
		}
		name := m[1]
		last := cells[len(cells)-1]
		main, sub := last, ""
		if i := strings.Index(last, "(`"); i >= 0 {
			main, sub = last[:i], last[i:]
		}
		add := func(name, cell string) {
			r := row{pos: len(rows), imports: map[string]bool{}}
			if strings.Contains(cell, "all of the above") {
				r.imports["*"] = true
			}
			if !strings.Contains(cell, "first-row helpers only") {
				for _, m := range ticked.FindAllStringSubmatch(cell, -1) {
					r.imports[m[1]] = true
				}
			}
			rows[name] = r
		}
		add(name, main)
		if sm := regexp.MustCompile("^\\(`([a-z0-9/]+)`: (.*)\\)").FindStringSubmatch(strings.TrimSpace(sub)); sm != nil {
			add(sm[1], sm[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestImportsFollowTheTable lists every package's pab imports with go list and checks
// each against its row of docs/ARCHITECTURE.md: a package with a row imports only the
// packages its row names (the first row's internal helpers and its own subpackages
// aside), every one of them
// above it in the table; warc, the WARC format, imports no pab package but those helpers.
func TestImportsFollowTheTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rows := readTable(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if len(rows) < 10 {
		t.Fatalf("read %d rows from docs/ARCHITECTURE.md's package table; the table's form changed", len(rows))
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// A helper of the first row is an internal package without a row of its own.
	helper := func(p string) bool { _, own := rows[p]; return strings.HasPrefix(p, "internal/") && !own }
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		r, ok := rows[pkg]
		if !ok || r.imports["*"] {
			continue
		}
		checked++
		var bad []string
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if helper(dep) || strings.HasPrefix(dep, pkg+"/") {
				continue // a package's own subpackages come with it
			}
			if !r.imports[dep] {
				bad = append(bad, dep+" (not in its row)")
			} else if d, ok := rows[dep]; ok && d.pos >= r.pos {
				bad = append(bad, dep+" (not above it in the table)")
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s imports %s: docs/ARCHITECTURE.md's table says otherwise", pkg, strings.Join(bad, ", "))
		}
	}
	if checked < 10 {
		t.Errorf("checked %d packages against the table; want every package with a row", checked)
	}
	if _, ok := rows["warc"]; !ok {
		t.Error("the table has no row for warc")
	}
}
