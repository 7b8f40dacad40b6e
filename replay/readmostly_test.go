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
