package mcpserve

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/signed"
)

func TestSignedStartWithThePolicy(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "carol.key")
	if err := signed.WritePrivateKey(keyFile, priv); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tokens.json")
	tok, err := NewToken(file, "carol", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	runs := newFakeRuns()
	s, err := New(Options{Runs: runs, Tools: testTools, Tokens: toks, Policy: true, Hosts: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := toks.Lookup(tok)
	in, err := s.startInput(WorkflowID(e.Name, "r"), e.Name, "r")
	if err != nil {
		t.Fatal(err)
	}
	if in.RequestToken == "" {
		t.Fatal("with a policy and a key_file, the start is not signed")
	}
	c, err := signed.Verify(in.RequestToken, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Approver != "carol" || c.WorkflowID != "mcp-carol-r" || c.Action != signed.ActionStart {
		t.Errorf("claims %+v: want carol's start of mcp-carol-r", c)
	}
	if _, err := s.startInput("mcp-dan-r", "dan", "r"); err == nil || !strings.Contains(err.Error(), "dan has no signing key") {
		t.Errorf("under a policy, a caller without a key: %v, want its call refused (its run would have no verified requester)", err)
	}
	s.opts.Policy = false
	if in, _ := s.startInput("mcp-carol-r", "carol", "r"); in.RequestToken != "" {
		t.Error("without a policy, the start is signed")
	}
}

// The stdio caller's key (mcp serve --stdio --as NAME --key FILE) signs its
// runs' starts under a policy.
func TestSignedStdioStart(t *testing.T) {
	_, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Runs: newFakeRuns(), Tools: testTools, Policy: true, Keys: map[string]ed25519.PrivateKey{"dave": priv}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.startInput("mcp-dave-r", "dave", "r")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := signed.Verify(in.RequestToken, priv.Public().(ed25519.PublicKey)); err != nil || c.Approver != "dave" {
		t.Fatalf("the stdio start: claims %+v, %v; want dave's signed start", c, err)
	}
}

func TestStdio(t *testing.T) {
	runs := newFakeRuns()
	s, err := New(Options{Runs: runs, Tools: testTools})
	if err != nil {
		t.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.ServeStdio(ctx, "stdio", "r9", sr, sw) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != len(testTools) {
		t.Fatalf("tools/list over stdio: %v, %v", tools, err)
	}
	res := call(t, cs, "search", map[string]any{"query": "a"}, nil)
	if res.IsError || res.Meta[MetaRun] != "mcp-stdio-r9" {
		t.Errorf("stdio call: error %v, meta %v, text %q", res.IsError, res.Meta, resultText(res))
	}
	_ = cs.Close()
	_ = cw.Close()
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("ServeStdio did not return once the client closed")
	}
	if err := s.ServeStdio(ctx, "stdio", "bad run!", sr, sw); err == nil {
		t.Error("a bad run name is taken")
	}
}
