package guard

import (
	"os"
	"regexp"
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

// TestParseSnapshotRealQuoted: every line with a ref of a snapshot captured from the real
// @playwright/mcp 0.0.83 on the corpus Axon page is a node, the YAML single-quoted ones
// (names holding ": ") included, with their names unescaped.
func TestParseSnapshotRealQuoted(t *testing.T) {
	data, err := os.ReadFile("testdata/playwright-mcp-0.0.83-axon-snapshot.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	snap, ok := ParseSnapshot(text)
	if !ok {
		t.Fatal("not parsed as a snapshot")
	}
	refs := regexp.MustCompile(`\[ref=([a-z0-9]+)\]`).FindAllStringSubmatch(text, -1)
	quoted := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "- '") {
			quoted++
		}
	}
	if quoted < 10 {
		t.Fatalf("only %d quoted lines in the capture", quoted)
	}
	for _, m := range refs {
		if _, ok := snap.Nodes[m[1]]; !ok {
			t.Errorf("ref %s not parsed", m[1])
		}
	}
	if len(snap.Nodes) != len(refs) {
		t.Errorf("%d nodes parsed, %d refs in the text", len(snap.Nodes), len(refs))
	}
	if n := snap.Nodes["e140"]; n.Role != "generic" || n.Name != "This field will be filled from your profile: personalInfo.firstName" {
		t.Errorf("e140 = %+v", n)
	}
	if snap.PageURL != "https://job-boards.greenhouse.io/axon/jobs/6641960003" {
		t.Errorf("PageURL %q", snap.PageURL)
	}
	// the other forms Playwright writes
	for _, tc := range []struct{ line, role, name, ref string }{
		{`- 'textbox "Work authorization: Yes or No?" [ref=e7]'`, "textbox", "Work authorization: Yes or No?", "e7"},
		{`- 'button "It''s #1: go" [ref=e8] [cursor=pointer]':`, "button", "It's #1: go", "e8"},
		{`- 'link "a {b}" [ref=f1e9]': more text`, "link", "a {b}", "f1e9"},
		{`- checkbox "Q \"x\": y" [checked] [ref=e10]`, "checkbox", `Q "x": y`, "e10"},
		{`- combobox [ref=e11]: Value`, "combobox", "", "e11"},
	} {
		s, ok := ParseSnapshot(tc.line)
		n := s.Nodes[tc.ref]
		if !ok || n.Role != tc.role || n.Name != tc.name {
			t.Errorf("%s: %+v", tc.line, n)
		}
	}
}
