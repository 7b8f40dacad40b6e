package tlsca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func TestCACreateAndReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if ca.CertPath() != filepath.Join(dir, CertFile) {
		t.Errorf("CertPath = %s", ca.CertPath())
	}
	cert := ca.Certificate()
	if !cert.IsCA || cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA %v, key %v", cert.IsCA, cert.PublicKeyAlgorithm)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	if ca.SPKIHash() != base64.StdEncoding.EncodeToString(sum[:]) || len(ca.SPKIHash()) != 44 {
		t.Errorf("SPKIHash = %s", ca.SPKIHash())
	}
	again, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.SPKIHash() != ca.SPKIHash() {
		t.Error("reload made a new CA")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("CA dir holds %d files (temp files left?)", len(entries))
	}
}

func TestCABadFiles(t *testing.T) {
	good := t.TempDir()
	if _, err := LoadOrCreate(good); err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(filepath.Join(good, CertFile))
	keyPEM, _ := os.ReadFile(filepath.Join(good, KeyFile))
	other := t.TempDir()
	LoadOrCreate(other)
	otherKey, _ := os.ReadFile(filepath.Join(other, KeyFile))

	cases := []struct {
		name      string
		cert, key []byte // nil: file absent
		symlink   bool
		want      string // in the error; also the file it must name
		file      string
	}{
		{"corrupt cert", []byte("not pem"), keyPEM, false, "no PEM CERTIFICATE block", CertFile},
		{"truncated cert", certPEM[:len(certPEM)/2], keyPEM, false, "", CertFile},
		{"corrupt key", certPEM, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), false, "", KeyFile},
		{"other key", certPEM, otherKey, false, "does not match", KeyFile},
		{"only cert", certPEM, nil, false, "is missing", KeyFile},
		{"only key", nil, keyPEM, false, "is missing", CertFile},
		{"key is not PEM", certPEM, []byte{0, 1, 2}, false, "no PEM block", KeyFile},
		{"cert is a symlink", certPEM, keyPEM, true, "not a regular file", CertFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.cert != nil {
				p := filepath.Join(dir, CertFile)
				if c.symlink {
					real := filepath.Join(t.TempDir(), "real.pem")
					os.WriteFile(real, c.cert, 0o644)
					os.Symlink(real, p)
				} else {
					os.WriteFile(p, c.cert, 0o644)
				}
			}
			if c.key != nil {
				os.WriteFile(filepath.Join(dir, KeyFile), c.key, 0o600)
			}
			_, err := LoadOrCreate(dir)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, filepath.Join(dir, c.file)) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want %q naming %s on one line", msg, c.want, c.file)
			}
			// Nothing was overwritten.
			if c.cert != nil && !c.symlink {
				if got, _ := os.ReadFile(filepath.Join(dir, CertFile)); string(got) != string(c.cert) {
					t.Error("cert file was replaced")
				}
			}
		})
	}
}

func TestLeafCertificates(t *testing.T) {
	ca, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := ca.CertPool()
	for _, c := range []struct{ host, verifyName string }{
		{"site.test", "site.test"},
		{"Site.Test:443", "site.test"},
		{"site.test.", "site.test"},
		{"127.0.0.1", "127.0.0.1"},
		{"[::1]:8443", "::1"},
	} {
		cert, err := ca.LeafFor(c.host)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		if len(cert.Certificate) != 2 {
			t.Errorf("%s: chain of %d, want leaf and CA", c.host, len(cert.Certificate))
		}
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: c.verifyName, Roots: pool}); err != nil {
			t.Errorf("%s: %v", c.host, err)
		}
		if ip := net.ParseIP(c.verifyName); ip != nil && (len(cert.Leaf.IPAddresses) != 1 || len(cert.Leaf.DNSNames) != 0) {
			t.Errorf("%s: IP leaf has SANs %v %v", c.host, cert.Leaf.IPAddresses, cert.Leaf.DNSNames)
		}
		if _, ok := cert.PrivateKey.(*ecdsa.PrivateKey); !ok || cert.Leaf.PublicKeyAlgorithm != x509.ECDSA {
			t.Errorf("%s: leaf key %v", c.host, cert.Leaf.PublicKeyAlgorithm)
		}
	}
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("a", 254)} {
		if _, err := ca.LeafFor(bad); err == nil {
			t.Errorf("LeafFor(%q) accepted", bad)
		}
	}
}

