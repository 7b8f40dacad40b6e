package importer

// infer.go: the rules inferred from an imported recording (rules.Infer), written beside
// the task's hand-written ones.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
)

// Bounds of the part of each payload handed to rule inference: HTML pages are parsed
// (rules.InferOptions.MaxHTMLBytes), other payloads are only told apart by size and digest,
// which the samples carry whole, and sniffed for tracking pixels.
const (
	maxInferBody      = 2 << 20
	maxInferOtherBody = 4 << 10
)

// inferRules infers site rules from the bundle (rules.Infer), with the repository's sites/
// and the task's hand-written rule files as what is already known, writes them into work
// (nothing of the task is touched: writeInferredRules does that), and returns them with the
// rule layers of the self-check: generic rules only, generic + inferred, and everything in
// effect. Once ctx is done it stops between the sampled entries with ctx's cause.
func inferRules(ctx context.Context, t *task.Task, bundleDir, work string) ([]*rules.InferredFile, []ruleLayer, error) {
	handDir := filepath.Join(work, "hand-rules")
	if err := copyHandRules(t.RulesDir(), handDir); err != nil {
		return nil, nil, err
	}
	base, err := rules.Load(t.Repo.SitesDir(), handDir)
	if err != nil {
		return nil, nil, err
	}
	samples, err := bundleSamples(ctx, bundleDir)
	if err != nil {
		return nil, nil, err
	}
	files := rules.Infer(samples, base, rules.InferOptions{})
	inferredDir := filepath.Join(work, "inferred-rules")
	if err := rules.WriteAutoFiles(inferredDir, files); err != nil {
		return nil, nil, err
	}
	return files, []ruleLayer{
		{name: "generic rules only"},
		{name: "+ inferred", dirs: []string{inferredDir}},
		{name: "+ hand-written", dirs: []string{t.Repo.SitesDir(), t.RulesDir()}},
	}, nil
}

// writeInferredRules writes the inferred rules as the task's rules/<site>.auto.yaml
// (rules.WriteAutoFiles: hand-written files are never touched), says which on out and
// returns their paths.
func writeInferredRules(t *task.Task, files []*rules.InferredFile, out io.Writer) ([]string, error) {
	if fi, err := os.Stat(t.RulesDir()); len(files) > 0 || err == nil && fi.IsDir() {
		if err := rules.WriteAutoFiles(t.RulesDir(), files); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Join(t.RulesDir(), rules.AutoFileName(f.Site)))
	}
	if len(names) > 0 {
		fmt.Fprintf(out, "inferred rules: %s\n", strings.Join(names, ", "))
	} else {
		fmt.Fprintln(out, "inferred rules: none")
	}
	return names, nil
}

// copyHandRules copies the hand-written rule files of a task's rules directory (every
// *.yaml but *.auto.yaml, regular files of at most rules.MaxFileSize bytes) into dst.
func copyHandRules(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	des, err := os.ReadDir(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".auto.yaml") || !de.Type().IsRegular() {
			continue
		}
		data, err := readlimit.File(filepath.Join(src, name), rules.MaxFileSize)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// The bounds of what rule inference reads of a recording (docs/import.md "After the
// import"): at most maxInferSamples exchanges, evenly spaced in recording order (a crawl of
// a million records is inferred from a sample), and at most maxInferSampleBytes of bodies
// together; once those are spent, each further body is read up to maxInferOtherBody only.
const (
	maxInferSamples     = 10000
	maxInferSampleBytes = 128 << 20
)

// bundleSamples reads the bundle's exchanges as rule inference sees them, in recording
// order: all of them, or an evenly spaced sample of maxInferSamples
// (recording.OpenBundleSample); each payload cut as maxInferBody and maxInferOtherBody say,
// within maxInferSampleBytes; unresolved revisits left out.
func bundleSamples(ctx context.Context, dir string) ([]rules.Sample, error) {
	b, _, err := recording.OpenBundleSample(dir, maxInferSamples)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var samples []rules.Sample
	var read int64
	for i := range b.Len() {
		if err := context.Cause(ctx); err != nil { // Ctrl-C
			return nil, err
		}
		e := b.Entry(i)
		if e.Unresolved {
			continue
		}
		resp, err := b.Response(e)
		if err != nil {
			return nil, err
		}
		limit := int64(maxInferOtherBody)
		if (e.Mime == "text/html" || e.Mime == "application/xhtml+xml") && read < maxInferSampleBytes {
			limit = maxInferBody
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return nil, fmt.Errorf("read %s (entry %s): %w", filepath.Join(dir, recording.WARCFile), e.ID, err)
		}
		read += int64(len(body))
		reqBody, err := b.RequestBody(e)
		if err != nil {
			return nil, err
		}
		ts, _ := time.Parse(time.RFC3339Nano, e.TS)
		samples = append(samples, rules.Sample{Method: e.Method, URL: e.URL, Status: e.Status,
			ContentType: resp.Header.Get("Content-Type"), Body: body, Digest: e.Digest, Size: e.Size,
			Time: ts, ReqBody: reqBody, ReqContentType: e.RequestType(reqBody)})
	}
	return samples, nil
}
