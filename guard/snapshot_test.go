package guard

import (
	"strings"
	"testing"
)

const sampleSnapshot = "### Page\n- Page URL: https://job-boards.greenhouse.io/axon/jobs/1\n- Page Title: Apply\n### Snapshot\n```yaml\n" +
	`- generic [active] [ref=e1]:
  - heading "Apply for this job" [level=1] [ref=e3]
  - textbox "First Name*" [ref=e4]
  - checkbox "I agree to the \"privacy\" policy" [ref=e9]
  - button "Submit application" [ref=e12] [cursor=pointer]
  - link "Back to jobs" [ref=e13] [cursor=pointer]:
    - /url: /axon/jobs
  - generic [ref=e14]
  - text: plain text line
  - button "Frame button" [ref=f1e3]
  - paragraph [ref=e20]: some text with "quotes" [ref=e99]
` + "```"

func TestParseSnapshot(t *testing.T) {
	s, ok := ParseSnapshot(sampleSnapshot)
	if !ok {
		t.Fatal("no nodes")
	}
	if s.PageURL != "https://job-boards.greenhouse.io/axon/jobs/1" {
		t.Errorf("PageURL %q", s.PageURL)
	}
	want := map[string][2]string{"e3": {"heading", "Apply for this job"}, "e4": {"textbox", "First Name*"},
		"e9": {"checkbox", `I agree to the "privacy" policy`}, "e12": {"button", "Submit application"},
		"e13": {"link", "Back to jobs"}, "e14": {"generic", ""}, "f1e3": {"button", "Frame button"}, "e20": {"paragraph", ""}}
	for ref, rn := range want {
		n, ok := s.Nodes[ref]
		if !ok || n.Role != rn[0] || n.Name != rn[1] {
			t.Errorf("%s = %+v, want %v", ref, n, rn)
		}
	}
	if s.Nodes["e13"].URL != "/axon/jobs" {
		t.Errorf("link url %q", s.Nodes["e13"].URL)
	}
	if _, ok := s.Nodes["e99"]; ok {
		t.Error("a ref inside text content was taken as a node")
	}
	if _, ok := ParseSnapshot("no snapshot here\n- just text"); ok {
		t.Error("non-snapshot parsed as one")
	}
}

func TestRefTracker(t *testing.T) {
	var tr refTracker
	if _, r := tr.lookup("e1"); !strings.Contains(r, "no snapshot") {
		t.Errorf("no snapshot: %q", r)
	}
	s1, _ := ParseSnapshot(`- button "A" [ref=e1]` + "\n" + `- button "B" [ref=e2]`)
	tr.update(s1)
	if n, r := tr.lookup("e1"); r != "" || n.Name != "A" {
		t.Errorf("lookup e1: %v %q", n, r)
	}
	s2, _ := ParseSnapshot(`- button "C" [ref=e3]`)
	tr.update(s2)
	if _, r := tr.lookup("e1"); !strings.Contains(r, "stale") || !strings.Contains(r, "browser_snapshot") {
		t.Errorf("old ref: %q", r)
	}
	if _, r := tr.lookup("e77"); !strings.Contains(r, "not in the latest snapshot") {
		t.Errorf("unknown ref: %q", r)
	}
	if _, r := tr.lookup("button.submit"); !strings.Contains(r, "not selectors") {
		t.Errorf("selector: %q", r)
	}
	tr.invalidate()
	if _, r := tr.lookup("e3"); !strings.Contains(r, "page changed") {
		t.Errorf("after page change: %q", r)
	}
}

func FuzzParseSnapshot(f *testing.F) {
	f.Add(sampleSnapshot)
	f.Add(`- button "a\"b\\" [ref=e1]:` + "\n  - /url: \"x\"")
	f.Add("- [ref=]\n- x \"unterminated [ref=e2]")
	f.Fuzz(func(t *testing.T, s string) {
		snap, ok := ParseSnapshot(s)
		if snap == nil || ok != (len(snap.Nodes) > 0) {
			t.Fatal("inconsistent result")
		}
		for ref, n := range snap.Nodes {
			if ref != n.Ref || ref == "" {
				t.Fatalf("bad node %q %+v", ref, n)
			}
		}
	})
}
