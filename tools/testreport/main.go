// Command testreport reads the output of `go test -json` on stdin and prints what a person
// reads in CI (docs/testing.md): each package's result line, the whole output of every
// failed test, and at the end the counts, the failed tests, the tests that never ended and
// every skipped test with the reason it gave. With -ci (default: $CI is "true") a skipped
// test is a failure unless the table of allowed skips in -allowed (docs/testing.md) lists
// it and it gave a reason. The exit status is 0 when everything passed, 1 otherwise, 2
// on a usage error.
//
//	go test -json -race ./... 2>&1 | go run ./tools/testreport -allowed docs/testing.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pab-dev/pab/internal/readlimit"
)

// maxAllowedBytes bounds docs/testing.md.
const maxAllowedBytes = 1 << 20

func main() {
	allowedPath := flag.String("allowed", "docs/testing.md", "the Markdown file with the table of allowed skips (section \""+allowedHeading+"\")")
	ci := flag.Bool("ci", os.Getenv("CI") == "true", "a skip not in the table of allowed skips is a failure (default: $CI is \"true\")")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ./... 2>&1 | testreport [-allowed docs/testing.md] [-ci]")
		os.Exit(2)
	}
	data, err := readlimit.File(*allowedPath, maxAllowedBytes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	allowed, err := ParseAllowed(*allowedPath, string(data))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r := NewReport(os.Stdout)
	if err := r.Read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport: read stdin:", err)
		os.Exit(1)
	}
	if !r.Summary(*ci, allowed) {
		os.Exit(1)
	}
}
