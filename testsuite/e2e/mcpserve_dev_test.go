package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// The demo, driven from an MCP client: `toolgate dev --mcp-address` serves
// the demo desk's tools, and the client walks the seed through — the
// search, the same search (a memo hit), the close, which waits until
// `toolgate approve` — as docs/mcp.md's "toolgate as an MCP server" shows.
func TestMCPDemoFromDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := tokensFile(t)
	tok := newMCPToken(t, tokens, "alice")
	dev := startProc(t, "toolgate dev", nil, "dev", "--address", "127.0.0.1:0", "--data", dir,
		"--mcp-address", "127.0.0.1:0", "--mcp-tokens", tokens)
	ready := regexp.MustCompile(`(?m)^ready (\S+)$`)
	var addr, url string
	testenv.Eventually(t, startTimeout, "toolgate dev --mcp-address ready", func() error {
		if dev.exited() {
			t.Fatalf("toolgate dev exited: %v\n%s", dev.waitErr, dev.out.String())
		}
		out := dev.out.String()
		m, u := ready.FindStringSubmatch(out), mcpURLLine.FindStringSubmatch(out)
		if m == nil || u == nil {
			return fmt.Errorf("no ready and MCP lines yet")
		}
		addr, url = m[1], u[1]
		return nil
	})
	cs := mcpConnect(t, url, tok, "demo")
	id := mcpRunID("alice", "demo")
	for range 2 {
		if res, err := callTool(within(t, rpcTimeout), cs, "search_tickets", `{"query":"login"}`, ""); err != nil || res.IsError {
			t.Fatalf("search_tickets: %v %+v", err, res)
		}
	}
	done := callAsync(t, cs, "close_ticket", `{"ticket_id":"TKT-3"}`, "")
	testenv.Eventually(t, waitTimeout, "c-3 waiting in toolgate pending", func() error {
		out, code := runCLI(t, waitTimeout, "pending", "--address", addr)
		if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "c-3") {
			return fmt.Errorf("pending (exit %d):\n%s", code, out)
		}
		return nil
	})
	if out, code := runCLI(t, waitTimeout, "approve", id, "c-3", "--as", "alice", "--address", addr); code != 0 {
		t.Fatalf("toolgate approve: exit %d:\n%s", code, out)
	}
	res := <-done
	if res == nil || res.IsError || !strings.Contains(resultText(res), `"closed"`) {
		t.Fatalf("close_ticket after approval: %+v", res)
	}
	out, code := runCLI(t, waitTimeout, "trace", id, "--json", "--address", addr)
	var trace []workflows.TraceRecord
	if code != 0 || json.Unmarshal([]byte(out), &trace) != nil {
		t.Fatalf("toolgate trace: exit %d:\n%s", code, out)
	}
	checkEvents(t, "the demo's trace", trace,
		event{"c-1", "search_tickets", workflows.TraceOK},
		event{"c-2", "search_tickets", workflows.TraceCacheHit},
		event{"c-3", "close_ticket", workflows.TraceBlocked},
		event{"c-3", "close_ticket", workflows.TraceApproved},
		event{"c-3", "close_ticket", workflows.TraceOK})
}
