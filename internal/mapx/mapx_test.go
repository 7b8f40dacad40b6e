package mapx

import (
	"slices"
	"testing"
)

func TestOrderedKeys(t *testing.T) {
	m := map[string]int{"fuzzy": 1, "exact": 5, "zeta": 0, "alpha": 2, "miss": 3}
	got := OrderedKeys(m, []string{"exact", "absent", "miss", "exact"})
	want := []string{"exact", "miss", "alpha", "fuzzy", "zeta"}
	if !slices.Equal(got, want) {
		t.Errorf("OrderedKeys = %q, want %q", got, want)
	}
	if got := OrderedKeys(map[string]bool{}, []string{"a"}); len(got) != 0 {
		t.Errorf("empty map: %q", got)
	}
	if got := OrderedKeys(map[int]string{3: "", 1: "", 2: ""}, nil); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("no preference: %v", got)
	}
}
