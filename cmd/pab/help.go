package main

import (
	"embed"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/recording"
)

// helpFiles holds the long help texts of the commands, one help/<command>.txt each
// (a subcommand as help/<command>-<sub>.txt).
//
//go:embed help/*.txt
var helpFiles embed.FS

// formatWord in a help text stands for the current recording format's number
// (recording.RecordingFormat), so that no help text can name a stale one; formatWord2 for the
// older format 2 (recording.RecordingFormat2).
const (
	formatWord  = "{{format}}"
	formatWord2 = "{{format2}}"
)

// withFormat replaces formatWord and formatWord2 in s by their numbers.
func withFormat(s string) string {
	s = strings.ReplaceAll(s, formatWord, strconv.Itoa(recording.RecordingFormat))
	return strings.ReplaceAll(s, formatWord2, strconv.Itoa(recording.RecordingFormat2))
}

// longHelp is the text of help/<name>.txt without its final newline, the format words
// replaced (withFormat) ("" when missing: TestLongHelp fails then).
func longHelp(name string) string {
	b, _ := helpFiles.ReadFile("help/" + name + ".txt")
	return withFormat(strings.TrimSuffix(string(b), "\n"))
}