// TestLeafCacheSingleflight checks that concurrent requests for one host sign once and
// that the cache stays bounded.
func TestLeafCacheSingleflight(t *testing.T) {
	c := newLeafCache(3)
	ca, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	signs := map[string]int{}
	gen := func(name string) func() (*tls.Certificate, error) {
		return func() (*tls.Certificate, error) {
			mu.Lock()
			signs[name]++
			mu.Unlock()
			return ca.signLeaf(name)
		}
	}
	var wg sync.WaitGroup
	certs := make([]*tls.Certificate, 32)
	for i := range certs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			certs[i], _ = c.get("one.test", gen("one.test"))
		}(i)
	}
	wg.Wait()
	for _, cert := range certs {
		if cert == nil || cert != certs[0] {
			t.Fatal("concurrent fetches gave different certificates")
		}
	}
	if signs["one.test"] != 1 {
		t.Errorf("signed %d times", signs["one.test"])
	}
	for _, h := range []string{"a.test", "b.test", "c.test", "d.test"} {
		c.get(h, gen(h))
	}
	if c.len() != 3 {
		t.Errorf("cache holds %d, bound 3", c.len())
	}
	c.get("one.test", gen("one.test"))
	if signs["one.test"] != 2 {
		t.Error("least recently used leaf was not evicted")
	}
	c.get("d.test", gen("d.test"))
	if signs["d.test"] != 1 {
		t.Error("recent leaf was evicted")
	}
}

// FuzzLoadCA feeds arbitrary bytes as ca.pem (with a valid key) and as ca-key.pem (with a
// valid certificate): loading must fail with one line naming a file, or succeed.
func FuzzLoadCA(f *testing.F) {
	good := f.TempDir()
	if _, err := LoadOrCreate(good); err != nil {
		f.Fatal(err)
	}
	certPEM, _ := os.ReadFile(filepath.Join(good, CertFile))
	keyPEM, _ := os.ReadFile(filepath.Join(good, KeyFile))
	f.Add(certPEM, true)
	f.Add(keyPEM, false)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), true)
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, asCert bool) {
		dir := t.TempDir()
		cert, key := certPEM, keyPEM
		if asCert {
			cert = data
		} else {
			key = data
		}
		os.WriteFile(filepath.Join(dir, CertFile), cert, 0o644)
		os.WriteFile(filepath.Join(dir, KeyFile), key, 0o600)
		ca, err := LoadOrCreate(dir)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q: want one line naming the file", err)
			}
			return
		}
		if _, err := ca.LeafFor("fuzz.test"); err != nil {
			t.Errorf("loaded CA cannot sign: %v", err)
		}
	})
}

// Replays that start at once on an empty cache all get the same CA.
func TestLoadOrCreateCAConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	const n = 8
	spki := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ca, err := LoadOrCreate(dir)
			errs[i] = err
			if err == nil {
				spki[i] = ca.SPKIHash()
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if spki[i] != spki[0] {
			t.Fatalf("start %d got another CA", i)
		}
	}
}

