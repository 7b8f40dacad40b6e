package rules

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user+system) of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKeyNormalize is key normalization (Set.Key and Key.String) under the shipped
// default rules, as replay computes it for every request (bench/README.md). Besides ns/op
// it reports cpu-ns/op, the process's CPU time per key, which other jobs on a shared
// machine disturb less.
func BenchmarkKeyNormalize(b *testing.B) {
	s, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		r    Request
	}{
		{"plain", Request{Method: "GET", URL: mustURL(b, "https://big.test/p512/item?id=51234&sort=asc&page=1")}},
		{"static", Request{Method: "GET", URL: mustURL(b, "https://static.bench.test/js/1234/app.js")}},
		{"tracking", Request{Method: "GET", URL: mustURL(b, "https://www.amazon.com/s?k=airpods+pro&utm_source=google&utm_medium=cpc&gclid=abc123&crid=2X&sprefix=airp%2Caps%2C150&ref=nb_sb_noss_1")}},
		{"messy-path", Request{Method: "get", URL: mustURL(b, "https://WWW.Example.COM:443/a/./b/../%7euser/caf%c3%a9/index.html")}},
		{"json-body", Request{Method: "POST", URL: mustURL(b, "https://shop.test/cart/add"), ContentType: "application/json",
			Body: []byte(`{"items":[{"ASIN":"B0TEST","quantity":"1","offerListingId":"abc"}],"csrf":"x","clientTs":1700000000000}`)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			c0, n := cpuTime(), 0
			for b.Loop() {
				_ = s.Key(c.r).String()
				n++
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(n), "cpu-ns/op")
		})
	}
}
