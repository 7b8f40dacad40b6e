package recording

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/warc"
)

// AuditWARCFile reads the WARC file at path record by record, as an import reads it, and
// returns its problems and its warnings (file warnings, then record warnings, in file
// order). A response's payload framing is judged as the import would (bundle-format.md
// "Payload framing"): chunked framing removed only as a browser reads it, or an HTML body
// longer than its Content-Length, is a warning; chunked framing that breaks off (rule F6)
// is a problem. A file the reader refuses is one problem naming the offset. A record whose WARC
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
		if msg, problem := auditFraming(rec); msg != "" {
			p := Problem{File: path, Where: rec.Where(), Msg: msg}
			if problem {
				problems = append(problems, p)
			} else {
				recWarns = append(recWarns, p)
			}
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

// auditFraming judges the framing of rec's body as the import would: a warning (problem
// false) naming what a browser's reading of chunked framing repairs, or an HTML body longer
// than its Content-Length; a problem for chunked framing that breaks off (rule F6); "" when
// nothing is to be said or the body was not loaded.
func auditFraming(rec *warc.Record) (msg string, problem bool) {
	if rec.Type != "response" || rec.HTTP == nil || rec.Block == nil {
		return "", false
	}
	h := rec.HTTP.HTTPHeader()
	body := rec.HTTP.Body
	if warc.HasToken(h.Values("Transfer-Encoding"), "chunked") {
		dc := warc.NewChunkDecoder(io.Discard)
		dc.Write(body)
		switch {
		case dc.OK() && len(dc.Repairs()) > 0:
			return fmt.Sprintf("chunked body de-chunked as a browser reads it (%s)", strings.Join(dc.Repairs(), ", ")), false
		case dc.Broken():
			return "body says chunked and starts as chunks, but its framing breaks off: pab import stores it as recorded, chunk-size lines included, and replay serves it so with a note (rule F6)", true
		}
		return "", false
	}
	cl, ok := singleContentLength(h)
	if !ok || int64(len(body)) <= cl {
		return "", false
	}
	if excess := body[cl:]; len(excess) <= maxFramingExcess && strings.Trim(string(excess), "\r\n") == "" {
		return "", false // cut by rule F1
	}
	if httpx.MediaType(h.Get("Content-Type")) == "text/html" {
		return fmt.Sprintf("HTML payload of %d bytes is longer than its Content-Length %d: pab import keeps it whole, and replay notes it", len(body), cl), false
	}
	return "", false
}
