package grade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// judgeCountingFake answers "answer #n to <prompt>" and counts calls.
type judgeCountingFake struct {
	name  string
	calls atomic.Int64
	delay time.Duration
	fail  atomic.Bool
}

func (j *judgeCountingFake) Name() string { return j.name }

func (j *judgeCountingFake) Ask(ctx context.Context, prompt string) (Reply, error) {
	n := j.calls.Add(1)
	if j.delay > 0 {
		select {
		case <-time.After(j.delay):
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		}
	}
	if j.fail.Load() {
		return Reply{}, errors.New("judge fake: boom")
	}
	return Reply{Text: fmt.Sprintf("answer #%d to %s", n, prompt), Model: "model-x", Note: "note-y"}, nil
}

// judgeCacheFiles lists the .json entry files under dir (recursively), and
// fails the test on leftover temp files.
func judgeCacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", p)
		}
		files = append(files, p)
		return nil
	})
	return files
}

func TestJudgeCacheHitAndMiss(t *testing.T) {
	dir := t.TempDir()
	j := &judgeCountingFake{name: "fake/judge"}
	c := &Cache{Judge: j, Dir: dir}
	ctx := judgeCtx(t)

	r1, cached, err := c.Ask(ctx, "prompt A", 0)
	if err != nil || cached {
		t.Fatalf("first Ask: cached=%v err=%v", cached, err)
	}
	r2, cached, err := c.Ask(ctx, "prompt A", 0)
	if err != nil || !cached {
		t.Fatalf("second Ask: cached=%v err=%v, want a hit", cached, err)
	}
	if r2 != r1 {
		t.Errorf("cached reply %+v != original %+v", r2, r1)
	}
	if n := j.calls.Load(); n != 1 {
		t.Errorf("judge called %d times, want 1", n)
	}

	// Another sample, prompt or judge name is a different key.
	if _, cached, _ := c.Ask(ctx, "prompt A", 1); cached {
		t.Error("sample 1 hit sample 0's entry")
	}
	if _, cached, _ := c.Ask(ctx, "prompt B", 0); cached {
		t.Error("prompt B hit prompt A's entry")
	}
	other := &Cache{Judge: &judgeCountingFake{name: "fake/other"}, Dir: dir}
	if _, cached, _ := other.Ask(ctx, "prompt A", 0); cached {
		t.Error("another judge hit this judge's entry")
	}
	if n := j.calls.Load(); n != 3 {
		t.Errorf("judge called %d times, want 3", n)
	}
	if _, cached, _ := c.Ask(ctx, "prompt A", 1); !cached {
		t.Error("sample 1 not cached on its second Ask")
	}

	// Layout and content of one entry.
	key := judgeCacheKey("fake/judge", "prompt A", 0)
	path := filepath.Join(dir, key[:2], key+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("entry not at Dir/<2 hex>/<hash>.json: %v", err)
	}
	var e map[string]any
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("entry is not JSON: %v", err)
	}
	if e["judge"] != "fake/judge" || e["model"] != "model-x" || e["text"] != r1.Text || e["note"] != "note-y" ||
		e["sample"] != float64(0) || len(fmt.Sprint(e["prompt_sha256"])) != 64 {
		t.Errorf("entry = %s", data)
	}
	if got := len(judgeCacheFiles(t, dir)); got != 4 {
		t.Errorf("%d cache files, want 4", got)
	}
}

func TestJudgeCacheCorruptEntryRepaired(t *testing.T) {
	dir := t.TempDir()
	j := &judgeCountingFake{name: "fake/judge"}
	c := &Cache{Judge: j, Dir: dir}
	ctx := judgeCtx(t)
	key := judgeCacheKey("fake/judge", "p", 0)
	path := filepath.Join(dir, key[:2], key+".json")
	wrongPrompt, _ := json.Marshal(judgeCacheEntry{Version: 1, Judge: "fake/judge", PromptSHA256: strings.Repeat("0", 64), Text: "stale"})

	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("\x00\x01 not json {")},
		{"truncated", []byte(`{"version":1,"judge":"fake/judge","text":"x`)},
		{"empty", nil},
		{"wrong types", []byte(`{"version":"1","sample":"zero"}`)},
		{"other prompt", wrongPrompt},
		{"oversized", append([]byte(`{"text":"`), make([]byte, judgeCacheMaxEntry)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			before := j.calls.Load()
			r, cached, err := c.Ask(ctx, "p", 0)
			if err != nil || cached {
				t.Fatalf("Ask over a %s entry: cached=%v err=%v, want a miss", tc.name, cached, err)
			}
			if j.calls.Load() != before+1 {
				t.Errorf("judge not called for a %s entry", tc.name)
			}
			r2, cached, err := c.Ask(ctx, "p", 0)
			if err != nil || !cached || r2 != r {
				t.Errorf("entry not repaired: cached=%v err=%v reply %+v vs %+v", cached, err, r2, r)
			}
		})
	}
	judgeCacheFiles(t, dir)
}

