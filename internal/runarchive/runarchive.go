// Package runarchive is the run archive of a pod: the files of one run (docs/run.md:
// run.json, answer.txt, prompt.txt, agent.stdout, agent.stderr, replay.jsonl) as a gzip'd
// tar, written base64-encoded between two marker lines into a container's log by the
// pod's collector (`pab-pod collect --emit-log`), and read back from that log by
// `pab k8s collect` through the API server (pods/log), so that no shared volume is needed
// (docs/deploy.md "Results").
//
// The framing, one archive per log:
//
//	pab-run-archive/1 begin task=<id> repeat=<k> size=<n> sha256=<64 hex>
//	<base64 (RFC 4648 section 4, padded) of the n bytes, 76 characters per line>
//	pab-run-archive/1 end
//
// n is the size of the gzip'd tar (RFC 1952; tar in the POSIX ustar/PAX form of
// archive/tar) and sha256 its SHA-256, so a cut or altered log is detected. n is at most
// MaxArchive: the kubelet rotates a container log at 10 MiB by default
// (containerLogMaxSize) and `kubectl logs` serves only the newest file, so the encoded
// block (4/3 of n plus newlines) stays under 8.2 MiB.
//
// Everything read is treated as hostile: lines, the encoded block, the decompressed sizes
// and the file names are bounded, only the known file names are accepted, and a file is
// written only inside the directory given.
package runarchive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// Limits of an archive, in bytes.
const (
	// MaxArchive bounds the gzip'd tar (6 MiB).
	MaxArchive = 6 << 20
	// MaxUnpacked bounds the sum of the files' sizes once decompressed (256 MiB).
	MaxUnpacked = 256 << 20
	// MaxLine bounds a log line that Read looks at (a longer one is skipped whole).
	MaxLine = 64 << 10
	lineLen = 76
	prefix  = "pab-run-archive/1 "
)

// Files are the names a run archive may hold, each with its size bound in bytes: the run
// directory of docs/run.md as the collector writes it.
var Files = map[string]int64{
	"run.json":     64 << 10,
	"answer.txt":   1<<20 + 1,
	"prompt.txt":   1 << 20,
	"agent.stdout": 10 << 20,
	"agent.stderr": 10 << 20,
	"replay.jsonl": MaxUnpacked,
}

// ErrTooLarge is returned by Build when the run's archive would be larger than MaxArchive.
var ErrTooLarge = errors.New("run archive larger than the log can carry")

// File is one file of a run: a name of Files and its bytes.
type File struct {
	Name string
	Data []byte
}

// Archive is one run archive found in a log: the task id and repeat (1-based) of its
// header, and the verified gzip'd tar.
type Archive struct {
	Task   string
	Repeat int
	Data   []byte
}

var taskID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Build makes the gzip'd tar of files (names from Files, in the order given; mode 0644,
// mtime 0, owner 0). An unknown name, a file over its bound or a result over MaxArchive
// (ErrTooLarge) is an error.
func Build(files []File) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	seen := map[string]bool{}
	for _, f := range files {
		limit, ok := Files[f.Name]
		if !ok {
			return nil, fmt.Errorf("run archive: %q is not a run file", f.Name)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("run archive: %s given twice", f.Name)
		}
		seen[f.Name] = true
		if int64(len(f.Data)) > limit {
			return nil, fmt.Errorf("run archive: %s is %d bytes, more than %d", f.Name, len(f.Data), limit)
		}
		h := &tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > MaxArchive {
		return nil, fmt.Errorf("%w: %d bytes compressed, at most %d", ErrTooLarge, buf.Len(), MaxArchive)
	}
	return buf.Bytes(), nil
}

