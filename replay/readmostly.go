package replay

import (
	"sync"
	"sync/atomic"
)

// readMostly is a map that every request reads and few write (the proxy's memos of
// lookups, response heads and small bodies). A read of a key stored a while ago takes no
// lock and writes no shared memory, so requests answered side by side on different CPUs do
// not take turns on one lock's cache line (a sync.RWMutex's read lock is two atomic adds to
// one word per read). A new key goes to a small map under a mutex, read under that mutex
// until the small map holds a quarter as many keys as the read-only one (at least
// minMerge): both are then merged into a new read-only map, so each key is copied a
// bounded number of times on average. Safe for concurrent use; the zero value is empty.
type readMostly[K comparable, V any] struct {
	read  atomic.Pointer[map[K]V] // never changed once stored; nil: empty
	mu    sync.Mutex
	dirty map[K]V // keys not in read yet
	n     int     // len(*read) + len(dirty), under mu
}

// minMerge is the fewest new keys a readMostly merges into its read-only map at once.
const minMerge = 32

// load returns the value stored under k.
func (m *readMostly[K, V]) load(k K) (V, bool) {
	if r := m.read.Load(); r != nil {
		if v, ok := (*r)[k]; ok {
			return v, true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.read.Load(); r != nil { // merged since the read above
		if v, ok := (*r)[k]; ok {
			return v, true
		}
	}
	v, ok := m.dirty[k]
	return v, ok
}

// len is the number of keys stored.
func (m *readMostly[K, V]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// store keeps v under k unless a value is stored under k already, after emptying m when
// full(number of keys stored) says so; it reports whether v was kept.
func (m *readMostly[K, V]) store(k K, v V, full func(n int) bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if full(m.n) {
		m.read.Store(nil)
		m.dirty, m.n = nil, 0
	}
	r := m.read.Load()
	if r != nil {
		if _, ok := (*r)[k]; ok {
			return false
		}
	}
	if _, ok := m.dirty[k]; ok {
		return false
	}
	if m.dirty == nil {
		m.dirty = make(map[K]V)
	}
	m.dirty[k] = v
	m.n++
	old := 0
	if r != nil {
		old = len(*r)
	}
	if len(m.dirty) >= max(minMerge, old/4) {
		merged := make(map[K]V, old+len(m.dirty))
		if r != nil {
			for k, v := range *r {
				merged[k] = v
			}
		}
		for k, v := range m.dirty {
			merged[k] = v
		}
		m.read.Store(&merged)
		m.dirty = nil
	}
	return true
}
