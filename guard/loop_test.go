package guard

import "testing"

func TestRepeatGuard(t *testing.T) {
	var g RepeatGuard
	args := map[string]any{"b": 1.0, "a": "x"}
	want := []RepeatVerdict{RepeatOK, RepeatOK, RepeatNudge, RepeatNudge, RepeatStop}
	for i, w := range want {
		if v, n := g.Observe("browser_click", map[string]any{"a": "x", "b": 1.0}); v != w || n != i+1 {
			t.Fatalf("call %d: verdict %v count %d, want %v", i+1, v, n, w)
		}
	}
	if v, n := g.Observe("browser_click", map[string]any{"a": "y"}); v != RepeatOK || n != 1 {
		t.Fatalf("a different call must reset: %v %d", v, n)
	}
	if Signature("t", args) != Signature("t", map[string]any{"a": "x", "b": 1.0}) {
		t.Fatal("signature not canonical")
	}
	if Signature("t", nil) != "t:{}" {
		t.Fatal(Signature("t", nil))
	}
}
