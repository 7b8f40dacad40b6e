package k8s

import (
	"fmt"
	"io"
	"strings"
)

// SetImages fills in o's images from the images file im (ReadImages; nil: none): the
// replay and browser images o does not set, and the task images; then, when taskPrefix is
// set, the task image of every task of o.Tasks is taskPrefix followed by its id and the
// content tag (or digest) of its image in im: the prefix moves the images to another
// registry, the tags stay. Without a tag from im the reference is left untagged, which
// Render refuses. Set o.Tasks first.
func (o *Options) SetImages(im *Images, taskPrefix string) {
	o.TaskImages = map[string]string{}
	if im != nil {
		if o.ReplayImage == "" {
			o.ReplayImage = im.Replay
		}
		if o.BrowserImage == "" {
			o.BrowserImage = im.Browser
		}
		o.TaskImages = im.Task
	}
	if taskPrefix != "" {
		for _, id := range o.Tasks {
			o.TaskImages[id] = taskPrefix + id + tagOf(o.TaskImages[id])
		}
	}
}

// WriteStream writes the rendered files to w as one YAML stream, "---" between them. The
// error is the first failed write of a file's bytes.
func WriteStream(w io.Writer, files []File) error {
	for i, f := range files {
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(f.Data); err != nil {
			return err
		}
	}
	return nil
}

// tagOf is the ":tag" and/or "@sha256:..." suffix of an image reference ("" when none).
func tagOf(ref string) string {
	digest := ""
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i:]
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.Index(last, ":"); i >= 0 {
		return last[i:] + digest
	}
	return digest
}
