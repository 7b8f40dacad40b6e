package recording

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/pab-dev/pab/warc"
)

// parkRoundTrip parks rec in a fresh spool and reads it back.
func parkRoundTrip(t testing.TB, rec *warc.Record) (*warc.Record, *warc.Spool, warc.Span) {
	sp, err := warc.NewSpool(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := parkRecord(sp, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unparkRecord(sp, s)
	if err != nil {
		t.Fatal(err)
	}
	return got, sp, s
}

// TestParkRecord: a parked record reads back with every field an import uses (not Block
// nor Warnings, which it does not keep), with or without an HTTP message; a damaged or cut
// parked record is an error, not a wrong record.
func TestParkRecord(t *testing.T) {
	rec := &warc.Record{Version: "1.1", Type: "response", ID: "<urn:uuid:1>", TargetURI: "https://a.test/x?y",
		Date: time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC), Offset: 10, Length: 200, Pos: 7, BlockSize: 99,
		Header: warc.Fields{{Name: "WARC-Type", Value: "response"}, {Name: "WARC-Concurrent-To", Value: "<urn:uuid:2>"}, {Name: "WARC-Concurrent-To", Value: "<urn:uuid:3>"}},
		HTTP:   &warc.HTTPMessage{StatusCode: 200, Reason: "OK", Proto: "HTTP/1.1", Header: warc.Fields{{Name: "Content-Type", Value: "text/html"}, {Name: "Set-Cookie", Value: ""}}},
		Body:   warc.Span{Off: 5, N: 42}}
	rec.SetWhere("offset 10")
	got, sp, s := parkRoundTrip(t, rec)
	defer sp.Close()
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("read back %+v\nwant %+v", got, rec)
	}
	bare := &warc.Record{Type: "revisit", TargetURI: "https://a.test/"}
	bare.SetWhere("offset 0")
	if got, sp2, _ := parkRoundTrip(t, bare); !reflect.DeepEqual(got, bare) {
		t.Errorf("without HTTP: %+v", got)
	} else {
		sp2.Close()
	}
	for _, cut := range []int64{0, 1, s.N / 2, s.N - 1} {
		if _, err := unparkRecord(sp, warc.Span{Off: s.Off, N: cut}); err == nil {
			t.Errorf("cut to %d bytes: no error", cut)
		}
	}
}

// FuzzUnparkRecord: whatever the spool holds where a parked record should be, reading it
// back gives a record or an error, never a panic; a record parked from what was read back
// reads back the same.
func FuzzUnparkRecord(f *testing.F) {
	sp, err := warc.NewSpool(f.TempDir(), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	s, _, err := parkRecord(sp, &warc.Record{Type: "request", TargetURI: "https://a.test/", HTTP: &warc.HTTPMessage{Method: "GET", RequestURI: "/"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	seed, _ := sp.ReadPrefix(s, s.N)
	sp.Close()
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := warc.NewSpool(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		if _, err := sp.Write(data); err != nil {
			t.Fatal(err)
		}
		rec, err := unparkRecord(sp, warc.Span{Off: 0, N: int64(len(data))})
		if err != nil {
			return
		}
		again, _, _ := parkRoundTrip(t, rec)
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("parked again: %+v, want %+v", again, rec)
		}
	})
}

// TestOrigSpill: what a revisit needs of each entry reads back as written, for any entry,
// in any order, whether it is in the file or still in memory; the spill file leaves nothing
// behind.
func TestOrigSpill(t *testing.T) {
	dir := t.TempDir()
	s, err := newOrigSpill(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []original
	for i := range 5000 { // more than origSpillBuffer holds: some in the file, some in memory
		o := original{recordID: "<urn:uuid:" + entryID(i) + ">", url: "https://a.test/" + entryID(i), date: "2026-03-01T09:00:00Z",
			digest: "ab" + entryID(i), size: int64(i * 100), stored: i%3 != 0, revisitOf: int32(i/2 - 1)}
		if err := s.add(o); err != nil {
			t.Fatal(err)
		}
		want = append(want, o)
	}
	if s.flushed == 0 || s.flushed == s.size {
		t.Fatalf("%d of %d bytes written: want some in the file and some in memory", s.flushed, s.size)
	}
	for _, i := range []int{4999, 0, 17, 3, 4998, 1234, 2500, 4000} {
		got, err := s.get(i)
		if err != nil || got != want[i] {
			t.Errorf("entry %d: %+v, %v; want %+v", i, got, err, want[i])
		}
	}
	s.close()
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("left behind: %v", des)
	}
	for _, c := range []struct {
		id string
		n  int
		i  int
		ok bool
	}{{"e000001", 5, 0, true}, {"e000005", 5, 4, true}, {"e000006", 5, 0, false}, {"e00001", 5, 0, false},
		{"e0000001", 5, 0, false}, {"x000001", 5, 0, false}, {"e1000000", 1000000, 999999, true}, {"e000000", 5, 0, false}} {
		if i, ok := entryIndex(c.id, c.n); ok != c.ok || (ok && i != c.i) {
			t.Errorf("entryIndex(%q, %d) = %d, %v", c.id, c.n, i, ok)
		}
	}
}

// TestParkRecordReusedMemory: records parked one after the other through the same memory
// (as the import parks them) each read back as they were.
func TestParkRecordReusedMemory(t *testing.T) {
	sp, err := warc.NewSpool(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	long := &warc.Record{Type: "response", ID: "<urn:uuid:long>", TargetURI: "https://a.test/" + string(make([]byte, 3000)),
		HTTP: &warc.HTTPMessage{StatusCode: 200, Header: warc.Fields{{Name: "X-Long", Value: string(make([]byte, 2000))}}}}
	short := &warc.Record{Type: "request", ID: "<urn:uuid:short>", TargetURI: "https://b.test/", HTTP: &warc.HTTPMessage{Method: "GET", RequestURI: "/"}}
	var buf []byte
	var spans []warc.Span
	for _, rec := range []*warc.Record{long, short, long} {
		var s warc.Span
		if s, buf, err = parkRecord(sp, rec, buf); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	for i, want := range []*warc.Record{long, short, long} {
		got, err := unparkRecord(sp, spans[i])
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.TargetURI != want.TargetURI || got.HTTP.Method != want.HTTP.Method || len(got.HTTP.Header) != len(want.HTTP.Header) {
			t.Errorf("record %d read back as %s %.40q", i, got.ID, got.TargetURI)
		}
	}
}
