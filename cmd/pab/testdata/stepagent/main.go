// Command stepagent is a scripted browser agent for pab's tests: it calls the browser MCP
// server at PAB_MCP_URL (bearer token PAB_MCP_TOKEN) once per line of STEPAGENT_PLAN, each
// line a tool name and its JSON arguments separated by a space, and then writes
// STEPAGENT_ANSWER to PAB_ANSWER_FILE. A line whose arguments hold "$ref:ROLE:NAME" is
// preceded by a browser_snapshot, and the string is replaced by the ref of the first
// element of that role whose name starts with NAME.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

var (
	refArg  = regexp.MustCompile(`\$ref:([a-z]+):([^"]+)`)
	refLine = regexp.MustCompile(`^\s*-\s+'?([a-z]+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=([a-z0-9]+)\]`)
)

// findRef is the ref of the first element of role whose name starts with name in a
// snapshot's text.
func findRef(res *mcp.CallToolResult, role, name string) string {
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			continue
		}
		for _, l := range strings.Split(tc.Text, "\n") {
			if m := refLine.FindStringSubmatch(l); m != nil && m[1] == role && strings.HasPrefix(m[2], name) {
				return m[3]
			}
		}
	}
	return ""
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "stepagent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("PAB_MCP_URL"),
		HTTPClient: &http.Client{Transport: bearer{os.Getenv("PAB_MCP_TOKEN")}}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stepagent: connect:", err)
		os.Exit(2)
	}
	defer cs.Close()
	for _, line := range strings.Split(strings.TrimSpace(os.Getenv("STEPAGENT_PLAN")), "\n") {
		tool, raw, _ := strings.Cut(strings.TrimSpace(line), " ")
		var args map[string]any
		if m := refArg.FindStringSubmatch(raw); m != nil {
			snap, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_snapshot", Arguments: map[string]any{}})
			if err != nil {
				fmt.Fprintln(os.Stderr, "stepagent: browser_snapshot:", err)
				os.Exit(3)
			}
			ref := findRef(snap, m[1], m[2])
			if ref == "" {
				fmt.Fprintf(os.Stderr, "stepagent: no %s %q in the snapshot\n", m[1], m[2])
				os.Exit(5)
			}
			raw = strings.Replace(raw, m[0], ref, 1)
		}
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &args); err != nil {
				fmt.Fprintf(os.Stderr, "stepagent: %q: %v\n", line, err)
				os.Exit(2)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			fmt.Fprintln(os.Stderr, "stepagent:", tool, err)
			os.Exit(3)
		}
		fmt.Printf("%s isError=%v\n", tool, res.IsError)
	}
	if err := os.WriteFile(os.Getenv("PAB_ANSWER_FILE"), []byte(os.Getenv("STEPAGENT_ANSWER")), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "stepagent:", err)
		os.Exit(4)
	}
}
