package main

import (
	"fmt"
	"io"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// harVersion is the creator version of the HAR files pab writes.
var harVersion = fmt.Sprintf("recording format %d", recording.RecordingFormat)

// writeRunHAR writes the run HAR of the replay log at logPath (replay.WriteRunHARFile) to
// path and says so on out.
func writeRunHAR(out io.Writer, path, logPath string, b *recording.Bundle) error {
	rep, err := replay.WriteRunHARFile(path, logPath, b, harVersion)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s (%d requests, %d with the recorded body", path, rep.Entries, rep.WithBody)
	if rep.Unreadable > 0 {
		fmt.Fprintf(out, ", %d unreadable log lines skipped", rep.Unreadable)
	}
	fmt.Fprintln(out, ")")
	return nil
}
