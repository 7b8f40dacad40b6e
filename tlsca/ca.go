// Package tlsca is pab's certificate authority for HTTPS interception (MITM): an ECDSA
// P-256 key and a self-signed CA certificate made once per user (DefaultDir) under a file
// lock and published whole, and the per-host leaf certificates signed with it and cached
// (LeafFor). Clients trust ca.pem, or Chromium is given the key's SPKI hash (SPKIHash).
package tlsca

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/filelock"
	"github.com/pab-dev/pab/internal/readlimit"
)

// File names of the CA inside its directory ($PAB_CACHE/ca).
const (
	CertFile = "ca.pem"     // the CA certificate, PEM "CERTIFICATE"
	KeyFile  = "ca-key.pem" // the CA private key, PEM "PRIVATE KEY" (PKCS #8), mode 0600
)

// maxCAFileSize bounds how much of a CA file is read: a PEM certificate or key is a few KB.
const maxCAFileSize = 64 << 10

// leafCacheSize bounds the number of per-host leaf certificates kept in memory.
const leafCacheSize = 1024

// DefaultDir is the directory of the CA that pab uses when nothing else is said, one per
// user so that every task repository and every directory share it (as mitmproxy keeps
// ~/.mitmproxy): $PAB_CA_DIR when set; else $PAB_CACHE/ca when $PAB_CACHE is set (pods
// and tests keep their CA with their cache); else $XDG_DATA_HOME/pab/ca, with
// XDG_DATA_HOME defaulting to ~/.local/share (XDG Base Directory Specification). It
// returns an error when none of these can be found (no home directory).
func DefaultDir() (string, error) {
	if d := os.Getenv("PAB_CA_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if c := os.Getenv("PAB_CACHE"); c != "" {
		return filepath.Abs(filepath.Join(c, "ca"))
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) { // the spec: a relative value is ignored
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return "", errors.New("no directory for pab's CA: set PAB_CA_DIR (or HOME)")
		}
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "pab", "ca"), nil
}

// LoadDefault is LoadOrCreate(DefaultDir()).
func LoadDefault() (*CA, error) {
	dir, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	return LoadOrCreate(dir)
}

// CA is pab's own certificate authority: an ECDSA P-256 key and a self-signed certificate,
// made once per cache directory. The replay proxy signs one leaf certificate per host
// with it to answer HTTPS (MITM); clients trust ca.pem, or Chromium is given SPKIHash.
// A CA is safe for concurrent use.
type CA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	leaves *leafCache
}

