package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// This file starts `toolgate mcp serve` as a subprocess on a stack's server
// and connects MCP clients to it: the Go SDK's here, the TypeScript SDK's in
// mcpserve_node_test.go.

// mcpServe is one `toolgate mcp serve --listen` process.
type mcpServe struct {
	p      *proc
	url    string // http://127.0.0.1:PORT/mcp
	listen string // 127.0.0.1:PORT
}

// newMCPToken makes a token for name in the tokens file (created if
// missing) with `toolgate mcp token new`, and returns it.
func newMCPToken(t *testing.T, tokens, name string, flags ...string) string {
	t.Helper()
	args := append([]string{"mcp", "token", "new", name, "--tokens", tokens}, flags...)
	out, err := exec.Command(toolgateBinary(t), args...).Output()
	if err != nil {
		t.Fatalf("toolgate %s: %v", strings.Join(args, " "), err)
	}
	tok := strings.TrimSpace(string(out))
	if !strings.HasPrefix(tok, "tg_") || strings.Contains(tok, "\n") {
		t.Fatalf("toolgate mcp token new printed %q, want one tg_ token", tok)
	}
	return tok
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// errNotYet is what a condition polled with testenv.Eventually returns
// while it does not hold yet.
var errNotYet = errors.New("not yet")

var mcpURLLine = regexp.MustCompile(`MCP server at (http://\S+/mcp)`)

// startMCPServe starts `toolgate mcp serve --listen listen --tokens tokens`
// on s's server (listen "": a free port) and waits until it serves.
func (s *stack) startMCPServe(name, listen, tokens string, flags ...string) *mcpServe {
	t := s.t
	t.Helper()
	if listen == "" {
		listen = freeAddr(t)
	}
	args := append([]string{"mcp", "serve", "--listen", listen, "--tokens", tokens,
		"--address", s.address(), "--namespace", devserver.DefaultNamespace, "--data", s.dataDir}, flags...)
	p := startProc(t, name, nil, args...)
	m := &mcpServe{p: p, listen: listen}
	testenv.Eventually(t, startTimeout, name+" serving MCP", func() error {
		if p.exited() {
			t.Fatalf("%s exited: %v\n%s", name, p.waitErr, p.out.String())
		}
		if mm := mcpURLLine.FindStringSubmatch(p.out.String()); mm != nil {
			m.url = mm[1]
			return nil
		}
		return errNotYet
	})
	return m
}

// mcpStack is a stack with `toolgate mcp serve` on it and a token for who.
type mcpStack struct {
	*stack
	m      *mcpServe
	tokens string // the tokens file
	tok    string // who's token
}

// newMCPStack starts a stack, makes who's token and serves MCP (flags: more
// of mcp serve's).
func newMCPStack(t *testing.T, who string, flags ...string) *mcpStack {
	t.Helper()
	ms := &mcpStack{stack: newStack(t), tokens: tokensFile(t)}
	ms.tok = newMCPToken(t, ms.tokens, who)
	ms.m = ms.startMCPServe("mcp serve", "", ms.tokens, flags...)
	return ms
}

// headers adds a bearer token and a run name to every request.
type headers struct {
	token, run string
	base       http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.run != "" {
		r.Header.Set("Toolgate-Run", h.run)
	}
	return h.base.RoundTrip(r)
}

// mcpConnect connects the Go SDK's client to url as token, naming run (""
// for none: the run is named from the session).
func mcpConnect(t *testing.T, url, token, run string) *mcp.ClientSession {
	t.Helper()
	return mcpConnectWith(t, url, token, run, nil)
}

// mcpConnectWith is mcpConnect with the client's options (its handlers).
func mcpConnectWith(t *testing.T, url, token, run string, co *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headers{token: token, run: run, base: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-e2e-go", Version: "1.0.0"}, co)
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool with raw JSON arguments and an idempotency key ("": none).
func callTool(ctx context.Context, cs *mcp.ClientSession, name, args, key string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
	if key != "" {
		p.Meta = mcp.Meta{"toolgate/idempotency_key": key}
	}
	return cs.CallTool(ctx, p)
}

// callAsync calls a tool in the background (as callTool, within twice
// waitTimeout); its result arrives on the channel, nil after an error,
// which fails the test.
func callAsync(t *testing.T, cs *mcp.ClientSession, name, args, key string) <-chan *mcp.CallToolResult {
	t.Helper()
	ctx := within(t, 2*waitTimeout)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := callTool(ctx, cs, name, args, key)
		if err != nil {
			t.Errorf("%s %s: %v", name, args, err)
		}
		done <- res
	}()
	return done
}

// decide approves (reason "") or rejects call callID of run id as bob, unsigned.
func (s *stack) decide(id, callID, reason string) {
	s.t.Helper()
	ctx := within(s.t, rpcTimeout)
	var outs []tgclient.Outcome
	var err error
	if reason == "" {
		outs, err = s.tg.Approve(ctx, id, tgclient.As("bob"), callID)
	} else {
		outs, err = s.tg.Reject(ctx, id, tgclient.Decider{Approver: "bob", Text: reason}, callID)
	}
	if err != nil || tgclient.Refused(outs) > 0 {
		s.t.Fatalf("deciding %s of %s: %v %v", callID, id, err, outs)
	}
}

// resultText is the text of a tool result's content.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpRunID is the workflow id of the run an MCP client drives as token
// name, under run name.
func mcpRunID(name, run string) string { return "mcp-" + name + "-" + run }

// awaitWaiting waits until call callID of run id waits for approval.
func (s *stack) awaitWaiting(id, callID string) workflows.Interrupt {
	var it workflows.Interrupt
	testenv.Eventually(s.t, waitTimeout, id+" "+callID+" waiting", func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		for _, i := range st.Interrupts {
			if i.CallID == callID {
				it = i
				return nil
			}
		}
		return errNotYet
	})
	return it
}

// tokensFile is a fresh tokens file's path in the test's directory.
func tokensFile(t *testing.T) string { return filepath.Join(t.TempDir(), "tokens.json") }

// within is a context for one MCP round trip that may wait for a human.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
