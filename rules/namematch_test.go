package rules

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randName builds a short string from an alphabet chosen to make matches likely: a few
// letters in both cases, '_', '*', a multi-byte rune (é, whose bytes have no ASCII case)
// and its upper-case form É.
func randName(r *rand.Rand, maxLen int, withStars bool) string {
	alpha := []string{"a", "A", "b", "B", "_", "é", "É", "1"}
	if withStars {
		alpha = append(alpha, "*", "*")
	}
	n := r.IntN(maxLen + 1)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(alpha[r.IntN(len(alpha))])
	}
	return b.String()
}

// TestNameMatcherMatchesWildcard checks the compiled matcher against the plain list
// matcher (matchAnyName) over many random pattern lists and names.
func TestNameMatcherMatchesWildcard(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	agree, matched := 0, 0
	for round := 0; round < 3000; round++ {
		pats := make([]string, r.IntN(6))
		for i := range pats {
			pats[i] = randName(r, 6, true)
		}
		m := compileNames(pats)
		for j := 0; j < 60; j++ {
			name := randName(r, 8, j%7 == 0)
			if j%5 == 0 && len(pats) > 0 { // a name built from a pattern: stars filled in
				name = strings.ReplaceAll(pats[r.IntN(len(pats))], "*", randName(r, 3, false))
				if r.IntN(2) == 0 {
					name = strings.ToUpper(name)
				}
			}
			want := matchAnyName(pats, name)
			if got := m.match(name); got != want {
				t.Fatalf("patterns %q, name %q: compiled %v, wildcard %v", pats, name, got, want)
			}
			agree++
			if want {
				matched++
			}
		}
	}
	if matched < agree/10 || matched > agree*9/10 {
		t.Fatalf("%d of %d names matched: the generator does not exercise both outcomes", matched, agree)
	}
}

// TestNameMatcherDefaultRules checks the compiled drop_params and body_drop of the
// shipped rules against the lists they come from, over the lists' own names with their
// stars filled, their case changed, and cut short.
func TestNameMatcherDefaultRules(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, st := range s.sites {
		for _, c := range []struct {
			list []string
			m    *nameMatcher
		}{{st.drop, st.dropM}, {st.bodyDrop, st.bodyDropM}} {
			if len(c.list) > 0 && c.m.empty() {
				t.Fatalf("site %s: %d patterns compiled to an empty matcher", st.name, len(c.list))
			}
			var names []string
			for _, p := range c.list {
				for _, fill := range []string{"", "x", "ID", "_a_"} {
					n := strings.ReplaceAll(p, "*", fill)
					names = append(names, n, strings.ToUpper(n), n[:len(n)/2], n+"z", "z"+n)
				}
			}
			names = append(names, "", "id", "page", "q", "sort", "utm", "UTM_SOURCE", strings.Repeat("a", 100))
			for _, n := range names {
				if got, want := c.m.match(n), matchAnyName(c.list, n); got != want {
					t.Fatalf("site %s: name %q: compiled %v, wildcard %v", st.name, n, got, want)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d names checked: the default rules have fewer patterns than expected", checked)
	}
}

func TestNameMatcherForms(t *testing.T) {
	cases := []struct {
		pats []string
		name string
		want bool
	}{
		{[]string{"utm_*"}, "UTM_Source", true},
		{[]string{"utm_*"}, "xutm_source", false},
		{[]string{"*_id"}, "Session_ID", true},
		{[]string{"*_id"}, "_idx", false},
		{[]string{"Gclid"}, "gCLID", true},
		{[]string{"gclid"}, "gclid2", false},
		{[]string{"**"}, "", true},
		{[]string{"a*b*c"}, "aXXbYYc", true},
		{[]string{"*tok*"}, "csrfTOKen", true},
		{[]string{"é"}, "É", false}, // only ASCII case is folded
		{nil, "x", false},
		{[]string{strings.Repeat("a", 80)}, strings.Repeat("A", 80), true},
	}
	for _, c := range cases {
		if got := compileNames(c.pats).match(c.name); got != c.want {
			t.Errorf("%q ~ %q: got %v, want %v", c.pats, c.name, got, c.want)
		}
		if got := matchAnyName(c.pats, c.name); got != c.want {
			t.Errorf("old matcher %q ~ %q: got %v, want %v", c.pats, c.name, got, c.want)
		}
	}
}

// FuzzNameMatcher checks that the compiled matcher and the list matcher agree; the input
// is the patterns, separated by newlines, and the name.
func FuzzNameMatcher(f *testing.F) {
	f.Add("utm_*\n*_id\ngclid\na*b", "UTM_x")
	f.Add("**\n", "")
	f.Fuzz(func(t *testing.T, pats, name string) {
		if len(pats) > 4096 || len(name) > 4096 {
			return
		}
		list := strings.Split(pats, "\n")
		if got, want := compileNames(list).match(name), matchAnyName(list, name); got != want {
			t.Fatalf("patterns %q, name %q: compiled %v, wildcard %v", list, name, got, want)
		}
	})
}
