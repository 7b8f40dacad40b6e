package replay

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// TestNullDeviceLog: a log that is the null device gets no writer (nothing is queued for
// it), while a log file does; the in-memory tail and the counts are kept with both.
func TestNullDeviceLog(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	bd := writeTestBundle(t, t.TempDir(), recording.Manifest{}, []ex{{method: "GET", url: "https://a.test/", status: 200,
		header: []string{"Content-Type: text/plain"}, body: []byte("hi")}})
	rs, err := rules.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		log    *os.File
		writer bool
	}{{"null device", null, false}, {"file", file, true}} {
		s, err := New(Options{Bundle: bd, Rules: rs, CA: sharedCA(t), Log: c.log})
		if err != nil {
			t.Fatal(err)
		}
		if (s.logw != nil) != c.writer {
			t.Errorf("%s: log writer %v, want %v", c.name, s.logw != nil, c.writer)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "https://a.test/", nil))
		if w.Code != 200 || w.Body.String() != "hi" {
			t.Errorf("%s: answer %d %q", c.name, w.Code, w.Body.String())
		}
		if lines, err := ReadLog(bytes.NewReader(s.tail.tail(10)), "tail"); err != nil || len(lines) != 1 || lines[0].Source != SourceExact {
			t.Errorf("%s: tail %v, %v", c.name, lines, err)
		}
		if n := s.Counts().Total; n != 1 {
			t.Errorf("%s: %d counted", c.name, n)
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
	}
	if fi, err := file.Stat(); err != nil || fi.Size() == 0 {
		t.Errorf("the log file is empty (%v)", err)
	}
	if !isNullDevice(null) || isNullDevice(file) || isNullDevice(nil) {
		t.Error("isNullDevice")
	}
}