func TestJudgeCacheErrorsNotStored(t *testing.T) {
	dir := t.TempDir()
	j := &judgeCountingFake{name: "fake/judge"}
	j.fail.Store(true)
	c := &Cache{Judge: j, Dir: dir}
	ctx := judgeCtx(t)
	if _, _, err := c.Ask(ctx, "p", 0); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the judge's error", err)
	}
	if files := judgeCacheFiles(t, dir); len(files) != 0 {
		t.Errorf("a failed reply was stored: %v", files)
	}
	j.fail.Store(false)
	if _, cached, err := c.Ask(ctx, "p", 0); err != nil || cached {
		t.Errorf("after a failure: cached=%v err=%v, want a fresh call", cached, err)
	}
	if n := j.calls.Load(); n != 2 {
		t.Errorf("judge called %d times, want 2", n)
	}
}

func TestJudgeCacheDisabled(t *testing.T) {
	j := &judgeCountingFake{name: "fake/judge"}
	c := &Cache{Judge: j}
	for i := 0; i < 2; i++ {
		if _, cached, err := c.Ask(judgeCtx(t), "p", 0); err != nil || cached {
			t.Fatalf("Ask %d: cached=%v err=%v", i, cached, err)
		}
	}
	if n := j.calls.Load(); n != 2 {
		t.Errorf("judge called %d times without a cache dir, want 2", n)
	}
}

func TestJudgeCacheBadInput(t *testing.T) {
	if _, _, err := (&Cache{Dir: t.TempDir()}).Ask(judgeCtx(t), "p", 0); err == nil {
		t.Error("Ask with no judge succeeded")
	}
	c := &Cache{Judge: &judgeCountingFake{name: "x"}, Dir: t.TempDir()}
	if _, _, err := c.Ask(judgeCtx(t), "p", -1); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("negative sample: err = %v", err)
	}
}

func TestJudgeCacheUnwritableDir(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Dir is a regular file, so no entry can be created under it.
	c := &Cache{Judge: &judgeCountingFake{name: "fake/judge"}, Dir: blocker}
	r, cached, err := c.Ask(judgeCtx(t), "p", 0)
	if err == nil || !strings.Contains(err.Error(), "not cached") {
		t.Fatalf("err = %v, want a storage error", err)
	}
	if cached || r.Text == "" {
		t.Errorf("reply %+v cached=%v, want the judge's reply despite the storage failure", r, cached)
	}
}

func TestJudgeCacheConcurrent(t *testing.T) {
	dir := t.TempDir()
	j := &judgeCountingFake{name: "fake/judge", delay: 20 * time.Millisecond}
	c := &Cache{Judge: j, Dir: dir}
	ctx := judgeCtx(t)
	const workers, keys = 48, 4
	var wg sync.WaitGroup
	replies := make([]Reply, workers)
	errs := make([]error, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			replies[i], _, errs[i] = c.Ask(ctx, fmt.Sprintf("prompt %d", i%keys), 0)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if replies[i] != replies[i%keys] {
			t.Errorf("worker %d got %+v, worker %d got %+v for the same key", i, replies[i], i%keys, replies[i%keys])
		}
	}
	if n := j.calls.Load(); n != keys {
		t.Errorf("judge called %d times for %d distinct keys", n, keys)
	}
	if got := len(judgeCacheFiles(t, dir)); got != keys {
		t.Errorf("%d cache files, want %d", got, keys)
	}
}

func TestJudgeCacheWaiterCancel(t *testing.T) {
	j := &judgeCountingFake{name: "fake/judge", delay: 300 * time.Millisecond}
	c := &Cache{Judge: j, Dir: t.TempDir()}
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		c.Ask(context.Background(), "p", 0)
	}()
	for j.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Ask(ctx, "p", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting Ask err = %v, want its own deadline", err)
	}
	<-leaderDone
}

func TestJudgeCacheKeyDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, k := range [][3]any{
		{"a", "bc", 0}, {"ab", "c", 0}, {"a", "bc", 1}, {"a", "b\"c", 0}, {"", "", 0}, {"a\x00", "bc", 0},
	} {
		key := judgeCacheKey(k[0].(string), k[1].(string), k[2].(int))
		if len(key) != 64 {
			t.Errorf("key %q is not 64 hex digits", key)
		}
		if prev, dup := seen[key]; dup {
			t.Errorf("key collision between %v and %s", k, prev)
		}
		seen[key] = fmt.Sprint(k)
	}
}

// FuzzJudgeCacheRead checks that any bytes in a cache file are a clean miss
// or a decodable entry, never a panic.
func FuzzJudgeCacheRead(f *testing.F) {
	good, _ := json.Marshal(judgeCacheEntry{Version: 1, Judge: "j", Model: "m", PromptSHA256: strings.Repeat("a", 64), Text: "t"})
	f.Add(good)
	f.Add([]byte(`{"version":1,"text":`))
	f.Add([]byte{})
	f.Add([]byte("null"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "entry.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		e, ok := judgeCacheRead(p)
		if !ok {
			return
		}
		// What decoded must survive being encoded and read again. (Plain
		// WriteFile: judgeCacheWrite's fsync makes fuzzing crawl.)
		enc, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("encoding %+v: %v", e, err)
		}
		out := filepath.Join(dir, "out.json")
		if err := os.WriteFile(out, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		e2, ok := judgeCacheRead(out)
		if len(enc) > judgeCacheMaxEntry {
			if ok {
				t.Fatalf("read an entry of %d bytes, over the limit", len(enc))
			}
			return
		}
		if !ok || e2 != e {
			t.Fatalf("round trip of %+v gave %+v (ok %v)", e, e2, ok)
		}
	})
}
