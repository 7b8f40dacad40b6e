package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrInterrupted is Run's error when ctx ended while Chromium was starting.
var ErrInterrupted = errors.New("interrupted")

// Run is pab browser's Chromium: it makes a fresh profile directory (removed at the end)
// unless o.Profile is set, starts the Chromium at exe with url open (Start), prints on w
// the profile, the CDP endpoint and "press Ctrl-C to stop" ("pab browser: " lines), and
// waits until ctx ends, Chromium exits or the replay stops (stopped receives its Serve
// result and is sent it back; nil: no replay); then it stops the whole process group. An
// end of ctx during the start is ErrInterrupted; Chromium exiting with an error or the
// replay stopping are errors naming them; Chromium exiting cleanly is nil.
func Run(ctx context.Context, exe string, o Options, url string, stopped chan error, w io.Writer) error {
	if o.Profile == "" {
		profile, err := os.MkdirTemp("", "pab-browser-")
		if err != nil {
			return fmt.Errorf("browser: make profile directory: %w", err)
		}
		defer RemoveProfile(profile)
		o.Profile = profile
	}
	fmt.Fprintf(w, "pab browser: profile %s\n", o.Profile)
	p, err := Start(ctx, exe, o, url, "")
	if err != nil {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		return err
	}
	defer p.Stop()
	fmt.Fprintf(w, "pab browser: CDP %s\n", p.CDP)
	exited := p.Exited()
	fmt.Fprintln(w, "pab browser: press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case err := <-exited:
		exited <- err
		if err != nil {
			return fmt.Errorf("browser: %s exited: %w", exe, err)
		}
		fmt.Fprintln(w, "pab browser: chromium exited")
	case err := <-stopped:
		stopped <- err // the caller waits for it after closing the replay
		return fmt.Errorf("browser: replay stopped: %v", err)
	}
	return nil
}
