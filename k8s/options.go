package k8s

import (
	"fmt"
	"io"
)

// SetImages fills in o's images from the images file im (ReadImages; nil: none): the
// replay and browser images o does not set, and the task images; then, when taskPrefix is
// set, the task image of every task of o.Tasks is taskPrefix followed by its id (this
// overrides im). Set o.Tasks first.
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
			o.TaskImages[id] = taskPrefix + id
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
