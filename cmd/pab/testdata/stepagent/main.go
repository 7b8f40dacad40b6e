// Command stepagent is a scripted browser agent for pab's tests: it calls the browser MCP
// server at PAB_MCP_URL (bearer token PAB_MCP_TOKEN) once per line of STEPAGENT_PLAN, each
// line a tool name and its JSON arguments separated by a space, and then writes
// STEPAGENT_ANSWER to PAB_ANSWER_FILE.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
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
