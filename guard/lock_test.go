package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The submit lock is armed (with its token) right before an allowed auto_submit click and
// disarmed right after; without a token no lock call is made.
func TestBridgeSubmitLockArmedAroundSubmit(t *testing.T) {
	for _, token := range []string{"", "0123abcd"} {
		h := newGHarness(t, "auto_submit", "")
		h.b.cfg.LockToken = token
		h.open(t)
		if r := h.call(t, "browser_click", map[string]any{"target": "e12"}); r.IsError {
			t.Fatalf("submit: %s", textOf(r))
		}
		var seq []string
		for _, c := range h.fb.calls {
			fn, _ := c.args["function"].(string)
			switch {
			case c.name == "browser_evaluate" && strings.Contains(fn, "window.__pabGuardLock(\""):
				if !strings.Contains(fn, `"`+token+`"`) {
					t.Errorf("lock call without the token: %s", fn)
				}
				if strings.Contains(fn, ", true)") {
					seq = append(seq, "arm")
				} else {
					seq = append(seq, "disarm")
				}
			case c.name == "browser_click" && c.args["target"] == "e12":
				seq = append(seq, "click")
			}
		}
		want := "arm click disarm"
		if token == "" {
			want = "click"
		}
		if got := strings.Join(seq, " "); got != want {
			t.Errorf("token %q: calls %q, want %q", token, got, want)
		}
	}
}

func TestSubmitLockScript(t *testing.T) {
	tok := NewLockToken()
	if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Fatalf("token %q", tok)
	}
	s := SubmitLockScript(tok)
	if strings.Contains(s, "@TOKEN@") || !strings.Contains(s, `"`+tok+`"`) {
		t.Fatal("token not substituted")
	}
	for _, want := range []string{"HTMLFormElement.prototype", "requestSubmit", `addEventListener("submit"`, "window.fetch", "XMLHttpRequest", "sendBeacon", "__pabGuardTake"} {
		if !strings.Contains(s, want) {
			t.Errorf("lock script lacks %s", want)
		}
	}
}

// With UploadDir, the uploaded file is a copy of the approved bytes inside UploadDir.
func TestBridgeUploadStaged(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "")
	up := t.TempDir()
	h.b.cfg.UploadDir = up
	h.open(t)
	h.call(t, "browser_click", map[string]any{"target": "e14"})
	if r := h.call(t, "upload_artifact", map[string]any{"kind": "resume"}); r.IsError {
		t.Fatalf("upload: %s", textOf(r))
	}
	var got string
	for _, c := range h.fb.calls {
		if c.name == "browser_file_upload" {
			got, _ = c.args["paths"].([]any)[0].(string)
		}
	}
	if !strings.HasPrefix(got, up+string(filepath.Separator)) {
		t.Fatalf("uploaded %q, want a copy under %s", got, up)
	}
	copyData, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(h.dir, "resume.pdf"))
	if string(copyData) != string(orig) {
		t.Error("the staged copy differs from the approved file")
	}
	if _, err := stageArtifact(filepath.Join(h.dir, "resume.pdf"), strings.Repeat("0", 64), t.TempDir()); !errors.Is(err, ErrArtifactChanged) {
		t.Errorf("stage with a wrong hash: %v, want ErrArtifactChanged", err)
	}
}