// LoadOrCreate loads the CA kept in dir (ca.pem and ca-key.pem). When dir holds neither
// file it makes a new CA, correctly under any concurrency of goroutines and processes: the
// creation runs under an exclusive flock(2) on dir+".lock" (beside dir, which holds only the
// CA), the files are checked again after the lock is taken, and both are written into a
// fresh temp directory that is renamed onto dir only when complete (key mode 0600, each file
// fsynced), so no process ever sees one file without the other. Concurrent callers on an
// empty cache all get the same CA.
//
// A file that exists but cannot be used (unreadable, not PEM, not a CA certificate, a key
// that does not match, expired) is an error naming the file; so is a directory that holds
// only one of the two files once the lock is held, which only a crash of an older pab or a
// hand edit can leave. Clients trust the CA, so it is never silently replaced.
func LoadOrCreate(dir string) (*CA, error) {
	// Fast path, no lock: a complete CA is never rewritten, so reading it needs no lock.
	if ca, err, done := loadIfComplete(dir); done {
		return ca, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	unlock, err := filelock.Lock(filepath.Clean(dir) + ".lock")
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	defer unlock()
	// Another process may have made it while this one waited for the lock.
	if ca, err, done := loadIfComplete(dir); done {
		return ca, err
	}
	certPath := filepath.Join(dir, CertFile)
	keyPath := filepath.Join(dir, KeyFile)
	certExists, err := regularFileExists(certPath)
	if err != nil {
		return nil, err
	}
	keyExists, err := regularFileExists(keyPath)
	if err != nil {
		return nil, err
	}
	switch {
	case certExists:
		return nil, fmt.Errorf("load CA: %s exists but %s is missing: the CA directory is damaged (pab writes both files at once); restore the key, or move %s aside to make a new CA that clients must trust again", certPath, keyPath, dir)
	case keyExists:
		return nil, fmt.Errorf("load CA: %s exists but %s is missing: the CA directory is damaged (pab writes both files at once); restore the certificate, or move %s aside to make a new CA", keyPath, certPath, dir)
	}
	return createCA(dir)
}

// loadIfComplete loads the CA when both files exist (done is true, with the CA or the error
// of loading it), and reports done false when either is missing.
func loadIfComplete(dir string) (ca *CA, err error, done bool) {
	certExists, err := regularFileExists(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err, true
	}
	keyExists, err := regularFileExists(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err, true
	}
	if !certExists || !keyExists {
		return nil, nil, false
	}
	ca, err = loadCA(dir)
	if err != nil && !strings.Contains(err.Error(), "to make a new CA") {
		// clients trust this CA, so pab never replaces it on its own
		return nil, fmt.Errorf("%w (move %s aside to make a new CA)", err, dir), true
	}
	return ca, err, true
}

// regularFileExists reports whether path exists; anything but a regular file (a symlink,
// a directory) is an error so that a CA is never read through a link.
func regularFileExists(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load CA: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("load CA: %s is not a regular file", path)
	}
	return true, nil
}

// readBounded reads a CA file of at most maxCAFileSize bytes; errors are "load CA: ...".
func readBounded(path string) ([]byte, error) {
	data, err := readlimit.File(path, maxCAFileSize)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	return data, nil
}

func loadCA(dir string) (*CA, error) {
	certPath := filepath.Join(dir, CertFile)
	keyPath := filepath.Join(dir, KeyFile)
	certPEM, err := readBounded(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readBounded(keyPath)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("load CA: %s: no PEM CERTIFICATE block", certPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load CA: %s: %w", certPath, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("load CA: %s: certificate is not a CA (no basic constraints CA or no cert-sign key usage)", certPath)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("load CA: %s: no PEM block", keyPath)
	}
	var key *ecdsa.PrivateKey
	switch kb.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("load CA: %s: %w", keyPath, err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("load CA: %s: key is %T, want ECDSA", keyPath, k)
		}
		key = ek
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("load CA: %s: %w", keyPath, err)
		}
	default:
		return nil, fmt.Errorf("load CA: %s: PEM block %q, want PRIVATE KEY", keyPath, kb.Type)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, fmt.Errorf("load CA: %s does not match the certificate in %s", keyPath, certPath)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("load CA: %s expired on %s (remove %s and %s to make a new CA)",
			certPath, cert.NotAfter.UTC().Format(time.DateOnly), certPath, keyPath)
	}
	return &CA{dir: dir, cert: cert, key: key, leaves: newLeafCache(leafCacheSize)}, nil
}

func createCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "pab replay CA " + serial.Text(16)[:8],
			Organization: []string{"pab (local replay proxy)"},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	if err := publishCADir(dir, map[string]caFile{
		KeyFile:  {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600},
		CertFile: {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644},
	}); err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	return &CA{dir: dir, cert: cert, key: key, leaves: newLeafCache(leafCacheSize)}, nil
}

// caFile is one file of a new CA directory: its bytes and mode.
type caFile struct {
	data []byte
	perm os.FileMode
}