// TestLoadOrCreateCAProcesses starts 8 processes at once on an empty CA directory, several
// times over: every one must succeed and all must hold the same CA (the race that goroutines
// in one process hide: checks made before the lock, a key written before its certificate).
func TestLoadOrCreateCAProcesses(t *testing.T) {
	if os.Getenv("PAB_CA_CHILD_DIR") != "" {
		return
	}
	const procs, rounds = 8, 5
	for round := range rounds {
		dir := filepath.Join(t.TempDir(), "cache", "ca")
		cmds := make([]*exec.Cmd, procs)
		outs := make([]*bytes.Buffer, procs)
		for i := range cmds {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperCAProcess$")
			cmds[i].Env = append(os.Environ(), "PAB_CA_CHILD_DIR="+dir)
			outs[i] = new(bytes.Buffer)
			cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		spkis := map[string]bool{}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d process %d: %v\n%s", round, i, err, outs[i])
			}
			m := regexp.MustCompile(`spki=(\S+)`).FindStringSubmatch(outs[i].String())
			if m == nil {
				t.Fatalf("round %d process %d printed no SPKI:\n%s", round, i, outs[i])
			}
			spkis[m[1]] = true
		}
		if len(spkis) != 1 {
			t.Fatalf("round %d: %d different CAs made", round, len(spkis))
		}
		// Nothing but the two files, and no temp directory beside them.
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			t.Fatalf("round %d: CA directory holds %d entries", round, len(ents))
		}
		side, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".ca.tmp-*"))
		if len(side) != 0 {
			t.Fatalf("round %d: temp directories left: %v", round, side)
		}
	}
}

func TestHelperCAProcess(t *testing.T) {
	dir := os.Getenv("PAB_CA_CHILD_DIR")
	if dir == "" {
		return // not a test: the child of TestLoadOrCreateCAProcesses, run with PAB_CA_CHILD_DIR
	}
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("spki=%s\n", ca.SPKIHash())
}

// TestCAHalfWrittenMessage: a directory with one file left by a crash names the missing file
// and never advises removing both (which, during another process's creation, would lose it).
func TestCAHalfWrittenMessage(t *testing.T) {
	good := t.TempDir()
	if _, err := LoadOrCreate(good); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _ := os.ReadFile(filepath.Join(good, KeyFile))
	os.WriteFile(filepath.Join(dir, KeyFile), key, 0o600)
	_, err := LoadOrCreate(dir)
	if err == nil || !strings.Contains(err.Error(), "damaged") || strings.Contains(err.Error(), "remove both") {
		t.Fatalf("error %v: want a damaged-directory message without 'remove both'", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the half-written directory was changed: %d entries", len(ents))
	}
}

// TestDefaultDir checks where pab keeps its CA when nothing else is said: $PAB_CA_DIR,
// else $PAB_CACHE/ca, else $XDG_DATA_HOME/pab/ca (a relative XDG_DATA_HOME ignored), else
// ~/.local/share/pab/ca; the same directory whatever the current directory.
func TestDefaultDir(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		caDir, cache, xdg, want string
	}{
		{caDir: "/srv/ca", cache: "/c", xdg: "/x", want: "/srv/ca"},
		{cache: "/c", xdg: "/x", want: "/c/ca"},
		{xdg: "/x", want: "/x/pab/ca"},
		{xdg: "relative", want: filepath.Join(home, ".local/share/pab/ca")},
		{want: filepath.Join(home, ".local/share/pab/ca")},
	} {
		t.Setenv("PAB_CA_DIR", c.caDir)
		t.Setenv("PAB_CACHE", c.cache)
		t.Setenv("XDG_DATA_HOME", c.xdg)
		t.Setenv("HOME", home)
		got, err := DefaultDir()
		if err != nil || got != c.want {
			t.Errorf("%+v: DefaultDir() = %q, %v", c, got, err)
		}
		prev, _ := os.Getwd()
		os.Chdir(t.TempDir())
		again, _ := DefaultDir()
		os.Chdir(prev)
		if again != got {
			t.Errorf("%+v: DefaultDir() depends on the current directory: %q, then %q", c, got, again)
		}
	}
	t.Setenv("HOME", "")
	if _, err := DefaultDir(); err == nil || !strings.Contains(err.Error(), "PAB_CA_DIR") {
		t.Errorf("no home: %v", err)
	}
}
