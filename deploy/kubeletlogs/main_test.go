package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestHandler: a container's log is served from DIR/POD.logs/CONTAINER.log, limitBytes
// cuts it, a missing log is 404, a parameter not implemented is 400 (not ignored), and a
// name that could leave DIR is refused.
func TestHandler(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "p-0.logs"), 0o755)
	os.WriteFile(filepath.Join(dir, "p-0.logs", "collect.log"), []byte("line one\nline two\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.log"), []byte("no"), 0o644)
	srv := httptest.NewServer(handler(dir))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/containerLogs/ns/p-0/collect"); code != 200 || body != "line one\nline two\n" {
		t.Errorf("log: %d %q", code, body)
	}
	if code, body := get("/containerLogs/ns/p-0/collect?limitBytes=4"); code != 200 || body != "line" {
		t.Errorf("limitBytes: %d %q", code, body)
	}
	for path, want := range map[string]int{
		"/containerLogs/ns/p-0/agent":                 404,
		"/containerLogs/ns/p-0/collect?follow=true":   400,
		"/containerLogs/ns/p-0/collect?tailLines=1":   400,
		"/containerLogs/ns/..%2Fsecret/x":             404,
		"/containerLogs/ns/a..b/x":                    400,
		"/containerLogs/ns/p-0/collect?limitBytes=-1": 400,
		"/other": 404,
	} {
		if code, _ := get(path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
}
