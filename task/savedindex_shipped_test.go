package task

import (
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// TestSavedIndexShippedTasks: for every task shipped in tasks/, the index read in place
// from the saved index (second Open: the bundle from its entry table, nothing of
// entries.jsonl read) answers and explains every probe (each recorded request as recorded,
// with a parameter added and one changed, as HEAD, one path deeper, and its search text cut
// short) exactly as the index computed from the recording on the first Open: the exact,
// search, promo, fuzzy and latest steps alike.
func TestSavedIndexShippedTasks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	repo := &Repo{Root: root}
	// a fresh clone's files may be seconds old: the saved index is written all the same
	orig := stampRacyAge
	stampRacyAge = 0
	t.Cleanup(func() { stampRacyAge = orig })
	dirs, err := filepath.Glob(filepath.Join(repo.TasksDir(), "*", "recording"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("shipped tasks: %v %v", dirs, err)
	}
	for _, d := range dirs {
		id := filepath.Base(filepath.Dir(d))
		t.Run(id, func(t *testing.T) {
			t.Setenv("PAB_CACHE", t.TempDir())
			first, err := Open(id, repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			reqs := shippedProbes(first)
			want := probeDecisions(first.Index, reqs)
			first.Index.WaitSaved()
			if st := first.Index.SavedIndexState(); !strings.HasPrefix(st, "written: ") {
				first.Close()
				t.Fatalf("no saved index was written for this task: %q", st)
			}
			first.Close()
			again, err := Open(id, repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if st := again.Index.SavedIndexState(); st != "loaded" || !again.Bundle.FromTable() {
				t.Fatalf("second open: %q, from the entry table %v; want both", st, again.Bundle.FromTable())
			}
			got := probeDecisions(again.Index, reqs)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("probe %s %s:\nread in place: %s\ncomputed:      %s", reqs[i].Method, reqs[i].URL, got[i], want[i])
				}
			}
		})
	}
}

// shippedProbes are the requests TestSavedIndexShippedTasks asks of a recording.
func shippedProbes(o *Opened) []rules.Request {
	var out []rules.Request
	b := o.Bundle
	for i := range b.Len() {
		e := b.Entry(i)
		u, err := url.Parse(e.URL)
		if err != nil {
			continue
		}
		body, _ := b.RequestBody(e)
		out = append(out, rules.Request{Method: e.Method, URL: u, Body: body, ContentType: e.ReqType})
		out = append(out, rules.Request{Method: "HEAD", URL: u})
		v := *u
		q := v.Query()
		q.Set("zz", "1")
		for k := range q {
			if k != "zz" {
				q.Set(k, q.Get(k)+"x")
				break
			}
		}
		v.RawQuery = q.Encode()
		out = append(out, rules.Request{Method: e.Method, URL: &v})
		w := *u
		w.Path += "/deeper"
		out = append(out, rules.Request{Method: "GET", URL: &w})
		if ep := o.Rules.Endpoint(rules.Request{Method: e.Method, URL: u}); ep != nil && ep.TextParam != "" {
			if text := u.Query().Get(ep.TextParam); len(text) > 2 {
				x := *u
				qq := x.Query()
				qq.Set(ep.TextParam, text[:len(text)-2])
				x.RawQuery = qq.Encode()
				out = append(out, rules.Request{Method: e.Method, URL: &x})
			}
		}
	}
	return out
}

// probeDecisions renders the answer and explanation of each request.
func probeDecisions(ix *replay.Index, reqs []rules.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		var sb strings.Builder
		ix.Explain(r).Print(&sb)
		res := ix.Lookup(r)
		id := "-"
		if res.Entry != nil {
			id = res.Entry.ID
		}
		sb.WriteString(string(res.Source) + " " + id + " " + res.Note + " " + res.Rule + " " + res.Endpoint)
		out[i] = sb.String()
	}
	return out
}