// Emit writes the framed archive (the package comment's form) of data for task and repeat
// to w in one Write, so that lines of other writers to the same log do not interleave.
func Emit(w io.Writer, task string, repeat int, data []byte) error {
	if !taskID.MatchString(task) {
		return fmt.Errorf("run archive: bad task id %q", task)
	}
	if repeat < 1 {
		return fmt.Errorf("run archive: repeat %d, want 1 or more", repeat)
	}
	if len(data) > MaxArchive {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data))
	}
	sum := sha256.Sum256(data)
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	b.Grow(len(enc) + len(enc)/lineLen + 256)
	fmt.Fprintf(&b, "%sbegin task=%s repeat=%d size=%d sha256=%s\n", prefix, task, repeat, len(data), hex.EncodeToString(sum[:]))
	for len(enc) > 0 {
		n := min(lineLen, len(enc))
		b.WriteString(enc[:n])
		b.WriteByte('\n')
		enc = enc[n:]
	}
	b.WriteString(prefix + "end\n")
	_, err := io.WriteString(w, b.String())
	return err
}

var beginLine = regexp.MustCompile(`^pab-run-archive/1 begin task=(\S+) repeat=([0-9]{1,9}) size=([0-9]{1,9}) sha256=([0-9a-f]{64})$`)

// EmitTooLarge writes the line that says the run of task and repeat did not fit in an
// archive, with the reason, in place of one (Read reports it).
func EmitTooLarge(w io.Writer, task string, repeat int, reason string) error {
	reason = strings.Map(func(r rune) rune {
		if r < ' ' {
			return ' '
		}
		return r
	}, reason)
	_, err := fmt.Fprintf(w, "%stoo-large task=%s repeat=%d %s\n", prefix, task, repeat, trunc(reason))
	return err
}

// Read scans a container log (at most limit bytes are read) and returns the last complete
// archive in it whose size and SHA-256 match its header. Lines that are not part of an
// archive are ignored; an archive cut short, with a bad header or a wrong digest is an
// error when no later archive is complete (the error says which). No archive at all is
// an error wrapping os.ErrNotExist.
func Read(r io.Reader, limit int64) (Archive, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, limit), 64<<10)
	var (
		best    *Archive
		lastErr error
		cur     *Archive
		want    int
		sum     string
		enc     strings.Builder
	)
	for {
		line, tooLong, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Archive{}, err
		}
		if tooLong {
			if cur != nil {
				lastErr, cur = fmt.Errorf("run archive of %s/%d: a line longer than %d bytes", cur.Task, cur.Repeat, MaxLine), nil
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, prefix+"begin"):
			if cur != nil {
				lastErr = fmt.Errorf("run archive of %s/%d: cut short (a new archive begins)", cur.Task, cur.Repeat)
			}
			cur = nil
			m := beginLine.FindStringSubmatch(line)
			if m == nil || !taskID.MatchString(m[1]) {
				lastErr = fmt.Errorf("run archive: bad header %q", trunc(line))
				continue
			}
			rep, _ := strconv.Atoi(m[2])
			size, _ := strconv.Atoi(m[3])
			if rep < 1 || size > MaxArchive {
				lastErr = fmt.Errorf("run archive: bad header %q (repeat 1 or more, size at most %d)", trunc(line), MaxArchive)
				continue
			}
			cur, want, sum = &Archive{Task: m[1], Repeat: rep}, size, m[4]
			enc.Reset()
		case strings.HasPrefix(line, prefix+"too-large "):
			if cur == nil && best == nil {
				lastErr = fmt.Errorf("the collector could not put the run in its log: %s (render with --results-claim for runs this large)", trunc(strings.TrimPrefix(line, prefix+"too-large ")))
			}
		case line == prefix+"end":
			if cur == nil {
				continue
			}
			data, err := base64.StdEncoding.DecodeString(enc.String())
			a := cur
			cur = nil
			if err != nil {
				lastErr = fmt.Errorf("run archive of %s/%d: %v", a.Task, a.Repeat, err)
				continue
			}
			got := sha256.Sum256(data)
			if len(data) != want || hex.EncodeToString(got[:]) != sum {
				lastErr = fmt.Errorf("run archive of %s/%d: %d bytes with sha256 %x, header says %d bytes, sha256 %s", a.Task, a.Repeat, len(data), got[:8], want, sum[:16])
				continue
			}
			a.Data = data
			best, lastErr = a, nil
		case cur != nil:
			if enc.Len()+len(line) > base64.StdEncoding.EncodedLen(want) {
				lastErr, cur = fmt.Errorf("run archive of %s/%d: more data than its header's %d bytes", cur.Task, cur.Repeat, want), nil
				continue
			}
			enc.WriteString(line)
		}
	}
	if cur != nil {
		lastErr = fmt.Errorf("run archive of %s/%d: cut short (no end line; was the log rotated or limited?)", cur.Task, cur.Repeat)
	}
	if lastErr != nil {
		return Archive{}, lastErr
	}
	if best == nil {
		return Archive{}, fmt.Errorf("no run archive in the log: %w", os.ErrNotExist)
	}
	return *best, nil
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// readLine reads one line without its newline (a last line without one counts); a line
// over MaxLine is consumed and reported as tooLong.
func readLine(br *bufio.Reader) (string, bool, error) {
	var b []byte
	tooLong := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if err == io.EOF && (len(b) > 0 || tooLong) {
				return string(b), tooLong, nil
			}
			return "", false, err
		}
		if !tooLong {
			if len(b)+len(chunk) > MaxLine {
				tooLong, b = true, nil
			} else {
				b = append(b, chunk...)
			}
		}
		if !isPrefix {
			return strings.TrimSuffix(string(b), "\r"), tooLong, nil
		}
	}
}

