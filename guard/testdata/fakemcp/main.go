// Command fakemcp is a small MCP server over stdio for guard's tests of Child: it behaves
// well, exits in the middle of a call, writes garbage to stdout, hangs, or starts a
// grandchild in a session of its own (as Playwright starts its browser), on request.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "garbage-at-start" {
		fmt.Println("this is not JSON-RPC")
		time.Sleep(time.Hour)
	}
	if len(os.Args) > 1 && os.Args[1] == "exit-at-start" {
		fmt.Fprintln(os.Stderr, "fakemcp: exiting at start")
		os.Exit(7)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fakemcp", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "returns its arguments", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(r.Params.Arguments)), nil
		})
	if len(os.Args) > 1 && os.Args[1] == "browser" {
		// a browser server's first tool, so that a readiness check that wants one finds it
		s.AddTool(&mcp.Tool{Name: "browser_navigate", Description: "Navigate the browser to a URL", InputSchema: obj},
			func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("navigated"), nil
			})
	}
	s.AddTool(&mcp.Tool{Name: "exit", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "garbage", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Stdout.WriteString("<html>not json</html>\n")
			time.Sleep(time.Hour)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "sleep", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Hour):
			case <-ctx.Done():
			}
			return text("woke"), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "tool failed"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "spawn", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// like Playwright's browser: a new session (and process group) of its own
			c := exec.Command("sleep", "300")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := c.Start(); err != nil {
				return nil, err
			}
			go c.Wait()
			return text(strconv.Itoa(c.Process.Pid)), nil
		})
	s.AddTool(&mcp.Tool{Name: "big", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ N int }
			json.Unmarshal(r.Params.Arguments, &a)
			b := make([]byte, a.N)
			for i := range b {
				b[i] = 'x'
			}
			return text(string(b)), nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fakemcp:", err)
		os.Exit(1)
	}
}
