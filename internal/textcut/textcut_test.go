package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestCuts(t *testing.T) {
	for _, c := range []struct {
		s   string
		n   int
		pre string
		cut string
	}{
		{"abc", 5, "abc", "abc"},
		{"abcdef", 3, "abc", "abc..."},
		{"aé", 2, "a", "a..."},
		{"日本語", 4, "日", "日..."},
		{"日本語です", 7, "日本", "日本..."},
	} {
		if got := Prefix(c.s, c.n); got != c.pre {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.pre)
		}
		if got := Cut(c.s, c.n, "..."); got != c.cut {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.cut)
		}
		got := Fit(c.s, c.n, "…")
		if len(c.s) > c.n && got == c.s {
			t.Errorf("Fit(%q, %d) did not cut", c.s, c.n)
		}
		if len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("Fit(%q, %d) = %q: longer than %d or not UTF-8", c.s, c.n, got, c.n)
		}
	}
}

func FuzzCuts(f *testing.F) {
	f.Add("日本語です", 7)
	f.Add("abc", -1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		p := Prefix(s, n)
		if len(p) > max(n, 0) && p != s {
			t.Fatalf("Prefix longer than %d: %q", n, p)
		}
		if utf8.ValidString(s) && !utf8.ValidString(p) {
			t.Fatalf("Prefix of valid text is not valid: %q", p)
		}
		if f := Fit(s, n, "…"); len(f) > max(n, 0) && f != s {
			t.Fatalf("Fit longer than %d: %q", n, f)
		}
	})
}
