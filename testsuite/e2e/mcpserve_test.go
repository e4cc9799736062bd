package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/workflows"
)

// toolgate as an MCP server, driven by the Go SDK's client over streamable
// HTTP and stdio: the tools with truthful annotations, a read twice is one
// activity and one memo hit, a destructive call blocks until a human
// approves it, a rejection is an error result with the reason.

func TestMCPServeGoClient(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "alice")
	s, m, tok := ms.stack, ms.m, ms.tok
	cs := mcpConnect(t, m.url, tok, "go-http")
	checkMCPScenarios(t, s, cs, mcpRunID("alice", "go-http"))
}

func TestMCPServeStdio(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorkerProc("worker", nil) // the stdio server runs its own worker too; two on the queue change nothing
	cmd := exec.Command(toolgateBinary(t), "mcp", "serve", "--stdio", "--as", "carol", "--run", "go-stdio",
		"--address", s.address(), "--namespace", devserver.DefaultNamespace, "--data", s.dataDir)
	cmd.Env = childEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcp serve --stdio stderr:\n%s", stderr.String())
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-e2e-go", Version: "1.0.0"}, nil)
	cs, err := c.Connect(within(t, startTimeout), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting over stdio: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	checkMCPScenarios(t, s, cs, mcpRunID("carol", "go-stdio"))
}

// checkMCPScenarios runs the scenarios every client must see on cs, whose
// calls drive run id.
func checkMCPScenarios(t *testing.T, s *stack, cs *mcp.ClientSession, id string) {
	t.Helper()
	list, err := cs.ListTools(within(t, rpcTimeout), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		tools[tl.Name] = tl
	}
	for _, name := range []string{"search_tickets", "get_ticket", "close_ticket", "refund"} {
		if tools[name] == nil {
			t.Fatalf("tools/list has no %s: %v", name, list.Tools)
		}
	}
	if a := tools["close_ticket"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint || a.ReadOnlyHint || a.IdempotentHint {
		t.Fatalf("close_ticket annotations %+v, want destructive, not read-only, not idempotent", a)
	}
	if a := tools["search_tickets"].Annotations; a == nil || a.DestructiveHint == nil || *a.DestructiveHint || !a.ReadOnlyHint || !a.IdempotentHint {
		t.Fatalf("search_tickets annotations %+v, want a read-only, idempotent, not destructive", a)
	}

	// A read twice: one activity, one memo hit.
	for i := range 2 {
		res, err := callTool(within(t, rpcTimeout), cs, "search_tickets", `{"query":"login"}`, "")
		if err != nil || res.IsError || !strings.Contains(resultText(res), "TKT-3") {
			t.Fatalf("search %d: %v %+v", i+1, err, res)
		}
	}
	checkEvents(t, "after two reads", s.mustTrace(id),
		event{"c-1", "search_tickets", workflows.TraceOK},
		event{"c-2", "search_tickets", workflows.TraceCacheHit})

	// A destructive call blocks until a human approves it.
	done := callAsync(t, cs, "close_ticket", `{"ticket_id":"TKT-3"}`, "")
	s.awaitWaiting(id, "c-3")
	select {
	case res := <-done:
		t.Fatalf("close_ticket returned before any approval: %+v", res)
	default:
	}
	s.decide(id, "c-3", "")
	res := <-done
	if res == nil || res.IsError || !strings.Contains(resultText(res), `"closed"`) {
		t.Fatalf("close_ticket after approval: %+v (%s)", res, resultText(res))
	}
	if got := res.Meta["toolgate/call_id"]; got != "c-3" {
		t.Fatalf("result _meta %v, want toolgate/call_id c-3", res.Meta)
	}

	// A rejection is an error result with the approver's reason.
	done = callAsync(t, cs, "close_ticket", `{"ticket_id":"TKT-4"}`, "")
	s.awaitWaiting(id, "c-4")
	s.decide(id, "c-4", "TKT-4 is still open upstream")
	res = <-done
	if res == nil || !res.IsError || !strings.Contains(resultText(res), "rejected by bob: TKT-4 is still open upstream") {
		t.Fatalf("close_ticket after rejection: %+v (%s)", res, resultText(res))
	}
	tk, err := s.openDesk().Ticket(context.Background(), "TKT-4")
	if err != nil || tk.Status == "closed" {
		t.Fatalf("TKT-4 %+v %v: a rejected call closed it", tk, err)
	}
}

// kill -9 of the MCP server (and its worker) while a call waits: the call
// is durable, and the client calling again after the restart attaches to
// it — one side effect, and the result.
func TestMCPServeKillWhileWaiting(t *testing.T) {
	longSuite(t)
	t.Parallel()
	ms := newMCPStack(t, "alice")
	s, m, tokens, tok := ms.stack, ms.m, ms.tokens, ms.tok
	id := mcpRunID("alice", "kill9")
	const args = `{"booking_id":"BK-2","amount_cents":1500,"reason":"late check-in"}`
	cs := mcpConnect(t, m.url, tok, "kill9")
	lost := make(chan error, 1)
	go func() {
		_, err := callTool(within(t, 2*waitTimeout), cs, "refund", args, "refund-bk2")
		lost <- err
	}()
	s.awaitWaiting(id, "c-1")
	m.p.kill()
	if err := m.p.wait(t, 10*time.Second); !killedBySIGKILL(err) {
		t.Fatalf("mcp serve exit: %v, want killed by SIGKILL", err)
	}
	if err := <-lost; err == nil {
		t.Fatal("the call survived its server's kill -9 on the client's side; want a lost connection")
	}

	m2 := s.startMCPServe("mcp serve 2", m.listen, tokens)
	cs2 := mcpConnect(t, m2.url, tok, "kill9")
	done := callAsync(t, cs2, "refund", args, "refund-bk2")
	it := s.awaitWaiting(id, "c-1") // still c-1: the call again attached, proposed nothing new
	if st := s.mustState(id); st.Calls != 1 {
		t.Fatalf("run has %d calls, want 1 (the call again attaches): %+v", st.Calls, it)
	}
	s.decide(id, "c-1", "")
	res := <-done
	if res == nil || res.IsError || !strings.Contains(resultText(res), "payment_id") {
		t.Fatalf("refund after restart and approval: %+v", res)
	}
	pays, err := s.openDesk().Payments(context.Background(), "BK-2")
	if err != nil || len(pays) != 1 {
		t.Fatalf("BK-2 payments %+v %v, want exactly one", pays, err)
	}
}

// 50 client sessions at once, each with a gated refund, approved in random
// order: every side effect happens once, and every client gets its result.
func TestMCPServeFiftySessions(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "fleet", "--mcp-wait", "3m", "--max-sessions-per-token", "64")
	s, m, tok := ms.stack, ms.m, ms.tok
	const n = 50
	results := make([]*mcp.CallToolResult, n)
	var wg sync.WaitGroup
	for i := range n {
		cs := mcpConnect(t, m.url, tok, fmt.Sprintf("s%02d", i))
		wg.Go(func() {
			res, err := callTool(within(t, 3*time.Minute), cs, "refund", fmt.Sprintf(`{"booking_id":"BK-1","amount_cents":%d}`, i+1), "")
			if err != nil {
				t.Errorf("session %d: %v", i, err)
			}
			results[i] = res
		})
	}
	order := rand.Perm(n)
	for _, i := range order {
		id := mcpRunID("fleet", fmt.Sprintf("s%02d", i))
		s.awaitWaiting(id, "c-1")
		s.decide(id, "c-1", "")
	}
	wg.Wait()
	for i, res := range results {
		var pay struct {
			AmountCents int `json:"amount_cents"`
		}
		if res == nil || res.IsError || json.Unmarshal([]byte(resultText(res)), &pay) != nil || pay.AmountCents != i+1 {
			t.Fatalf("session %d result %+v, want its own refund of %d cents", i, res, i+1)
		}
	}
	pays, err := s.openDesk().Payments(context.Background(), "BK-1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, p := range pays {
		seen[p.AmountCents]++
	}
	if len(pays) != n || len(seen) != n {
		t.Fatalf("%d payments over %d amounts, want %d each once: %v", len(pays), len(seen), n, seen)
	}
}

// Who may call, at the HTTP listener of a running `toolgate mcp serve`: no
// token or a wrong one is 401, a Host or an Origin not allowed is 403 — each
// saying why — and a tokens file others can read is refused at start.
func TestMCPServeRefusals(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "alice")
	s, m, tokens, tok := ms.stack, ms.m, ms.tokens, ms.tok
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, c := range []struct {
		what        string
		edit        func(r *http.Request)
		code        int
		wantInReply string
	}{
		{"no token", func(r *http.Request) {}, http.StatusUnauthorized, "bearer"},
		{"a wrong token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer tg_not-a-token") }, http.StatusUnauthorized, "token"},
		{"a foreign Host", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Host = "evil.example:80"
		}, http.StatusForbidden, "host"},
		{"a foreign Origin", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("Origin", "https://evil.example")
		}, http.StatusForbidden, "origin"},
		{"the right token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, http.StatusOK, "toolgate"},
	} {
		req, err := http.NewRequest(http.MethodPost, m.url, strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		c.edit(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(strings.ToLower(string(body)), c.wantInReply) {
			t.Errorf("%s: %d %s, want %d saying %q", c.what, resp.StatusCode, body, c.code, c.wantInReply)
		}
	}

	if err := os.Chmod(tokens, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, waitTimeout, "mcp", "serve", "--listen", freeAddr(t), "--tokens", tokens, "--address", s.address(), "--data", t.TempDir())
	if code == 0 || !strings.Contains(out, "chmod") {
		t.Fatalf("mcp serve with a tokens file others can read: exit %d:\n%s", code, out)
	}
}

// Two clients on two connections send the same refund with the same
// idempotency key to the same run: it waits once, is approved once, pays
// once, and both get the one payment.
func TestMCPServeTwoClientsOneKey(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "alice")
	s, m, tok := ms.stack, ms.m, ms.tok
	id := mcpRunID("alice", "shared")
	const args = `{"booking_id":"BK-2","amount_cents":700}`
	results := make([]*mcp.CallToolResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		cs := mcpConnect(t, m.url, tok, "shared")
		wg.Go(func() {
			res, err := callTool(within(t, 2*waitTimeout), cs, "refund", args, "refund-bk2-700")
			if err != nil {
				t.Errorf("client %d: %v", i+1, err)
			}
			results[i] = res
		})
	}
	s.awaitWaiting(id, "c-1")
	s.decide(id, "c-1", "")
	wg.Wait()
	if st := s.mustState(id); st.Calls != 1 {
		t.Fatalf("the run numbered %d calls, want 1: the second proposal attaches", st.Calls)
	}
	for i, res := range results {
		if res == nil || res.IsError || !strings.Contains(resultText(res), "payment_id") || res.Meta["toolgate/call_id"] != "c-1" {
			t.Fatalf("client %d: %+v, want c-1's payment", i+1, res)
		}
	}
	if resultText(results[0]) != resultText(results[1]) {
		t.Fatalf("the clients got different results:\n%s\n%s", resultText(results[0]), resultText(results[1]))
	}
	pays, err := s.openDesk().Payments(context.Background(), "BK-2")
	if err != nil || len(pays) != 1 {
		t.Fatalf("BK-2 payments %+v %v, want exactly one", pays, err)
	}
}
