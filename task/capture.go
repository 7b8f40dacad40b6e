package task

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/recording"
)

// SetCapture records c (a recording's locale and time zone, from its manifest) in the
// task.yaml at path, the seed's capture section:
//
//	capture:
//	  locale: en-US
//	  timezone: America/New_York
//
// A card without a capture section gets one appended, as text, so that its comments and
// layout stay as they are; the file is written to a temporary file and renamed into place.
// A card whose capture section already gives those values is left alone. A card whose
// capture section gives other values, or lacks one of c's, is left alone too: the returned
// warning says what differs (the manifest is what replay uses). Values are checked with
// recording.CheckLocale and recording.CheckTimezone first; a card that is not one YAML mapping is an
// error naming the file.
func SetCapture(path string, c Capture) (warning string, err error) {
	if c.Locale != "" {
		if err := recording.CheckLocale(c.Locale); err != nil {
			return "", fmt.Errorf("%s: capture.locale: %w", path, err)
		}
	}
	if c.Timezone != "" {
		if err := recording.CheckTimezone(c.Timezone); err != nil {
			return "", fmt.Errorf("%s: capture.timezone: %w", path, err)
		}
	}
	if c.Locale == "" && c.Timezone == "" {
		return "", nil
	}
	data, err := readCardFile(path)
	if err != nil {
		return "", err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("read %s: %s", path, oneLine(err))
	}
	var root *yaml.Node
	switch {
	case doc.Kind == 0:
	case len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode:
		root = doc.Content[0]
	default:
		return "", fmt.Errorf("read %s: not a YAML mapping", path)
	}
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value != "capture" {
				continue
			}
			var have Capture
			if err := root.Content[i+1].Decode(&have); err != nil {
				return "", fmt.Errorf("read %s: capture: %s", path, oneLine(err))
			}
			var diffs []string
			if c.Locale != "" && have.Locale != c.Locale {
				diffs = append(diffs, fmt.Sprintf("locale %q (the recording's manifest: %q)", have.Locale, c.Locale))
			}
			if c.Timezone != "" && have.Timezone != c.Timezone {
				diffs = append(diffs, fmt.Sprintf("timezone %q (the recording's manifest: %q)", have.Timezone, c.Timezone))
			}
			if len(diffs) == 0 {
				return "", nil
			}
			return fmt.Sprintf("%s: capture gives %s; task.yaml is left as it is, replay uses the manifest", path, strings.Join(diffs, " and ")), nil
		}
	}
	var add bytes.Buffer
	if len(data) > 0 && data[len(data)-1] != '\n' {
		add.WriteByte('\n')
	}
	add.WriteString("capture:                         # the browser's language and time zone while recording\n")
	if c.Locale != "" {
		fmt.Fprintf(&add, "  locale: %s\n", c.Locale)
	}
	if c.Timezone != "" {
		fmt.Fprintf(&add, "  timezone: %s\n", c.Timezone)
	}
	out := append(bytes.Clone(data), add.Bytes()...)
	if _, _, err := parseCard(out); err != nil {
		return "", fmt.Errorf("write %s: the card with a capture section does not read back: %s", path, oneLine(err))
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, out, perm); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return "", nil
}
