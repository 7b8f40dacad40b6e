package browser

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShellCommand: the line ShellCommand prints, run by /bin/sh with a stand-in chromium
// that prints its arguments and a stand-in pab for the command substitutions, gives
// Chromium exactly Args' flags (the CDP port and --no-sandbox left out), the substituted
// values included.
func TestShellCommand(t *testing.T) {
	bin := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("chromium", `for a in "$@"; do printf '%s\n' "$a"; done`+"\n")
	write("pab", `echo 'ab+c/d='`+"\n")
	write("mktemp", `echo /tmp/profile`+"\n")
	o := Options{Proxy: "127.0.0.1:8899", SPKI: "$(pab ca --spki)", Profile: "$(mktemp -d)", Headed: true, Locale: "en-US"}
	line := ShellCommand(o, "https://books.toscrape.com/", "  ")
	for _, l := range strings.Split(line, "\n") {
		if len(l) > 92 && strings.Count(strings.TrimSpace(strings.TrimSuffix(l, `\`)), " ") > 0 {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := slices.DeleteFunc(Args(Options{Proxy: o.Proxy, SPKI: "ab+c/d=", Profile: "/tmp/profile", Headed: true, Locale: "en-US"}, "https://books.toscrape.com/"),
		func(a string) bool { return a == "--no-sandbox" || strings.HasPrefix(a, "--remote-debugging-port=") })
	if !slices.Equal(got, want) {
		t.Errorf("the shell gave Chromium\n%q\nwant\n%q\n(line %s)", got, want, line)
	}
	if !slices.Contains(want, "--proxy-bypass-list=<-loopback>") || !slices.Contains(want, "--disable-features="+FeaturesOff) {
		t.Errorf("Args lost flags: %q", want)
	}
}
