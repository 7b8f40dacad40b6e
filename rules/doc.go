// Package rules reads site rule files and turns a request into its matching key.
//
// A rule file is YAML (see docs/rules.md). Files are layered: sites/_default.yaml applies to
// every request, sites/<site>.yaml and tasks/<id>/rules/<site>[.auto].yaml apply to the
// requests whose host matches the file's hosts. Load reads the layers into a Set; a Set is
// read-only after Load and safe for concurrent use.
//
// The matching key of a request is
//
//	METHOD host/path?name=value&name=value #body:<normalized body>
//
// with the scheme ignored, the host and path normalized, the query parameters that the rules
// drop removed and the rest sorted, and the body canonicalized (JSON, form) or digested.
// Two requests that the replay should answer with the same recording have equal keys.
package rules
