package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
)

// DriveOptions configure Drive.
type DriveOptions struct {
	// Chromium is the browser's executable (e.g. /usr/bin/chromium).
	Chromium string
	// Proxy is the host:port of the pab record or replay proxy the browser goes through.
	Proxy string
	// SPKI is `pab ca --spki`: the browser accepts certificates signed by pab's CA.
	SPKI string
	// Files is the directory holding resume.pdf and cover-letter.pdf, uploaded where a
	// form has file inputs.
	Files string
	// Site is "greenhouse", "teamtailor" or "acme": which scenario to play.
	Site string
	// Log receives one line per step; nil discards them.
	Log io.Writer
	// Replay says the proxy is pab replay: a multipart POST (a fresh boundary) is then
	// answered fuzzily with the first recording of its action, the confirmation page, so
	// the steps that expect a multipart error page accept any answer at that address.
	Replay bool
	// StepTimeout bounds each wait for a page state; 0 means 20 s.
	StepTimeout time.Duration
}

// The owner whose fake data the scenarios type (the tasks' application.yaml grounds the
// same values).
const (
	ownerFirst = "Jane"
	ownerLast  = "Doe"
	ownerEmail = "jane.doe@example.com"
	ownerPhone = "+1 555 0100"
)

// Sites lists the scenario names Drive accepts.
var Sites = []string{"greenhouse", "teamtailor", "acme"}

// Drive plays one site's scenario in headless Chromium through the proxy: it opens every
// page and follows every submit path (the successful POST, then the error POST), waiting
// after each step for the text that proves the answer arrived. It returns the first step
// that fails, naming it.
func Drive(ctx context.Context, o DriveOptions) error {
	if o.Chromium == "" || o.Proxy == "" || o.SPKI == "" || o.Files == "" {
		return errors.New("applyfixture drive: Chromium, Proxy, SPKI and Files are required")
	}
	// Chromium reads upload files by absolute path only
	abs, err := filepath.Abs(o.Files)
	if err != nil {
		return fmt.Errorf("applyfixture drive: -files: %w", err)
	}
	o.Files = abs
	for _, f := range []string{"resume.pdf", "cover-letter.pdf"} {
		if _, err := os.Stat(filepath.Join(o.Files, f)); err != nil {
			return fmt.Errorf("applyfixture drive: want %s in -files: %w", f, err)
		}
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 20 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	profile, err := os.MkdirTemp("", "applyfixture-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	opts := cdpalloc.Options(o.Chromium, browser.Options{Proxy: o.Proxy, SPKI: o.SPKI, Profile: profile})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		return fmt.Errorf("applyfixture drive: start %s: %w", o.Chromium, err)
	}
	d := &driver{ctx: bctx, o: o}
	switch o.Site {
	case "greenhouse":
		return d.greenhouse()
	case "teamtailor":
		return d.teamtailor()
	case "acme":
		return d.acme()
	}
	return fmt.Errorf("applyfixture drive: site %q: want one of %s", o.Site, strings.Join(Sites, ", "))
}

type driver struct {
	ctx context.Context
	o   DriveOptions
}

func (d *driver) file(name string) string { return filepath.Join(d.o.Files, name) }

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.o.Log, "drive %s: %s\n", d.o.Site, fmt.Sprintf(format, args...))
}

// do runs actions with a step timeout and names the step in the error.
func (d *driver) do(step string, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(d.ctx, d.o.StepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	return nil
}

// eval runs a script in the page and ignores its value.
func (d *driver) eval(step, js string) error {
	ctx, cancel := context.WithTimeout(d.ctx, d.o.StepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](js)); err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	return nil
}

// waitFor polls a JavaScript condition until it is true, across navigations (an
// evaluation that fails while a page is replaced is retried).
func (d *driver) waitFor(step, cond string) error {
	deadline := time.Now().Add(d.o.StepTimeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("(() => { try { return !!("+cond+"); } catch (e) { return false; } })()"))
		cancel()
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		if d.ctx.Err() != nil {
			return d.ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	state := d.state()
	return fmt.Errorf("step %q: %s not true within %s (page %s) %s", step, cond, d.o.StepTimeout, state, last)
}

// state is the page's address and title, for error messages.
func (d *driver) state() string {
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " «" + document.title + "»"`))
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return s
}

// open navigates to u and waits until the document is complete and cond holds.
func (d *driver) open(u, cond string) error {
	d.logf("open %s", u)
	if err := d.do("open "+u, chromedp.Navigate(u)); err != nil {
		return err
	}
	if cond == "" {
		cond = "true"
	}
	return d.waitFor("open "+u, "document.readyState === 'complete' && location.href.startsWith("+js(u)+") && ("+cond+")")
}

// goTo navigates to u and waits for cond only (the page may redirect elsewhere).
func (d *driver) goTo(u, cond string) error {
	d.logf("go to %s", u)
	if err := d.do("go to "+u, chromedp.Navigate(u)); err != nil {
		return err
	}
	return d.waitFor("go to "+u, "document.readyState === 'complete' && ("+cond+")")
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// set gives the first element matching sel the value v, with input and change events.
func (d *driver) set(sel, v string) error {
	return d.eval("set "+sel, `(() => { const el = document.querySelector(`+js(sel)+`);
		if (!el) throw new Error("no element " + `+js(sel)+`);
		el.value = `+js(v)+`; el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true})); })()`)
}

// check ticks the checkbox or radio matching sel.
func (d *driver) check(sel string) error {
	return d.eval("check "+sel, `(() => { const el = document.querySelector(`+js(sel)+`);
		if (!el) throw new Error("no element " + `+js(sel)+`);
		el.checked = true; el.dispatchEvent(new Event("change", {bubbles: true})); })()`)
}

// fill sets several fields, in order (selector, value pairs).
func (d *driver) fill(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := d.set(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (d *driver) upload(sel string, files ...string) error {
	d.logf("upload %s", sel)
	return d.do("upload "+sel, chromedp.SetUploadFiles(chromedp.CSS(sel), files))
}

// click presses the element with a real mouse click.
func (d *driver) click(sel string) error {
	d.logf("click %s", sel)
	return d.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// multipartError waits for the error page a multipart POST to path got (see
// DriveOptions.Replay).
func (d *driver) multipartError(step, path, text string) error {
	if d.o.Replay {
		return d.waitFor(step, pathIs(path))
	}
	return d.waitFor(step, pathIs(path)+" && "+textHas(text))
}

// textHas is a condition: the page's text contains s.
func textHas(s string) string {
	return "document.body && document.body.innerText.includes(" + js(s) + ")"
}

// pathIs is a condition: the page is at path p and fully loaded.
func pathIs(p string) string {
	return "location.pathname === " + js(p) + " && document.readyState === 'complete'"
}

func (d *driver) steps(fns ...func() error) error {
	for _, f := range fns {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
