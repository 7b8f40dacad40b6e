// Package guard is pab's MCP policy layer between a browser agent and its browser
// (docs/guard.md): an MCP server that offers the agent a reduced set of browser tools,
// forwards allowed calls to @playwright/mcp (a child process it starts and watches), and
// decides per call whether the agent may read, fill, review or submit on a job
// application's pages. Fills must be grounded in the application's sources; a submit is
// refused under fill_and_review; leaving the application's sites is refused. Every
// decision goes to a JSONL trace, the outcome to a result file, and the owner can answer
// pauses through a local control API.
package guard
