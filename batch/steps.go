package batch

// This file is steps.jsonl: the browser tool calls of a run, as pab's MCP front saw them
// (docs/run.md "The run view").

import (
	"bufio"
	"errors"
	"fmt"
	"os"
)

// FileSteps is the file of a run directory holding one JSON object per browser tool call
// (Step), written by pab run --browser --mcp and --guard.
const FileSteps = "steps.jsonl"

// maxStepsFile bounds a steps.jsonl read back; maxStepLine one line of it.
const (
	maxStepsFile = 32 << 20
	maxStepLine  = 1 << 20
)

// countSteps counts the lines of a steps.jsonl (os.ErrNotExist when there is none). A
// symbolic link or a file over 32 MiB is an error naming it.
func countSteps(path string) (int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > maxStepsFile {
		return 0, fmt.Errorf("%s: over %d bytes", path, maxStepsFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxStepLine)
	n := 0
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return 0, fmt.Errorf("%s: line %d over %d bytes", path, n+1, maxStepLine)
		}
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}
