package recording

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// gzMember is data compressed as one gzip member.
func gzMember(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	gzMemberWriter.Reset(&b)
	zw := gzMemberWriter
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var gzMemberWriter = gzip.NewWriter(nil)

// inflateResult is what inflateMembers gave: the bytes written, the spans, the error.
type inflateResult struct {
	out   []byte
	spans []memberSpan
	err   string
}

func inflateWith(t *testing.T, parts []string, u *unpackBudget, max int64, starts ...[]int64) inflateResult {
	t.Helper()
	var out bytes.Buffer
	spans, err := inflateMembers(context.Background(), parts, &out, max, u, starts...)
	r := inflateResult{out: out.Bytes(), spans: spans}
	if err != nil {
		r.err = err.Error()
		r.out, r.spans = nil, nil // what was written before an error is thrown away
	}
	return r
}

func sameInflate(t *testing.T, what string, got, want inflateResult) {
	t.Helper()
	if got.err != want.err || !bytes.Equal(got.out, want.out) || !slices.Equal(got.spans, want.spans) {
		t.Errorf("%s: error %q, %d bytes, %d spans; one member at a time: error %q, %d bytes, %d spans",
			what, got.err, len(got.out), len(got.spans), want.err, len(want.out), len(want.spans))
	}
}

// TestInflateMembersHintsSameResult: inflating parts with workers between the expected
// member starts writes the same bytes and finds the same members and errors as inflating
// them one member at a time, whether the starts are right, missing, wrong (inside a member,
// past the end, repeated, unsorted), and whether the part holds a member too long for a
// worker, one that inflates to more than a worker holds, a run of members that inflates to
// more than a worker keeps, bytes that are no gzip member, or a member cut short; the archive bound and the unpack budget fail the same way.
func TestInflateMembersHintsSameResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var members [][]byte
	for i := range 300 {
		switch i {
		case 100:
			members = append(members, gzMember(t, make([]byte, 3<<20))) // small, inflates to 3 MiB
		case 200:
			members = append(members, gzMember(t, random(300<<10))) // more than inflateChunkMax
		case 120, 121, 122, 123, 124, 125:
			// small, inflating to 400 KiB each: a worker leaves the rest of their run
			// to the writer once it holds inflateOutMax bytes (cut)
			members = append(members, gzMember(t, append([]byte(fmt.Sprintf("record %d ", i)), make([]byte, 400<<10)...)))
		default:
			members = append(members, gzMember(t, append([]byte(fmt.Sprintf("record %d ", i)), random(rng.IntN(2000))...)))
		}
	}
	var whole bytes.Buffer
	var starts []int64
	for _, m := range members {
		starts = append(starts, int64(whole.Len()))
		whole.Write(m)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.warc.gz", whole.Bytes())
	second := write("second.warc.gz", bytes.Join(members[:50], nil))
	corrupt := bytes.Clone(whole.Bytes())
	corrupt[starts[150]+20] ^= 0xff // inside member 150's deflate data
	bad := write("corrupt.warc.gz", corrupt)
	cut := write("cut.warc.gz", whole.Bytes()[:starts[250]+10])
	garbage := write("garbage.warc.gz", append(bytes.Clone(whole.Bytes()[:starts[60]]), []byte("not a gzip member at all")...))

	every := func(s []int64) []int64 { return slices.Clone(s) }
	half := func(s []int64) []int64 {
		var h []int64
		for i, o := range s {
			if i%2 == 0 {
				h = append(h, o)
			}
		}
		return h
	}
	wrong := func(s []int64) []int64 {
		w := slices.Clone(s)
		n := len(w)
		w[n/3] += 5                                  // inside a member: two runs that are no member
		w = append(w, s[n/2]+3, s[5], -4, 1<<40, 17) // repeated, negative, past the end
		rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
		return w
	}
	hints := map[string]func([]int64) []int64{"every": every, "half": half, "wrong": wrong}
	before := inflatedByWorkers.Load()
	for _, parts := range [][]string{{good}, {good, second}, {bad}, {cut}, {garbage}, {second, bad}} {
		want := inflateWith(t, parts, nil, MaxWARCBytes)
		for name, h := range hints {
			var s [][]int64
			for _, p := range parts {
				fi, _ := os.Stat(p)
				var in []int64
				for _, o := range starts {
					if o < fi.Size() {
						in = append(in, o)
					}
				}
				s = append(s, h(in))
			}
			sameInflate(t, fmt.Sprintf("%v, %s starts", baseNames(parts), name), inflateWith(t, parts, nil, MaxWARCBytes, s...), want)
		}
	}
	if inflateWorkers() > 1 && inflatedByWorkers.Load()-before < int64(len(members)) {
		t.Errorf("the workers inflated %d members", inflatedByWorkers.Load()-before)
	}
	if r := inflateWith(t, []string{bad}, nil, MaxWARCBytes); r.err == "" {
		t.Fatal("a corrupt member inflated")
	}
	// the bound of the whole archive, and the unpack budget
	for _, max := range []int64{int64(whole.Len()), 3 << 20, 5 << 20} {
		sameInflate(t, fmt.Sprintf("max %d", max), inflateWith(t, []string{good}, nil, max, starts), inflateWith(t, []string{good}, nil, max))
	}
	budget := func() *unpackBudget { return &unpackBudget{recording: dir, allow: 2 << 20} }
	got, want := inflateWith(t, []string{good}, budget(), MaxWARCBytes, starts), inflateWith(t, []string{good}, budget(), MaxWARCBytes)
	sameInflate(t, "budget", got, want)
	var le *UnpackLimitError
	if _, err := inflateMembers(context.Background(), []string{good}, &bytes.Buffer{}, MaxWARCBytes, budget(), starts); !errors.As(err, &le) {
		t.Errorf("over the budget: %v, want an UnpackLimitError", err)
	}
}

// TestInflateMembersInterrupted: a done context stops the workers' inflation with its
// cause, whichever run it reaches.
func TestInflateMembersInterrupted(t *testing.T) {
	var whole bytes.Buffer
	var starts []int64
	for i := range 500 {
		starts = append(starts, int64(whole.Len()))
		whole.Write(gzMember(t, []byte(fmt.Sprintf("record %d", i))))
	}
	p := filepath.Join(t.TempDir(), "data.warc.gz")
	if err := os.WriteFile(p, whole.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	if _, err := inflateMembers(ctx, []string{p}, &bytes.Buffer{}, MaxWARCBytes, nil, starts); !errors.Is(err, stop) {
		t.Errorf("err %v, want %v", err, stop)
	}
}
