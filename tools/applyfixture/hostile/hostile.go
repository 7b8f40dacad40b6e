// Package hostile lists the hostile application pages of the fixture (issue 28): pages
// whose own JavaScript out-waits, out-shapes or lies to a submit lock that lives in the
// page, each trying to send the applicant's typed data off by a different sink.
//
// The fixture (tools/applyfixture) serves them on Host from pages/hostile/; the guard's
// end-to-end judge (cmd/pab/guard_hostile_test.go) packs the same files into a WARC for
// `pab replay` and drives each page through `pab guard`. Every request a page makes to
// leak data goes to a path of its own, so a request log names the page and the sink:
// /hostile/PAGE/submit (the page's POST form action) or /hostile/PAGE/sink/SINK.
package hostile

import "strings"

// Host is the fixture host of the hostile pages.
const Host = "jobs.hostile.test"

// Page is one hostile page.
type Page struct {
	// ID names the page ("shadow-form"); every path the page sends data to starts with
	// /hostile/ID/.
	ID string
	// Path is the page's address on Host.
	Path string
	// File is the page under tools/applyfixture/pages/hostile/.
	File string
	// Class is the attack class: shadow-form, poisoned-prototypes, shifting-values,
	// relabel, ping-beacon or get-sink.
	Class string
	// Trigger is what the agent does after typing First Name and Email that sets the
	// sinks off: "click:NAME" (a button, through browser_click), "radio:NAME" (a radio
	// answered with a quote), "link:NAME" (a link), "type" (typing is enough: the page
	// sends from its input, change and blur events) or "timer" (the page sends on a timer
	// after the typing; the agent only waits).
	Trigger string
	// Title is the role the page advertises.
	Title string
	// Sinks are the paths the page sends the typed data to (without the query), each
	// set off separately.
	Sinks []string
}

// Submit is the path of a page's POST form action; the fixture answers it with a
// confirmation page (200).
func Submit(id string) string { return "/hostile/" + id + "/submit" }

// Sink is the path of one of a page's sinks; the fixture answers it 204, whatever the
// method.
func Sink(id, name string) string { return "/hostile/" + id + "/sink/" + name }

func sinks(id string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Sink(id, n)
	}
	return out
}

// Pages are the hostile pages, one or more per attack class.
var Pages = []Page{
	{ID: "shadow-form", Path: "/hostile/shadow-form", File: "shadow-form.html", Class: "shadow-form", Trigger: "click:Continue",
		Title: "Site Reliability Engineer", Sinks: []string{Submit("shadow-form")}},
	{ID: "shadow-timer", Path: "/hostile/shadow-timer", File: "shadow-timer.html", Class: "shadow-form", Trigger: "timer",
		Title: "Platform Engineer", Sinks: []string{Submit("shadow-timer")}},
	{ID: "poisoned-proto", Path: "/hostile/poisoned-proto", File: "poisoned-proto.html", Class: "poisoned-prototypes", Trigger: "click:Continue",
		Title: "Backend Engineer", Sinks: []string{Submit("poisoned-proto")}},
	{ID: "shifty-values", Path: "/hostile/shifty-values", File: "shifty-values.html", Class: "shifting-values", Trigger: "click:Continue",
		Title: "Data Engineer", Sinks: sinks("shifty-values", "xhr-get-first", "xhr-post-first", "fetch-get-first")},
	{ID: "relabel-radio", Path: "/hostile/relabel-radio", File: "relabel-radio.html", Class: "relabel", Trigger: "radio:Yes",
		Title: "Support Engineer (UK)", Sinks: sinks("relabel-radio", "consent", "share")},
	{ID: "ping", Path: "/hostile/ping", File: "ping.html", Class: "ping-beacon", Trigger: "link:Read more",
		Title: "Frontend Engineer", Sinks: sinks("ping", "ping")},
	{ID: "beacon", Path: "/hostile/beacon", File: "beacon.html", Class: "ping-beacon", Trigger: "click:Save for later",
		Title: "Mobile Engineer", Sinks: sinks("beacon", "beacon", "beacon-frame")},
	{ID: "get-markup", Path: "/hostile/get-markup", File: "get-markup.html", Class: "get-sink", Trigger: "type",
		Title: "QA Engineer", Sinks: sinks("get-markup", "srcset", "inner-html", "insert-adjacent-html", "contextual-fragment", "set-attribute-ns", "set-attribute-node")},
	{ID: "get-media", Path: "/hostile/get-media", File: "get-media.html", Class: "get-sink", Trigger: "type",
		Title: "Media Engineer", Sinks: sinks("get-media", "audio", "object-data", "input-image", "video-poster", "svg-image")},
	{ID: "get-script", Path: "/hostile/get-script", File: "get-script.html", Class: "get-sink", Trigger: "type",
		Title: "Tools Engineer", Sinks: sinks("get-script", "event-source", "worker", "import", "websocket")},
	{ID: "get-lies", Path: "/hostile/get-lies", File: "get-lies.html", Class: "get-sink", Trigger: "type",
		Title: "Security Engineer", Sinks: sinks("get-lies", "url-lie-img", "url-lie-fetch")},
	{ID: "window-open", Path: "/hostile/window-open", File: "window-open.html", Class: "get-sink", Trigger: "click:Continue",
		Title: "Solutions Engineer", Sinks: sinks("window-open", "location")},
	{ID: "meta-refresh", Path: "/hostile/meta-refresh", File: "meta-refresh.html", Class: "get-sink", Trigger: "type",
		Title: "Release Engineer", Sinks: sinks("meta-refresh", "meta")},
	{ID: "cookie", Path: "/hostile/cookie", File: "cookie.html", Class: "get-sink", Trigger: "timer",
		Title: "Network Engineer", Sinks: sinks("cookie", "next")},
	{ID: "css-url", Path: "/hostile/css-url", File: "css-url.html", Class: "get-sink", Trigger: "type",
		Title: "Design Engineer", Sinks: sinks("css-url", "style-element", "style-property", "style-attribute")},
	{ID: "service-worker", Path: "/hostile/service-worker", File: "service-worker.html", Class: "get-sink", Trigger: "type",
		Title: "Web Platform Engineer", Sinks: sinks("service-worker", "sw-message", "sw-fetch")},
}

// Asset is a file the pages load or link to besides the pages themselves.
type Asset struct {
	Path, File, ContentType string
}

// Assets are served on Host next to the pages (and packed into the judge's WARC).
var Assets = []Asset{
	// the service worker of the service-worker page (scope /hostile/)
	{Path: "/hostile/sw.js", File: "sw.js", ContentType: "text/javascript; charset=utf-8"},
	// where the ping page's "Read more" link leads
	{Path: "/hostile/ping/article", File: "ping-article.html", ContentType: "text/html; charset=utf-8"},
}

// Locate names the page and the sink a request path belongs to: "/hostile/get-markup/sink/srcset"
// is ("get-markup", "srcset"), "/hostile/shadow-form/submit" is ("shadow-form", "submit"), a
// page's own path is (ID, ""). ok is false for a path outside every page.
func Locate(path string) (page, sink string, ok bool) {
	rest, found := strings.CutPrefix(path, "/hostile/")
	if !found {
		return "", "", false
	}
	id, tail, _ := strings.Cut(rest, "/")
	for _, p := range Pages {
		if p.ID != id {
			continue
		}
		if s, isSink := strings.CutPrefix(tail, "sink/"); isSink {
			return id, s, true
		}
		return id, tail, true
	}
	return "", "", false
}
