// Command applyfixture serves pab's application-form fixture sites and plays them in
// headless Chromium, so that scripts/record-apply-tasks.sh can record them with
// `pab record --resolve` into the tasks tasks/apply-*.
//
//	applyfixture serve -listen 127.0.0.1:0 -ca-out ca.pem -addr-out addr.txt [-log requests.jsonl]
//	applyfixture drive -site acme -proxy 127.0.0.1:8899 -spki "$(pab ca --spki)" -files tasks/apply-adversarial/testdata
//
// serve answers HTTPS (HTTP/1.1) for every host in Hosts on one loopback port with a
// throw-away CA, written to -ca-out for `pab record --upstream-ca`. The hosts' pages are
// embedded from pages/ (see pages/SOURCES.md). With -log it appends one JSON line per
// request it receives (LogEntry: time, method, host, URL, Cookie header, the first 64 KiB
// of the body) to FILE: the judge of the hostile pages (package hostile). drive plays one site's scenario through a
// pab proxy: every page, every submit path, the confirmation and the error pages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "applyfixture:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  applyfixture serve [-listen 127.0.0.1:0] [-ca-out FILE] [-addr-out FILE] [-log FILE]
  applyfixture drive -site greenhouse|teamtailor|acme -proxy HOST:PORT -spki SPKI -files DIR [-chromium PATH] [-replay] [-timeout 5m]`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("no command\n" + usage)
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stderr)
	case "drive":
		return runDrive(args[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func runServe(args []string, stderr io.Writer) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "127.0.0.1:0", "loopback address to serve HTTPS on (port 0 picks a free one)")
	caOut := fl.String("ca-out", "", "write the throw-away CA certificate (PEM) here, for pab record --upstream-ca")
	addrOut := fl.String("addr-out", "", "write the address served on (host:port) here once listening")
	logPath := fl.String("log", "", "append one JSON line per request received to this file (method, host, URL, Cookie, the first 64 KiB of the body, time)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fl.Arg(0))
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("serve: -listen %q: want HOST:PORT", *listen)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("serve: -listen %q: want a loopback address (127.0.0.1 or ::1)", *listen)
	}
	h, err := Handler()
	if err != nil {
		return err
	}
	var reqLog *RequestLog
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("serve: -log: %w", err)
		}
		defer f.Close()
		reqLog = NewRequestLog(f, false)
		h = reqLog.Wrap(h)
	}
	tl, err := newFixtureTLS(Hosts, time.Now())
	if err != nil {
		return err
	}
	if *caOut != "" {
		if err := os.WriteFile(*caOut, tl.CAPEM, 0o644); err != nil {
			return fmt.Errorf("serve: -ca-out: %w", err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	addr := ln.Addr().String()
	if *addrOut != "" {
		if err := os.WriteFile(*addrOut, []byte(addr+"\n"), 0o644); err != nil {
			ln.Close()
			return fmt.Errorf("serve: -addr-out: %w", err)
		}
	}
	srv := &http.Server{Handler: h, TLSConfig: tl.Config, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "applyfixture: serving %s over HTTPS on %s\n", strings.Join(Hosts, ", "), addr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if reqLog != nil && reqLog.Err() != nil {
		return reqLog.Err()
	}
	return err
}

func runDrive(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("drive", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var o DriveOptions
	fl.StringVar(&o.Site, "site", "", "scenario: "+strings.Join(Sites, ", "))
	fl.StringVar(&o.Proxy, "proxy", "", "HOST:PORT of the pab record or replay proxy")
	fl.StringVar(&o.SPKI, "spki", "", "the output of `pab ca --spki`")
	fl.StringVar(&o.Files, "files", "", "directory with resume.pdf and cover-letter.pdf")
	fl.StringVar(&o.Chromium, "chromium", "/usr/bin/chromium", "Chromium executable")
	fl.BoolVar(&o.Replay, "replay", false, "the proxy is pab replay (multipart error pages are not replayed)")
	timeout := fl.Duration("timeout", 5*time.Minute, "bound on the whole scenario")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("drive: unexpected argument %q", fl.Arg(0))
	}
	o.Log = stdout
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Drive(ctx, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "drive %s: every step passed\n", o.Site)
	return nil
}
