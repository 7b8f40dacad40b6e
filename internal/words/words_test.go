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

func TestWasAndWideCounts(t *testing.T) {
	if Was(1) != "was" || Was(0) != "were" || Was(int64(2)) != "were" {
		t.Errorf("Was: %s %s %s", Was(1), Was(0), Was(int64(2)))
	}
	if got := Count(int64(1), "exchange"); got != "1 exchange" {
		t.Errorf("Count(int64(1)) = %q", got)
	}
	if got := Count(uint32(3), "byte"); got != "3 bytes" {
		t.Errorf("Count(uint32(3)) = %q", got)
	}
}
