package main

import (
	"fmt"
	"io"
	"os"
)

func statSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// humanBytes formats n bytes with a decimal unit ("1.5 MB").
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// debugWriter is w when --debug is on, else nil (warnings discarded).
func debugWriter(on bool, w io.Writer) io.Writer {
	if on {
		return w
	}
	return nil
}
