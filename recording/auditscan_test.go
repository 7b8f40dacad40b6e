package recording

import (
	"bufio"
	"strings"
	"testing"
)

// TestAuditScanEmptyLineWhereARecordStarts: a blank line where the next record should
// start is named as a missing version line, as before the scan shared readHead.
func TestAuditScanEmptyLineWhereARecordStarts(t *testing.T) {
	_, _, err := scanRecord(bufio.NewReader(strings.NewReader("\r\nWARC/1.1\r\n")), 0, "data.warc")
	if err == nil || !strings.Contains(err.Error(), "no WARC version line where a record should start") {
		t.Errorf("err = %v", err)
	}
}
