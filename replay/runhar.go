package replay

// runhar.go: a run's HAR (pab grade --har, pab run --har, pab export --har --log): the
// replay log joined with the recorded exchanges that answered (docs/replay.md "A run as a
// HAR").

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/recording"
)

// RunHARFile is the name of a run's HAR in its directory.
const RunHARFile = "run.har"

// RunHARReport counts what WriteRunHAR wrote.
type RunHARReport struct {
	// Entries is the number of HAR entries (log lines read); WithBody those whose response
	// body is the recorded exchange's; Unreadable the log lines skipped.
	Entries, WithBody, Unreadable int
}

// WriteRunHARFile writes the run HAR of the log at logPath (WriteRunHAR) to path through
// a temporary file renamed into place.
func WriteRunHARFile(path, logPath string, b *recording.Bundle, version string) (RunHARReport, error) {
	var rep RunHARReport
	err := atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		f, err := os.Open(logPath)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			return fmt.Errorf("run HAR: %s is not a regular file", logPath)
		}
		defer f.Close()
		rep, err = WriteRunHAR(w, f, b, version)
		return err
	})
	return rep, err
}

// WriteRunHAR writes the requests of a replay log (r, JSON Lines as replay --log writes
// them) as a HAR 1.2 file to w, one entry per request line in log order: the request's
// method, URL, query and the Sec-Fetch-Dest it sent (the log keeps no other request
// field, nor request bodies: bodySize -1, except for an exact answer to a request with a
// body, which gets the recorded request's body and Content-Type, marked
// "_pab".requestBodyFromRecording, so that the HAR imports to exchanges the run's requests
// match); the answer's status; when the line names a
// recorded exchange of b ("entry") whose status is the one sent, that exchange's response
// header fields and body (as recorded: documents were served with replay's page clock
// script added, which is not in it); otherwise no body text and "_pab".bodyNotCaptured.
// Timings come from the log: "time" and "wait" are the line's ms (the lookup, not the
// streaming of the body), send and receive 0. Each entry's "_pab" holds the line's source
// (exact, search, promo, fuzzy, blocked, preflight, miss), entry and note. Unreadable log
// lines are skipped and counted. Bodies are held one at a time.
func WriteRunHAR(w io.Writer, r io.Reader, b *recording.Bundle, version string) (RunHARReport, error) {
	var rep RunHARReport
	hw, err := har.NewWriter(w, har.Log{Creator: har.Creator{Name: "pab", Version: version, Comment: "a replayed run: the replay log joined with the recording"}})
	if err != nil {
		return rep, err
	}
	sc := NewLogScanner(r)
	for sc.Scan() {
		l := sc.Log()
		if l == nil {
			rep.Unreadable++
			continue
		}
		he := &har.Entry{StartedDateTime: l.Time, Time: l.MS,
			Timings: har.Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1, Wait: l.MS}}
		he.Request = har.Request{Method: l.Method, URL: l.URL, HTTPVersion: "HTTP/1.1", HeadersSize: -1, BodySize: -1}
		if l.Dest != "" {
			he.Request.Headers = []har.Header{{Name: "Sec-Fetch-Dest", Value: l.Dest}}
		}
		he.Request.QueryString = har.QueryString(l.URL)
		he.Pab = &har.PabInfo{Source: string(l.Source), Entry: l.Entry, Note: l.Note}
		var e *recording.Entry
		if l.Entry != "" && b != nil {
			e = b.ByID(l.Entry)
		}
		if e != nil && e.Status == l.Status && !e.Unresolved {
			rec, err := recording.HAREntry(b, e)
			if err != nil {
				return rep, fmt.Errorf("run HAR: log line %d: %w", sc.Line(), err)
			}
			he.Response = rec.Response
			rep.WithBody++
			if l.Source == SourceExact && rec.Request.PostData != nil && rec.Request.Method == l.Method {
				// an exact answer: the request had the recorded one's key, so its body is the
				// recorded body under the rules (marked: the log keeps none of its own)
				he.Request.PostData, he.Request.BodySize = rec.Request.PostData, rec.Request.BodySize
				ct := rec.Request.PostData.MimeType
				for _, h := range rec.Request.Headers {
					if http.CanonicalHeaderKey(h.Name) == "Content-Type" {
						ct = h.Value
					}
				}
				if ct != "" {
					he.Request.Headers = append(he.Request.Headers, har.Header{Name: "Content-Type", Value: ct})
				}
				he.Pab.RequestBodyFromRecording = true
			}
		} else {
			he.Response = har.Response{Status: l.Status, StatusText: http.StatusText(l.Status), HTTPVersion: "HTTP/1.1", HeadersSize: -1, BodySize: -1,
				Content: har.Content{Size: -1, MimeType: "x-unknown"}}
			he.Pab.BodyNotCaptured = true
		}
		if err := hw.WriteEntry(he); err != nil {
			return rep, err
		}
		rep.Entries++
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("run HAR: read log: %w", err)
	}
	return rep, hw.Close()
}
