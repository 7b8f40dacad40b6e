package har

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Bounds of attached body files.
const (
	// MaxZipMembers bounds the members of a Playwright .zip HAR (100,000 files).
	MaxZipMembers = 100_000
	// MaxAttachment bounds one attached body file, as stored and as inflated (1 GiB).
	MaxAttachment = 1 << 30
	// MaxHARMember bounds the HAR member of a .zip HAR, inflated (8 GiB).
	MaxHARMember = 8 << 30
)

// Attachments opens the body files a HAR names in "_file" (Playwright's recordHar with
// content "attach", or any .zip HAR): a plain file name, never a path.
type Attachments interface {
	// Open returns the file's bytes (at most MaxAttachment, the reader fails past it) and
	// its size. An error names the file and what is wrong.
	Open(name string) (io.ReadCloser, int64, error)
}

// checkAttachmentName refuses a "_file" value that is not a plain file name: empty, a
// path (a slash or backslash), "." or "..", or with a control byte.
func checkAttachmentName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("_file %q is not a file name", name)
	case strings.ContainsAny(name, "/\\"):
		return fmt.Errorf("_file %q is a path, not a file name beside the HAR (refused)", cut(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return fmt.Errorf("_file %q holds a control character", cut(name))
		}
	}
	return nil
}

// DirAttachments are the files beside a .har in its directory, opened through an os.Root
// so that no name leads out of it and no symbolic link is followed.
type DirAttachments struct {
	root *os.Root
	dir  string
}

// NewDirAttachments opens dir for attachments; Close releases it.
func NewDirAttachments(dir string) (*DirAttachments, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &DirAttachments{root: root, dir: dir}, nil
}

// Close releases the directory.
func (d *DirAttachments) Close() error { return d.root.Close() }

// Open opens the regular file name in the directory (not a link, at most MaxAttachment).
func (d *DirAttachments) Open(name string) (io.ReadCloser, int64, error) {
	if err := checkAttachmentName(name); err != nil {
		return nil, 0, err
	}
	st, err := d.root.Lstat(name)
	if err != nil {
		return nil, 0, fmt.Errorf("attached file %s: %w", filepath.Join(d.dir, name), err)
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("attached file %s is not a regular file (%s)", filepath.Join(d.dir, name), st.Mode().Type())
	}
	if st.Size() > MaxAttachment {
		return nil, 0, fmt.Errorf("attached file %s has %d bytes, more than %d", filepath.Join(d.dir, name), st.Size(), MaxAttachment)
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Zip is a Playwright .zip HAR: one member whose name ends in ".har" and the body files it
// names in "_file".
type Zip struct {
	zr      *zip.ReadCloser
	path    string
	har     *zip.File
	members map[string]*zip.File
}

// IsZip says whether the start of a file is a ZIP's local file header ("PK\x03\x04").
func IsZip(head []byte) bool {
	return len(head) >= 4 && string(head[:4]) == "PK\x03\x04"
}

// OpenZip opens the .zip HAR at path. It is refused when it is not a ZIP, has more than
// MaxZipMembers members, a member name that is absolute or holds "..", a backslash or a
// control character, a member that is a link or not a regular file, a compression other
// than store or deflate, not exactly one ".har" member, or members past their bounds.
func OpenZip(path string) (*Zip, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		if errors.Is(err, zip.ErrFormat) {
			return nil, fmt.Errorf("read %s: not a ZIP file (%v)", path, err)
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	z := &Zip{zr: zr, path: path, members: map[string]*zip.File{}}
	if err := z.check(); err != nil {
		zr.Close()
		return nil, err
	}
	return z, nil
}

func (z *Zip) check() error {
	if len(z.zr.File) > MaxZipMembers {
		return fmt.Errorf("read %s: %d files in the ZIP, more than %d", z.path, len(z.zr.File), MaxZipMembers)
	}
	for _, f := range z.zr.File {
		name := f.Name
		if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.Contains(name, "..") {
			return fmt.Errorf("read %s: member %q: an absolute or escaping name (refused)", z.path, cut(name))
		}
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] == 0x7f {
				return fmt.Errorf("read %s: member %q: a control character in its name", z.path, cut(name))
			}
		}
		mode := f.Mode()
		if mode.IsDir() {
			continue
		}
		if mode&fs.ModeSymlink != 0 || !mode.IsRegular() {
			return fmt.Errorf("read %s: member %q: not a regular file (mode %s)", z.path, cut(name), mode)
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return fmt.Errorf("read %s: member %q: unsupported ZIP compression method %d", z.path, cut(name), f.Method)
		}
		if _, dup := z.members[name]; dup {
			return fmt.Errorf("read %s: member %q occurs twice", z.path, cut(name))
		}
		z.members[name] = f
		if strings.HasSuffix(strings.ToLower(name), ".har") {
			if z.har != nil {
				return fmt.Errorf("read %s: two .har members (%q and %q)", z.path, z.har.Name, cut(name))
			}
			if f.UncompressedSize64 > MaxHARMember {
				return fmt.Errorf("read %s: member %q claims %d bytes, more than %d", z.path, cut(name), f.UncompressedSize64, int64(MaxHARMember))
			}
			z.har = f
		}
	}
	if z.har == nil {
		return fmt.Errorf("read %s: a ZIP without a .har member: not a Playwright HAR", z.path)
	}
	return nil
}

// HARName is the name of the HAR member ("FILE.zip!har.har"), for messages.
func (z *Zip) HARName() string { return z.path + "!" + z.har.Name }

// OpenHAR opens the HAR member, bounded by its claimed size.
func (z *Zip) OpenHAR() (io.ReadCloser, error) {
	rc, err := z.har.Open()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", z.HARName(), err)
	}
	return &boundedRC{r: bufio.NewReader(io.LimitReader(rc, int64(z.har.UncompressedSize64))), c: rc}, nil
}

// Open opens the attached member name (see Attachments): only members at the top of the
// ZIP, as Playwright writes them.
func (z *Zip) Open(name string) (io.ReadCloser, int64, error) {
	if err := checkAttachmentName(name); err != nil {
		return nil, 0, err
	}
	f, ok := z.members[name]
	if !ok {
		return nil, 0, fmt.Errorf("attached file %q is not in %s", cut(name), z.path)
	}
	if f.UncompressedSize64 > MaxAttachment {
		return nil, 0, fmt.Errorf("attached file %q of %s claims %d bytes, more than %d", name, z.path, f.UncompressedSize64, MaxAttachment)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, 0, fmt.Errorf("attached file %q of %s: %w", name, z.path, err)
	}
	size := int64(f.UncompressedSize64)
	return &boundedRC{r: io.LimitReader(rc, size), c: rc}, size, nil
}

// Close closes the ZIP.
func (z *Zip) Close() error { return z.zr.Close() }

type boundedRC struct {
	r io.Reader
	c io.Closer
}

func (b *boundedRC) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *boundedRC) Close() error               { return b.c.Close() }
