package main

import (
	"embed"
	"strings"
)

// helpFiles holds the long help texts of the commands, one help/<command>.txt each
// (a subcommand as help/<command>-<sub>.txt).
//
//go:embed help/*.txt
var helpFiles embed.FS

// longHelp is the text of help/<name>.txt without its final newline ("" when missing:
// TestLongHelp fails then).
func longHelp(name string) string {
	b, _ := helpFiles.ReadFile("help/" + name + ".txt")
	return strings.TrimSuffix(string(b), "\n")
}
