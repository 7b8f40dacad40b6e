package k8s

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestSetImages: the images file fills what the flags leave empty, and a task prefix
// overrides its task images for the tasks rendered.
func TestSetImages(t *testing.T) {
	im := &Images{Replay: "r:file", Browser: "b:file", Task: map[string]string{"a": "localhost:5000/t-a:0123", "c": "t:c", "d": "reg/t-d:9@sha256:" + strings.Repeat("a", 64)}}
	o := Options{ReplayImage: "r:flag", Tasks: []string{"a", "b", "d"}}
	o.SetImages(im, "p/")
	// the prefix keeps each image's content tag; a task without one stays untagged (Render refuses it)
	want := map[string]string{"a": "p/a:0123", "b": "p/b", "c": "t:c", "d": "p/d:9@sha256:" + strings.Repeat("a", 64)}
	if o.ReplayImage != "r:flag" || o.BrowserImage != "b:file" || !reflect.DeepEqual(o.TaskImages, want) {
		t.Errorf("replay %q browser %q tasks %v; want r:flag b:file %v", o.ReplayImage, o.BrowserImage, o.TaskImages, want)
	}
	o = Options{Tasks: []string{"a"}}
	o.SetImages(nil, "")
	if o.TaskImages == nil || len(o.TaskImages) != 0 || o.ReplayImage != "" {
		t.Errorf("without images: %+v", o)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n--; f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestWriteStream: files are separated by "---" lines; a failed write is the error.
func TestWriteStream(t *testing.T) {
	files := []File{{Name: "a.yaml", Data: []byte("a: 1\n")}, {Name: "b.yaml", Data: []byte("b: 2\n")}}
	var b bytes.Buffer
	if err := WriteStream(&b, files); err != nil || b.String() != "a: 1\n---\nb: 2\n" {
		t.Errorf("WriteStream = %q, %v", b.String(), err)
	}
	if err := WriteStream(&failWriter{n: 2}, files); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteStream to a failing writer: %v", err)
	}
}
