package recording

import (
	"errors"
	"io"

	"github.com/pab-dev/pab/warc"
)

// AuditWARCFile reads the WARC file at path record by record, as an import reads it, and
// returns its problems and its warnings (file warnings, then record warnings, in file
// order). A file the reader refuses is one problem naming the offset. A record whose WARC
// Content-Length does not match where it ends (WARC 1.1 section 5.1) is read on with a
// warning, unless strict: then it is a problem, and the rest of the file is not checked.
func AuditWARCFile(path string, strict bool) (problems, warnings []Problem) {
	r, err := warc.OpenReader(path)
	if err != nil {
		return []Problem{{File: path, Msg: err.Error()}}, nil
	}
	defer func() { _ = r.Close() }()
	r.Strict = strict
	var recWarns []Problem
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problems = append(problems, Problem{File: path, Msg: err.Error()})
			break
		}
		for _, w := range rec.Warnings {
			recWarns = append(recWarns, Problem{File: path, Where: rec.Where(), Msg: w})
		}
	}
	seen := map[Problem]bool{}
	for _, w := range r.Warnings() {
		p := Problem{File: path, Where: w.Where, Msg: w.Msg}
		seen[p] = true
		warnings = append(warnings, p)
	}
	for _, p := range recWarns {
		if !seen[p] { // a resync is both a file and a record warning: listed once
			warnings = append(warnings, p)
		}
	}
	return problems, warnings
}
