package words

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		plural, ct string
	}{{0, "pages", "0 pages"}, {1, "page", "1 page"}, {2, "pages", "2 pages"}, {-1, "pages", "-1 pages"}} {
		if got := Plural(tc.n, "page"); got != tc.plural {
			t.Errorf("Plural(%d) = %q", tc.n, got)
		}
		if got := Count(tc.n, "page"); got != tc.ct {
			t.Errorf("Count(%d) = %q", tc.n, got)
		}
	}
}
