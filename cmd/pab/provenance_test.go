package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// TestGradeProvenance grades the committed books-sapiens-price example run (issue 21):
// result.json names the recording's content hash, grading.yaml's sha256, the rules in
// effect (hash and files, in load order) and the build; regrading gives the same bytes; a
// log whose header names another recording makes pab grade warn with one line on stderr,
// and a log naming the same recording does not.
func TestGradeProvenance(t *testing.T) {
	ex := filepath.Join(repoRoot, "docs/examples/books-sapiens-price/wrong")
	grade1 := func(t *testing.T, log, out string) (*grade.Result, []byte, string) {
		t.Helper()
		stdout, stderr, code := runPab(t, "grade", "books-sapiens-price", "--log", log, "--answer", filepath.Join(ex, "answer.txt"),
			"--out", out, "--judge", "cli", "--judge-cmd", filepath.Join(repoRoot, exampleJudge), "--no-cache")
		if code != 0 {
			t.Fatalf("grade: exit %d\n%s\n%s", code, stdout, stderr)
		}
		data, err := os.ReadFile(filepath.Join(out, "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		return readResult(t, filepath.Join(out, "result.json")), data, stderr
	}
	out := t.TempDir()
	r, first, stderr := grade1(t, filepath.Join(ex, "replay.jsonl"), out)
	p := r.Provenance
	if p == nil {
		t.Fatalf("result.json has no provenance:\n%s", first)
	}
	recHash, err := recording.HashRecording(filepath.Join(repoRoot, "tasks/books-sapiens-price/recording"))
	if err != nil {
		t.Fatal(err)
	}
	gy, _ := os.ReadFile(filepath.Join(repoRoot, "tasks/books-sapiens-price/grading.yaml"))
	gsum := sha256.Sum256(gy)
	if p.Recording != recHash || p.RecordingOf != "recording" {
		t.Errorf("recording %s (%s), want %s (recording)", p.Recording, p.RecordingOf, recHash)
	}
	if p.Grading != hex.EncodeToString(gsum[:]) {
		t.Errorf("grading %s, want the sha256 of grading.yaml %x", p.Grading, gsum)
	}
	// The rules: sites/*.yaml in name order (the task has no rules/), each framed as
	// name NUL size(8 bytes) bytes.
	names, _ := filepath.Glob(filepath.Join(repoRoot, "sites", "*.yaml"))
	h := sha256.New()
	var want []string
	for _, n := range names {
		data, _ := os.ReadFile(n)
		rel := "sites/" + filepath.Base(n)
		var size [8]byte
		binary.BigEndian.PutUint64(size[:], uint64(len(data)))
		h.Write([]byte(rel))
		h.Write([]byte{0})
		h.Write(size[:])
		h.Write(data)
		want = append(want, rel)
	}
	if p.Rules != hex.EncodeToString(h.Sum(nil)) || strings.Join(p.RuleFiles, ",") != strings.Join(want, ",") {
		t.Errorf("rules %s %v, want %x %v", p.Rules, p.RuleFiles, h.Sum(nil), want)
	}
	if p.Pab.Version == "" || p.Pab.Go == "" {
		t.Errorf("build %+v: want a version and a Go version", p.Pab)
	}
	if strings.Contains(stderr, "warning") {
		t.Errorf("a log without a header warned:\n%s", stderr)
	}
	// Regrading the same run gives the same bytes.
	out2 := t.TempDir()
	_, second, _ := grade1(t, filepath.Join(ex, "replay.jsonl"), out2)
	if !bytes.Equal(first, second) {
		t.Errorf("regrade differs:\n%s\n%s", first, second)
	}

	// The same log with a header naming another recording: one warning line, and a note.
	logData, _ := os.ReadFile(filepath.Join(ex, "replay.jsonl"))
	header := func(hash string) []byte {
		b, _ := json.Marshal(replay.LogHeader{Event: replay.LogHeaderEvent, Time: "2026-12-01T00:00:00.000Z", Recording: hash, RecordingOf: "recording"})
		return append(b, '\n')
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "other.jsonl")
	os.WriteFile(other, append(header(strings.Repeat("ab", 32)), logData...), 0o644)
	r3, _, stderr := grade1(t, other, t.TempDir())
	var warnings []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "warning") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "abababababababab") || !strings.Contains(warnings[0], recHash[:16]) {
		t.Errorf("log of another recording: warnings %q, want one line naming both recordings\n%s", warnings, stderr)
	}
	if r3.Log == nil || r3.Log.Recording != strings.Repeat("ab", 32) || !strings.Contains(strings.Join(r3.Notes, " "), "was written against recording abababababababab") {
		t.Errorf("log of another recording: log %+v notes %q", r3.Log, r3.Notes)
	}
	if r3.Log != nil && r3.Log.Lines != r.Log.Lines {
		t.Errorf("the header was counted as a line: %d lines, want %d", r3.Log.Lines, r.Log.Lines)
	}
	same := filepath.Join(dir, "same.jsonl")
	os.WriteFile(same, append(header(recHash), logData...), 0o644)
	if _, _, stderr := grade1(t, same, t.TempDir()); strings.Contains(stderr, "warning") {
		t.Errorf("log of the same recording warned:\n%s", stderr)
	}
}

// TestReplayLogNamesRecording: pab replay --log starts its log with a header naming the
// task's recording hash, which pab grade then compares with the recording it grades with.
func TestReplayLogNamesRecording(t *testing.T) {
	p := startReplay(t, "books-sapiens-price")
	p.stop(t)
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	recHash, _ := recording.HashRecording(filepath.Join(repoRoot, "tasks/books-sapiens-price/recording"))
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var h replay.LogHeader
	if err := json.Unmarshal(first, &h); err != nil || h.Event != replay.LogHeaderEvent || h.Recording != recHash || h.RecordingOf != "recording" {
		t.Errorf("first log line %s (%v), want a header naming %s", first, err, recHash)
	}
}
