package replay

import (
	"reflect"
	"sync"
	"testing"
)

// TestCounter checks the proxy's counter against Counts.add (maps) for every source and
// type it counts in its arrays, one it does not know, and goroutines counting at once
// (run with -race); and that each array index names its source or type.
func TestCounter(t *testing.T) {
	for i, s := range countedSources {
		if sourceIndex(s) != i {
			t.Errorf("sourceIndex(%q) = %d, want %d", s, sourceIndex(s), i)
		}
	}
	for i, ty := range countedTypes {
		if typeIndex(ty) != i {
			t.Errorf("typeIndex(%q) = %d, want %d", ty, typeIndex(ty), i)
		}
	}
	var mu sync.Mutex
	k := counter{mu: &mu, other: newCounts()}
	want := newCounts()
	sources := append(countedSources[:], "unknown")
	types := append(countedTypes[:], "unknown", "")
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				s, ty := sources[(i+g)%len(sources)], types[(i*7+g)%len(types)]
				mu.Lock()
				k.addLocked(s, ty)
				want.add(s, ty)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got := k.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("counter %+v, want %+v", got, want)
	}
	if got := (&counter{mu: &mu, other: newCounts()}).snapshot(); !reflect.DeepEqual(got, newCounts()) {
		t.Errorf("empty counter %+v", got)
	}
}
