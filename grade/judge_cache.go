package grade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// judgeCacheMaxEntry bounds a cache file (bytes); a larger file is a miss.
const judgeCacheMaxEntry = 4 << 20

// judgeCacheVersion is the entry format version, also part of the key.
const judgeCacheVersion = 1

// Cache wraps a judge with an on-disk cache keyed by sha256 of (judge Name,
// prompt, sample index).
//
// Entries are JSON files, one per key, at Dir/<first 2 hex digits>/<64 hex
// digits>.json, holding the judge name, the model that answered, the sha256
// of the prompt, the sample index, the reply text and the note. Only
// successful replies are stored. Dir == "" disables caching.
//
// A Cache is safe for concurrent use; concurrent Asks for the same key call
// the judge once. Do not copy a Cache after first use.
type Cache struct {
	Judge Judge
	Dir   string

	mu       sync.Mutex
	inflight map[string]*judgeCacheCall
}

// judgeCacheCall is one in-flight judge call that other Asks for the same key wait on.
type judgeCacheCall struct {
	done  chan struct{}
	reply Reply
	err   error
}

// judgeCacheEntry is the JSON form of one cache file.
type judgeCacheEntry struct {
	Version      int    `json:"version"`
	Judge        string `json:"judge"`
	Model        string `json:"model"`
	PromptSHA256 string `json:"prompt_sha256"`
	Sample       int    `json:"sample"`
	Text         string `json:"text"`
	Note         string `json:"note,omitempty"`
}

// Ask returns the cached reply for (c.Judge.Name(), prompt, sample) or asks
// the judge and stores the reply atomically (temp file + rename). cached
// reports that the judge was not called for this Ask: a hit on disk, or the
// reply of a concurrent Ask for the same key.
//
// A corrupt, mismatched or oversized (> 4 MiB) cache file is a miss and is
// overwritten. sample must be >= 0. If the judge answered but the reply could
// not be stored, r is the valid reply and err reports the storage failure.
func (c *Cache) Ask(ctx context.Context, prompt string, sample int) (r Reply, cached bool, err error) {
	if c == nil || c.Judge == nil {
		return Reply{}, false, errors.New("judge cache: no judge to ask")
	}
	if sample < 0 {
		return Reply{}, false, fmt.Errorf("judge cache: sample index %d is negative; want >= 0", sample)
	}
	if c.Dir == "" {
		r, err := c.Judge.Ask(ctx, prompt)
		return r, false, err
	}
	name := c.Judge.Name()
	key := judgeCacheKey(name, prompt, sample)
	promptSum := sha256.Sum256([]byte(prompt))
	promptHex := hex.EncodeToString(promptSum[:])

	for {
		c.mu.Lock()
		if call, ok := c.inflight[key]; ok {
			c.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return Reply{}, false, fmt.Errorf("judge %s: waiting for a concurrent identical request: %w", name, ctx.Err())
			}
			if call.err == nil {
				return call.reply, true, nil
			}
			continue // that call failed; try ourselves
		}
		call := &judgeCacheCall{done: make(chan struct{})}
		if c.inflight == nil {
			c.inflight = make(map[string]*judgeCacheCall)
		}
		c.inflight[key] = call
		c.mu.Unlock()

		r, cached, err := c.fill(ctx, name, key, promptHex, prompt, sample)
		call.reply, call.err = r, err
		if err != nil && r.Text != "" {
			call.err = nil // answered; only storing failed
		}
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(call.done)
		return r, cached, err
	}
}

// fill reads the entry for key or asks the judge and stores its reply.
func (c *Cache) fill(ctx context.Context, name, key, promptHex, prompt string, sample int) (Reply, bool, error) {
	path := c.path(key)
	if e, ok := judgeCacheRead(path); ok && e.Version == judgeCacheVersion && e.Judge == name &&
		e.PromptSHA256 == promptHex && e.Sample == sample && e.Text != "" {
		return Reply{Text: e.Text, Model: e.Model, Note: e.Note}, true, nil
	}
	r, err := c.Judge.Ask(ctx, prompt)
	if err != nil {
		return Reply{}, false, err
	}
	e := judgeCacheEntry{
		Version:      judgeCacheVersion,
		Judge:        name,
		Model:        r.Model,
		PromptSHA256: promptHex,
		Sample:       sample,
		Text:         r.Text,
		Note:         r.Note,
	}
	if err := judgeCacheWrite(path, e); err != nil {
		return r, false, fmt.Errorf("judge %s: reply not cached: %w", name, err)
	}
	return r, false, nil
}

// path is Dir/<first 2 hex>/<hash>.json.
// Forget removes the cached reply for (judge name, prompt, sample), if any: a reply that
// could not be used is asked again on the next grading instead of failing the same way.
func (c *Cache) Forget(prompt string, sample int) {
	if c == nil || c.Dir == "" || c.Judge == nil {
		return
	}
	os.Remove(c.path(judgeCacheKey(c.Judge.Name(), prompt, sample)))
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.Dir, key[:2], key+".json")
}

// judgeCacheKey is the hex sha256 of an unambiguous encoding of (version, name, prompt, sample).
func judgeCacheKey(name, prompt string, sample int) string {
	// A JSON array cannot be confused across field boundaries.
	b, _ := json.Marshal([]any{"pab-judge-cache", judgeCacheVersion, name, prompt, sample})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// judgeCacheRead loads the entry at path; ok is false for a missing,
// unreadable, oversized or undecodable file.
func judgeCacheRead(path string) (judgeCacheEntry, bool) {
	var e judgeCacheEntry
	f, err := os.Open(path)
	if err != nil {
		return e, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > judgeCacheMaxEntry {
		return e, false
	}
	data, err := io.ReadAll(io.LimitReader(f, judgeCacheMaxEntry+1))
	if err != nil || len(data) > judgeCacheMaxEntry {
		return e, false
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return judgeCacheEntry{}, false
	}
	return e, true
}

// judgeCacheWrite stores e at path atomically (atomicfile.Write).
func judgeCacheWrite(path string, e judgeCacheEntry) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if len(data) > judgeCacheMaxEntry {
		return fmt.Errorf("entry of %d bytes exceeds the %d-byte cache limit", len(data), judgeCacheMaxEntry)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
