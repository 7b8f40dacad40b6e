package runarchive

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func sample() []File {
	return []File{
		{"run.json", []byte(`{"format":1,"task":"t1","repeat":2}` + "\n")},
		{"answer.txt", []byte("£12.99\n")},
		{"replay.jsonl", bytes.Repeat([]byte(`{"url":"https://example.test/","outcome":"exact"}`+"\n"), 5000)},
	}
}

// TestRoundTrip: what Emit writes into a log among other lines, Read finds, verifies and
// Unpack returns byte for byte; WriteDir makes the run directory.
func TestRoundTrip(t *testing.T) {
	data, err := Build(sample())
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	log.WriteString("pab-pod collect: run t1/2; waiting for the pod to end\n")
	if err := Emit(&log, "t1", 2, data); err != nil {
		t.Fatal(err)
	}
	log.WriteString("pab-pod collect: wrote the run to the log\n")
	for _, l := range strings.Split(log.String(), "\n") {
		if len(l) > 160 {
			t.Fatalf("a line of %d bytes: %.60q", len(l), l)
		}
	}
	a, err := Read(&log, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if a.Task != "t1" || a.Repeat != 2 || !bytes.Equal(a.Data, data) {
		t.Fatalf("got %s/%d, %d bytes", a.Task, a.Repeat, len(a.Data))
	}
	files, err := Unpack(a.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if len(files) != len(want) {
		t.Fatalf("%d files, want %d", len(files), len(want))
	}
	for i := range want {
		if files[i].Name != want[i].Name || !bytes.Equal(files[i].Data, want[i].Data) {
			t.Fatalf("file %d: %s differs", i, files[i].Name)
		}
	}
	dir := filepath.Join(t.TempDir(), "2")
	if err := WriteDir(dir, files); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "answer.txt"))
	if err != nil || string(got) != "£12.99\n" {
		t.Fatalf("answer.txt: %q, %v", got, err)
	}
	if err := WriteDir(dir, files); err == nil {
		t.Fatal("WriteDir over an existing run directory succeeded")
	}
}

// TestReadDetects: a cut log, a changed byte, a missing archive and a header out of
// bounds are errors that say so; a later complete archive wins over an earlier broken one.
func TestReadDetects(t *testing.T) {
	data, err := Build(sample())
	if err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if err := Emit(&good, "t1", 1, data); err != nil {
		t.Fatal(err)
	}
	s := good.String()
	lines := strings.Split(s, "\n")
	changed := strings.Join(append(append(append([]string{}, lines[:2]...), strings.Replace(lines[2], lines[2][:1], flip(lines[2][:1]), 1)), lines[3:]...), "\n")
	cases := []struct{ name, log, want string }{
		{"cut", s[:len(s)/2], "cut short"},
		{"changed", changed, "header says"},
		{"none", "hello\nworld\n", "no run archive"},
		{"size", "pab-run-archive/1 begin task=t repeat=1 size=999999999 sha256=" + strings.Repeat("0", 64) + "\n", "bad header"},
		{"task", "pab-run-archive/1 begin task=../x repeat=1 size=1 sha256=" + strings.Repeat("0", 64) + "\n", "bad header"},
	}
	for _, c := range cases {
		_, err := Read(strings.NewReader(c.log), 16<<20)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := Read(strings.NewReader("x\n"), 1<<20); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no archive: %v, want os.ErrNotExist", err)
	}
	a, err := Read(strings.NewReader(s[:len(s)/2]+"\n"+s), 16<<20)
	if err != nil || a.Repeat != 1 {
		t.Fatalf("broken then complete: %v", err)
	}
}

func flip(c string) string {
	if c == "A" {
		return "B"
	}
	return "A"
}

// TestBounds: Build refuses unknown names and a result over MaxArchive; Unpack refuses
// an entry that is not a run file, a link, and a size over its bound.
func TestBounds(t *testing.T) {
	if _, err := Build([]File{{"../etc/passwd", nil}}); err == nil {
		t.Fatal("Build took ../etc/passwd")
	}
	noise := make([]byte, MaxArchive+1024)
	rand.Read(noise)
	if _, err := Build([]File{{"replay.jsonl", noise}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("incompressible %d bytes: %v, want ErrTooLarge", len(noise), err)
	}
	mk := func(h *tar.Header, body []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		tw.WriteHeader(h)
		tw.Write(body)
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"path", mk(&tar.Header{Name: "../run.json", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, []byte("x")), "not a run file"},
		{"link", mk(&tar.Header{Name: "answer.txt", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, nil), "not a regular file"},
		{"big", mk(&tar.Header{Name: "run.json", Typeflag: tar.TypeReg, Size: 65<<10 + 1, Mode: 0o644}, make([]byte, 65<<10+1)), "more than allowed"},
		{"not gzip", []byte("plain"), "run archive"},
	} {
		if _, err := Unpack(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzRead: any log gives an archive whose digest holds, or an error; never a panic. An
// archive found unpacks or errors, within its bounds.
func FuzzRead(f *testing.F) {
	data, _ := Build(sample())
	var b bytes.Buffer
	Emit(&b, "t1", 1, data)
	f.Add(b.Bytes())
	f.Add([]byte("pab-run-archive/1 begin task=t repeat=1 size=4 sha256=" + strings.Repeat("a", 64) + "\nAAAA\npab-run-archive/1 end\n"))
	f.Add([]byte("pab-run-archive/1 end\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		a, err := Read(bytes.NewReader(log), 1<<20)
		if err != nil {
			return
		}
		if len(a.Data) > MaxArchive || a.Repeat < 1 {
			t.Fatalf("archive out of bounds: %d bytes, repeat %d", len(a.Data), a.Repeat)
		}
		files, err := Unpack(a.Data)
		if err != nil {
			return
		}
		for _, f := range files {
			if _, ok := Files[f.Name]; !ok {
				t.Fatalf("unpacked %q", f.Name)
			}
		}
	})
}
