package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// maxCDPReply bounds a DevTools HTTP answer.
const maxCDPReply = 1 << 20

// target is an entry of the DevTools /json/list answer.
type target struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	URL   string `json:"url"`
	Title string `json:"title"`
}

// openInBrowser opens u in a new tab of the browser at base (its DevTools HTTP endpoint:
// PUT /json/new?URL, then /json/list until the tab shows the page's own title, then
// /json/close/ID), so the page and everything it loads go through the browser's proxy.
// It waits at most 60 s.
func openInBrowser(base, u string) error {
	c := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodPut, strings.TrimRight(base, "/")+"/json/new?"+u, nil)
	if err != nil {
		return err
	}
	var t target
	if err := cdpJSON(c, req, &t); err != nil {
		return fmt.Errorf("browser: open %s: %w", u, err)
	}
	defer func() {
		if r, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/json/close/"+url.PathEscape(t.ID), nil); err == nil {
			if resp, err := c.Do(r); err == nil {
				resp.Body.Close()
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/json/list", nil)
		if err != nil {
			return err
		}
		var ts []target
		if err := cdpJSON(c, req, &ts); err != nil {
			return fmt.Errorf("browser: %w", err)
		}
		for _, x := range ts {
			// while a page loads, Chromium shows its URL (without the scheme) as the title
			if x.ID == t.ID && x.Title != "" && !strings.Contains(u, x.Title) {
				fmt.Printf("refagent: browser opened %s: %q\n", x.URL, x.Title)
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("browser: %s did not load within 60 s", u)
}

func cdpJSON(c *http.Client, req *http.Request, v any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCDPReply))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return json.Unmarshal(b, v)
}

// egressTargets are the outside addresses egress tries: an IP literal and a DNS name.
var egressTargets = []string{"1.1.1.1", "example.com"}

// egress is the misbehaving agent that tries to reach the outside: for each target, a
// DNS lookup (names only), a direct TCP connection to port 443, a GET through the replay
// proxy and, with --cdp, a page opened in the browser. Each outcome is one line on
// stdout ("egress: direct 1.1.1.1:443: failed: ..."), and the answer file lists them. It
// never fails itself: what got through is for the test to judge.
func egress(answerFile string) error {
	var lines []string
	say := func(format string, a ...any) {
		l := fmt.Sprintf(format, a...)
		fmt.Println("egress: " + l)
		lines = append(lines, l)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		say("interfaces: %v", err)
	} else {
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		say("interfaces: %s", strings.Join(names, ","))
	}
	var client *http.Client
	if p, ca := os.Getenv("PAB_PROXY"), os.Getenv("PAB_CA_FILE"); p != "" && ca != "" {
		if client, err = newClient(p, ca); err != nil {
			return err
		}
		client.Timeout = 15 * time.Second
	}
	for _, h := range egressTargets {
		if net.ParseIP(h) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			addrs, err := net.DefaultResolver.LookupHost(ctx, h)
			cancel()
			say("dns %s: %s", h, outcome(strings.Join(addrs, ","), err))
		}
		d := net.Dialer{Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", net.JoinHostPort(h, "443"))
		if err == nil {
			conn.Close()
			say("direct %s:443: %s", h, outcome("CONNECTED", nil))
		} else {
			say("direct %s:443: %s", h, outcome("", err))
		}
		if client != nil {
			resp, err := client.Get("https://" + h + "/")
			if err == nil {
				resp.Body.Close()
				say("proxy https://%s/: %s", h, outcome(fmt.Sprintf("status %d", resp.StatusCode), nil))
			} else {
				say("proxy https://%s/: %s", h, outcome("", err))
			}
		}
		if cdpURL != "" {
			err := openInBrowser(cdpURL, "https://"+h+"/")
			say("browser https://%s/: %s", h, outcome("loaded", err))
		}
	}
	return atomicfile.Write(answerFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func outcome(ok string, err error) string {
	if err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return "failed: " + ne.Err.Error()
		}
		return "failed: " + err.Error()
	}
	return ok
}
