package record

import (
	"bytes"
	"io"
	"os"
	"strings"

	"github.com/pab-dev/pab/recording"
)

// Where MachineTimezone reads the zone from.
var (
	etcTimezone  = "/etc/timezone"
	etcLocaltime = "/etc/localtime"
)

// MachineTimezone returns the machine's IANA time zone, the default time zone of a
// recording, and where it was found: the TZ environment variable when it names a zone
// time.LoadLocation loads (a leading ':' is dropped; TZ="" means UTC, as POSIX says),
// else the first line of /etc/timezone (Debian), else the zone name the /etc/localtime
// symbolic link points at (".../zoneinfo/Europe/Berlin"), else "UTC" ("unknown").
func MachineTimezone() (zone, from string) {
	if v, ok := os.LookupEnv("TZ"); ok {
		v = strings.TrimPrefix(v, ":")
		if v == "" {
			return "UTC", "TZ"
		}
		if recording.CheckTimezone(v) == nil {
			return v, "TZ"
		}
	}
	if f, err := os.Open(etcTimezone); err == nil {
		data, _ := io.ReadAll(io.LimitReader(f, 256))
		f.Close()
		line, _, _ := bytes.Cut(data, []byte("\n"))
		if z := strings.TrimSpace(string(line)); z != "" && recording.CheckTimezone(z) == nil {
			return z, etcTimezone
		}
	}
	if target, err := os.Readlink(etcLocaltime); err == nil {
		if _, z, ok := strings.Cut(target, "zoneinfo/"); ok && recording.CheckTimezone(z) == nil {
			return z, etcLocaltime
		}
	}
	return "UTC", "unknown"
}
