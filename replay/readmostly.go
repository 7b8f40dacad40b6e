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
// minMerge), or until as many loads were answered from the small map: both are then merged
// into a new read-only map, so each key is copied a bounded number of times on average and
// a key read again and again does not stay behind the mutex (the last keys of a site, fewer
// than a merge needs, were read under it on every request: 93 of a 483-URL site's). Safe
// for concurrent use; the zero value is empty.
type readMostly[K comparable, V any] struct {
	read  atomic.Pointer[map[K]V] // never changed once stored; nil: empty
	mu    sync.Mutex
	dirty map[K]V // keys not in read yet
	n     int     // len(*read) + len(dirty), under mu
	hits  int     // loads answered from dirty since it was last merged, under mu
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
	if ok {
		if m.hits++; m.hits >= m.mergeAt() {
			m.mergeLocked()
		}
	}
	return v, ok
}

// mergeAt is how many keys in dirty, or loads answered from it, make mergeLocked worth its
// copy of the read-only map: a quarter of that map's keys, at least minMerge. Called under
// mu.
func (m *readMostly[K, V]) mergeAt() int {
	old := 0
	if r := m.read.Load(); r != nil {
		old = len(*r)
	}
	return max(minMerge, old/4)
}

// mergeLocked replaces the read-only map with one holding its keys and dirty's, and empties
// dirty. Called under mu.
func (m *readMostly[K, V]) mergeLocked() {
	r := m.read.Load()
	old := 0
	if r != nil {
		old = len(*r)
	}
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
	m.dirty, m.hits = nil, 0
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
		m.dirty, m.n, m.hits = nil, 0, 0
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
	if len(m.dirty) >= m.mergeAt() {
		m.mergeLocked()
	}
	return true
}