// publishCADir writes files into a new temp directory beside dir (mode 0700, each file
// fsynced), then renames it onto dir. dir must be missing or an empty directory, so an
// existing CA is never overwritten. Leftover temp directories of a
// crashed earlier creation are removed first; the caller holds the CA lock.
func publishCADir(dir string, files map[string]caFile) error {
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	if old, err := filepath.Glob(filepath.Join(parent, "."+base+".tmp-*")); err == nil {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		data := files[name].data
		if err := atomicfile.WriteNew(filepath.Join(tmp, name), files[name].perm, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return err
		}
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return err
	}
	// os.Rename refuses to replace a directory, even an empty one: remove an empty dir
	// first (os.Remove fails on a non-empty one). Readers that look meanwhile find no CA
	// and wait for the lock this caller holds.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("publish %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("publish %s: %w", dir, err)
	}
	ok = true
	return atomicfile.SyncDir(parent)
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// CertPath is the absolute or dir-relative path of the CA certificate (PEM), for
// curl --cacert, NODE_EXTRA_CA_CERTS or an NSS database.
func (ca *CA) CertPath() string { return filepath.Join(ca.dir, CertFile) }

// CertPEM is the CA certificate in PEM form.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// Certificate is the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// SPKIHash is the base64 (standard encoding) SHA-256 of the CA certificate's
// SubjectPublicKeyInfo, the form Chromium's --ignore-certificate-errors-spki-list takes.
// Chromium compares it with the certificates the server presents, so the proxy sends the
// CA certificate along with every leaf.
func (ca *CA) SPKIHash() string {
	sum := sha256.Sum256(ca.cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// CertPool is a pool holding only the CA certificate, for a Go client's RootCAs.
func (ca *CA) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// LeafFor returns the TLS certificate for host (a DNS name or an IP literal, with or
// without a port), signed by the CA and cached: concurrent calls for one host sign once,
// and at most leafCacheSize hosts are kept (least recently used dropped). The chain holds
// the leaf and the CA certificate.
func (ca *CA) LeafFor(host string) (*tls.Certificate, error) {
	name, err := leafName(host)
	if err != nil {
		return nil, err
	}
	return ca.leaves.get(name, func() (*tls.Certificate, error) { return ca.signLeaf(name) })
}

// leafName normalizes a certificate subject: port and brackets stripped, lower case,
// no trailing dot. It refuses empty and over-long names and names with characters that
// cannot appear in a host.
func leafName(host string) (string, error) {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("sign certificate: bad host %q", host)
	}
	if net.ParseIP(h) != nil {
		return h, nil
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '*') {
			return "", fmt.Errorf("sign certificate: bad host %q", host)
		}
	}
	return h, nil
}

func (ca *CA) signLeaf(name string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.AddDate(0, 0, 30),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// leafCache is a bounded LRU of leaf certificates with one signing in flight per name.
type leafCache struct {
	mu       sync.Mutex
	max      int
	order    *list.List // front = most recently used; values are *leafItem
	items    map[string]*list.Element
	inflight map[string]*leafCall
}

type leafItem struct {
	name string
	cert *tls.Certificate
}

type leafCall struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

func newLeafCache(max int) *leafCache {
	return &leafCache{max: max, order: list.New(), items: map[string]*list.Element{}, inflight: map[string]*leafCall{}}
}

func (c *leafCache) get(name string, gen func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	c.mu.Lock()
	if el, ok := c.items[name]; ok {
		item := el.Value.(*leafItem)
		// Re-sign a leaf that is about to expire (long-running proxies).
		if time.Until(item.cert.Leaf.NotAfter) > time.Hour {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			return item.cert, nil
		}
		c.order.Remove(el)
		delete(c.items, name)
	}
	if call, ok := c.inflight[name]; ok {
		c.mu.Unlock()
		<-call.done
		return call.cert, call.err
	}
	call := &leafCall{done: make(chan struct{})}
	c.inflight[name] = call
	c.mu.Unlock()

	call.cert, call.err = gen()

	c.mu.Lock()
	delete(c.inflight, name)
	if call.err == nil {
		c.items[name] = c.order.PushFront(&leafItem{name: name, cert: call.cert})
		for c.order.Len() > c.max {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.items, old.Value.(*leafItem).name)
		}
	}
	c.mu.Unlock()
	close(call.done)
	return call.cert, call.err
}

// len is the number of cached leaves (tests).
func (c *leafCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
