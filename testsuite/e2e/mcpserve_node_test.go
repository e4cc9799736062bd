package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// toolgate as an MCP server, driven by a client this project did not write:
// the official MCP TypeScript SDK on Node.js, over streamable HTTP
// (testdata/mcpclient.cjs).

// nodeReply is what mcpclient.cjs prints.
type nodeReply struct {
	Tools []struct {
		Name        string `json:"name"`
		Annotations struct {
			DestructiveHint *bool `json:"destructiveHint"`
			ReadOnlyHint    bool  `json:"readOnlyHint"`
			IdempotentHint  bool  `json:"idempotentHint"`
		} `json:"annotations"`
	} `json:"tools"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	} `json:"result"`
	Progress int    `json:"progress"`
	Error    string `json:"error"`
}

func (r nodeReply) text() string {
	var b strings.Builder
	if r.Result != nil {
		for _, c := range r.Result.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// nodeClient runs mcpclient.cjs once.
type nodeClient struct {
	t               *testing.T
	sdk             string
	url, token, run string
	timeout         time.Duration // a call's wait between progress notifications (0: the script's 2 minutes)
}

func (n nodeClient) start(args ...string) (*exec.Cmd, *syncBuffer) {
	n.t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "mcpclient.cjs"))
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{script, n.url, n.token, n.run}, args...)...)
	cmd.Env = childEnv(testenv.MCPNodeSDKEnv + "=" + n.sdk)
	if n.timeout > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("TOOLGATE_MCP_TIMEOUT_MS=%d", n.timeout.Milliseconds()))
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("starting node: %v", err)
	}
	return cmd, out
}

func (n nodeClient) reply(cmd *exec.Cmd, out *syncBuffer) (nodeReply, error) {
	err := cmd.Wait()
	var r nodeReply
	line := strings.TrimSpace(out.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
		n.t.Fatalf("node printed %q (%v): %v", out.String(), err, jerr)
	}
	if err != nil && r.Error == "" {
		r.Error = err.Error()
	}
	return r, err
}

func (n nodeClient) do(args ...string) nodeReply {
	n.t.Helper()
	r, err := n.reply(n.start(args...))
	if err != nil {
		n.t.Fatalf("node mcpclient.cjs %s: %v: %s", strings.Join(args, " "), err, r.Error)
	}
	return r
}

func TestMCPServeNodeClient(t *testing.T) {
	longSuite(t)
	t.Parallel()
	sdk := testenv.MCPNodeSDK(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	ms := newMCPStack(t, "alice", "--mcp-wait", "1m")
	s, m, tokens, tok := ms.stack, ms.m, ms.tokens, ms.tok
	n := nodeClient{t: t, sdk: sdk, url: m.url, token: tok, run: "node"}
	id := mcpRunID("alice", "node")

	list := n.do("list")
	hints := map[string]string{}
	for _, tl := range list.Tools {
		a := tl.Annotations
		hints[tl.Name] = strings.Join([]string{yes(a.DestructiveHint != nil && *a.DestructiveHint, "destructive"),
			yes(a.ReadOnlyHint, "read-only"), yes(a.IdempotentHint, "idempotent")}, " ")
	}
	if hints["close_ticket"] != "destructive - -" || hints["search_tickets"] != "- read-only idempotent" {
		t.Fatalf("annotations as the TypeScript SDK read them: %v", hints)
	}

	// A read twice: one ok and one cache_hit in the run's trace.
	for range 2 {
		if r := n.do("call", "search_tickets", `{"query":"login"}`); r.Result == nil || r.Result.IsError || !strings.Contains(r.text(), "TKT-3") {
			t.Fatalf("search: %+v", r)
		}
	}
	checkEvents(t, "after two reads", s.mustTrace(id),
		event{"c-1", "search_tickets", workflows.TraceOK},
		event{"c-2", "search_tickets", workflows.TraceCacheHit})

	// A destructive call blocks until toolgate approve, then returns the result.
	cmd, out := n.start("call", "close_ticket", `{"ticket_id":"TKT-3"}`)
	s.awaitWaiting(id, "c-3")
	if out.Len() > 0 { // the client prints its one line when the call returns
		t.Fatalf("the call returned before any approval: %s", out.String())
	}
	approve := exec.Command(toolgateBinary(t), "approve", id, "c-3", "--as", "bob", "--address", s.address())
	approve.Env = childEnv()
	if b, err := approve.CombinedOutput(); err != nil {
		t.Fatalf("toolgate approve: %v\n%s", err, b)
	}
	r, err := n.reply(cmd, out)
	if err != nil || r.Result == nil || r.Result.IsError || !strings.Contains(r.text(), `"closed"`) {
		t.Fatalf("close_ticket after toolgate approve: %v %+v", err, r)
	}

	// A rejection: isError with the reason.
	cmd, out = n.start("call", "close_ticket", `{"ticket_id":"TKT-4"}`)
	s.awaitWaiting(id, "c-4")
	s.decide(id, "c-4", "not this one")
	r, err = n.reply(cmd, out)
	if err != nil || r.Result == nil || !r.Result.IsError || !strings.Contains(r.text(), "rejected by bob: not this one") {
		t.Fatalf("close_ticket after rejection: %v %+v", err, r)
	}

	// kill -9 of the server while a call waits; restart; the client calls
	// again with the same key: one side effect, and the result. The client
	// learns its call is lost when the progress notifications stop (its
	// timeout is reset by each one; the server sends one every 5 s).
	const refund = `{"booking_id":"BK-3","amount_cents":900}`
	lossy := n
	lossy.timeout = 12 * time.Second
	cmd, out = lossy.start("call", "refund", refund, "node-refund-1")
	s.awaitWaiting(id, "c-5")
	// Past its 12 s timeout the call is still open: the progress
	// notifications kept it alive (the script prints only when it ends).
	time.Sleep(lossy.timeout + 2*time.Second) // waiting out a timeout, not asserting with time
	if out.Len() > 0 {
		t.Fatalf("the waiting call ended within its timeout although progress notifications should keep it alive: %s", out.String())
	}
	m.p.kill()
	if err := m.p.wait(t, 10*time.Second); !killedBySIGKILL(err) {
		t.Fatalf("mcp serve exit: %v, want killed by SIGKILL", err)
	}
	if r, err := n.reply(cmd, out); err == nil || !strings.Contains(r.Error, "timed out") {
		t.Fatalf("the node client's call after the server's kill -9: %v %+v, want it timed out", err, r)
	}
	m2 := s.startMCPServe("mcp serve 2", m.listen, tokens, "--mcp-wait", "1m")
	n.url = m2.url
	cmd, out = n.start("call", "refund", refund, "node-refund-1")
	s.awaitWaiting(id, "c-5")
	s.decide(id, "c-5", "")
	r, err = n.reply(cmd, out)
	if err != nil || r.Result == nil || r.Result.IsError || !strings.Contains(r.text(), "payment_id") {
		t.Fatalf("refund after the restart: %v %+v", err, r)
	}
	if st := s.mustState(id); st.Calls != 5 {
		t.Fatalf("the run has %d calls, want 5: the call again attached to c-5", st.Calls)
	}
	pays, err := s.openDesk().Payments(t.Context(), "BK-3")
	if err != nil || len(pays) != 1 {
		t.Fatalf("BK-3 payments %+v %v, want exactly one", pays, err)
	}
}

func yes(b bool, what string) string {
	if b {
		return what
	}
	return "-"
}