// Unpack reads the gzip'd tar data and returns its files: regular files with names of
// Files only, each at most once and within its bound, MaxUnpacked in all. Anything else
// (a directory, a link, a path, an unknown name) is an error naming the entry.
func Unpack(data []byte) ([]File, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("run archive: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var files []File
	seen := map[string]bool{}
	total := int64(0)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("run archive: %w", err)
		}
		limit, ok := Files[h.Name]
		if !ok {
			return nil, fmt.Errorf("run archive: entry %q is not a run file", trunc(h.Name))
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("run archive: entry %s is not a regular file", h.Name)
		}
		if seen[h.Name] {
			return nil, fmt.Errorf("run archive: entry %s twice", h.Name)
		}
		seen[h.Name] = true
		if h.Size < 0 || h.Size > limit || total+h.Size > MaxUnpacked {
			return nil, fmt.Errorf("run archive: entry %s: %d bytes, more than allowed (%d; %d in all)", h.Name, h.Size, limit, MaxUnpacked)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size+1))
		if err != nil {
			return nil, fmt.Errorf("run archive: entry %s: %w", h.Name, err)
		}
		if int64(len(b)) != h.Size {
			return nil, fmt.Errorf("run archive: entry %s: %d bytes, header says %d", h.Name, len(b), h.Size)
		}
		total += h.Size
		files = append(files, File{Name: h.Name, Data: b})
	}
	// the gzip trailer (CRC-32 and size) is checked only once the stream is read to its end
	if _, err := io.Copy(io.Discard, io.LimitReader(zr, 1<<20)); err != nil {
		return nil, fmt.Errorf("run archive: %w", err)
	}
	return files, nil
}

// WriteDir writes files into dir, which must not exist (its parent must): they are
// written into a temporary sibling directory that is renamed to dir once complete, so dir
// appears whole or not at all.
func WriteDir(dir string, files []File) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists already", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, ok := Files[f.Name]; !ok || f.Name != filepath.Base(f.Name) {
			os.RemoveAll(tmp)
			return fmt.Errorf("run archive: %q is not a run file", f.Name)
		}
		if err := atomicfile.Write(filepath.Join(tmp, f.Name), f.Data, 0o644); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}
