package main

import (
	"fmt"
	"strings"
)

// modulePath is pab's module; a package in the table may be written relative to it.
const modulePath = "github.com/pab-dev/pab"

// allowedHeading starts the section of docs/testing.md that holds the table.
const allowedHeading = "## Allowed skips"

// Allowed is the table of skips CI accepts: docs/testing.md's section "## Allowed skips",
// a Markdown table whose rows are | package | test | why the environment cannot run it |.
type Allowed struct {
	// Path is the file it was read from, for messages.
	Path string
	rows []allowedRow
}

type allowedRow struct{ pkg, test, why string }

// ParseAllowed reads the table from the text of docs/testing.md (path names it in errors).
// Cells may be in backticks. The package is an import path or one relative to pab's module
// ("internal/mitm"); the test is a name ("TestX", "TestX/sub") or "TestX/*" for every
// subtest of TestX. Every row needs all three cells, the reason not empty; the header row
// and the |---| row are skipped. A file without the section allows nothing. Errors name the
// file and line.
func ParseAllowed(path, text string) (*Allowed, error) {
	a := &Allowed{Path: path}
	in := false
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "## ") {
			in = t == allowedHeading
			continue
		}
		if !in || !strings.HasPrefix(t, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		if len(cells) != 3 {
			return nil, fmt.Errorf("%s:%d: a row of the allowed skips has %d cells; want | package | test | why |", path, i+1, len(cells))
		}
		for j := range cells {
			cells[j] = strings.Trim(strings.TrimSpace(cells[j]), "`")
		}
		if strings.Trim(cells[0], "-: ") == "" || strings.EqualFold(cells[0], "package") {
			continue // the |---| row, the header
		}
		if cells[1] == "" || !strings.HasPrefix(cells[1], "Test") && !strings.HasPrefix(cells[1], "Fuzz") {
			return nil, fmt.Errorf("%s:%d: test %q: want a test name (TestX, TestX/sub or TestX/*)", path, i+1, cells[1])
		}
		if cells[2] == "" {
			return nil, fmt.Errorf("%s:%d: %s %s: say why the environment cannot run it", path, i+1, cells[0], cells[1])
		}
		pkg := cells[0]
		if !strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
			pkg = modulePath + "/" + pkg
		}
		a.rows = append(a.rows, allowedRow{pkg: pkg, test: cells[1], why: cells[2]})
	}
	return a, nil
}

// Allows returns the table's reason for a skip of test in pkg (an import path), and
// whether the table lists it. A nil *Allowed allows nothing.
func (a *Allowed) Allows(pkg, test string) (string, bool) {
	if a == nil {
		return "", false
	}
	for _, r := range a.rows {
		if r.pkg != pkg {
			continue
		}
		if r.test == test {
			return r.why, true
		}
		if parent, ok := strings.CutSuffix(r.test, "/*"); ok && strings.HasPrefix(test, parent+"/") {
			return r.why, true
		}
	}
	return "", false
}
