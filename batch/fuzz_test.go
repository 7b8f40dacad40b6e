package batch

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadInfo: any run.json (as a pod may write it) is read or refused with an error,
// never a panic; what is read summarizes without a panic too.
func FuzzReadInfo(f *testing.F) {
	f.Add([]byte(`{"exit_code": 1, "signal": "SIGKILL", "timed_out": true, "started": "2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"format": 1, "task": "t", "repeat": 1, "status": "graded", "finished": true, "score": 0.5, "requests": {"total": 2, "exact": 1}}`))
	f.Add([]byte(`{"requests": {"total": -1}}`))
	f.Add([]byte(`{"format": 2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileInfo), data, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := readInfo(dir)
		if err != nil {
			return
		}
		if in == nil {
			t.Fatal("readInfo: nil Info and nil error for an existing file")
		}
		in.Task, in.Repeat = "t", 1
		s := summarize(dir, "agent", []string{"t"}, 1, map[job]*Info{{"t", 1}: in})
		if _, err := RenderIndex(s); err != nil {
			t.Fatalf("RenderIndex: %v", err)
		}
	})
}
