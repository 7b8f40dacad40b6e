package record

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMachineTimezone: TZ wins when it names a zone (a leading ':' dropped, "" is UTC);
// else /etc/timezone's first line; else the zone the /etc/localtime link points at; else
// UTC, said to be unknown.
func TestMachineTimezone(t *testing.T) {
	dir := t.TempDir()
	oldTZ, oldLink := etcTimezone, etcLocaltime
	defer func() { etcTimezone, etcLocaltime = oldTZ, oldLink }()
	etcTimezone = filepath.Join(dir, "timezone")
	etcLocaltime = filepath.Join(dir, "localtime")
	os.WriteFile(etcTimezone, []byte("Europe/Berlin\nignored\n"), 0o644)
	os.Symlink("/usr/share/zoneinfo/America/Chicago", etcLocaltime)

	for _, tc := range []struct {
		tz, setTZ  string
		zone, from string
	}{
		{"set", "Asia/Tokyo", "Asia/Tokyo", "TZ"},
		{"set", ":Asia/Kolkata", "Asia/Kolkata", "TZ"},
		{"set", "", "UTC", "TZ"},
		{"set", "Not/AZone", "Europe/Berlin", etcTimezone},
		{"unset", "", "Europe/Berlin", etcTimezone},
	} {
		if tc.tz == "set" {
			t.Setenv("TZ", tc.setTZ)
		} else {
			t.Setenv("TZ", "x")
			os.Unsetenv("TZ")
		}
		if zone, from := MachineTimezone(); zone != tc.zone || from != tc.from {
			t.Errorf("TZ %s %q: %s from %s, want %s from %s", tc.tz, tc.setTZ, zone, from, tc.zone, tc.from)
		}
	}
	t.Setenv("TZ", "x")
	os.Unsetenv("TZ")
	os.WriteFile(etcTimezone, []byte("garbage zone\n"), 0o644)
	if zone, from := MachineTimezone(); zone != "America/Chicago" || from != etcLocaltime {
		t.Errorf("from the /etc/localtime link: %s from %s", zone, from)
	}
	os.Remove(etcTimezone)
	os.Remove(etcLocaltime)
	if zone, from := MachineTimezone(); zone != "UTC" || from != "unknown" {
		t.Errorf("nothing known: %s from %s, want UTC from unknown", zone, from)
	}
}
