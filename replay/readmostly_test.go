package replay

import (
	"fmt"
	"sync"
	"testing"
)

// TestReadMostly checks readMostly against a plain map: every key stored is read back with
// its first value (a second store under it keeps the first), whether it is still in the
// small map or merged; full empties it; and goroutines storing and loading at once (run
// with -race) each read back what they stored or what another stored first.
func TestReadMostly(t *testing.T) {
	var m readMostly[string, int]
	model := map[string]int{}
	never := func(int) bool { return false }
	for i := range 5000 {
		k := fmt.Sprint("k", i%3000)
		kept := m.store(k, i, never)
		if _, had := model[k]; kept == had {
			t.Fatalf("store %s: kept %v, model had it %v", k, kept, had)
		}
		if !kept {
			continue
		}
		model[k] = i
		if i%97 == 0 {
			for k, want := range model {
				if got, ok := m.load(k); !ok || got != want {
					t.Fatalf("after %d stores, load %s = %d, %v; want %d", i, k, got, ok, want)
				}
			}
		}
	}
	if m.len() != len(model) {
		t.Fatalf("len %d, want %d", m.len(), len(model))
	}
	if _, ok := m.load("absent"); ok {
		t.Fatal("absent key found")
	}
	m.store("new", 1, func(n int) bool { return n >= 3000 })
	if m.len() != 1 {
		t.Fatalf("after a full store: len %d, want 1", m.len())
	}
	if _, ok := m.load("k1"); ok {
		t.Fatal("an old key survived emptying")
	}
	if v, ok := m.load("new"); !ok || v != 1 {
		t.Fatalf("new = %d, %v", v, ok)
	}

	var c readMostly[int, int]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (i * 7) % 500
				c.store(k, k*10+g%1, never)
				if v, ok := c.load(k); !ok || v != k*10 {
					t.Errorf("goroutine %d: load %d = %d, %v", g, k, v, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c.len() != 500 {
		t.Errorf("len %d, want 500", c.len())
	}
}

// TestReadMostlyPromotesKeysRead: keys too few to be merged by their stores alone (the last
// URLs of a site) leave the mutex's map once they have been read as often as a merge needs,
// and are read from the read-only map from then on; keys never read again stay behind.
func TestReadMostlyPromotesKeysRead(t *testing.T) {
	var m readMostly[string, int]
	never := func(int) bool { return false }
	for i := range 4 * minMerge {
		m.store(fmt.Sprint("k", i), i, never) // merged as they come
	}
	if len(m.dirty) != 0 {
		t.Fatalf("%d keys not merged after %d stores", len(m.dirty), 4*minMerge)
	}
	m.store("late1", 1, never)
	m.store("late2", 2, never)
	inRead := func(k string) bool { _, ok := (*m.read.Load())[k]; return ok }
	if inRead("late1") || inRead("late2") || len(m.dirty) != 2 {
		t.Fatalf("two late keys merged at once (dirty %d)", len(m.dirty))
	}
	need := m.mergeAt()
	for i := range need {
		if v, ok := m.load("late1"); !ok || v != 1 {
			t.Fatalf("load %d of late1 = %d, %v", i, v, ok)
		}
		if i < need-1 && inRead("late1") {
			t.Fatalf("late1 merged after %d loads, before %d", i+1, need)
		}
	}
	if !inRead("late1") || !inRead("late2") || len(m.dirty) != 0 || m.hits != 0 {
		t.Fatalf("after %d loads from the small map: late1 %v late2 %v, dirty %d, hits %d", need, inRead("late1"), inRead("late2"), len(m.dirty), m.hits)
	}
	for k, want := range map[string]int{"k0": 0, "late1": 1, "late2": 2} {
		if v, ok := m.load(k); !ok || v != want {
			t.Fatalf("load %s = %d, %v; want %d", k, v, ok, want)
		}
	}
	if _, ok := m.load("absent"); ok || m.hits != 0 {
		t.Fatalf("a load of an absent key counted (hits %d)", m.hits)
	}
}
