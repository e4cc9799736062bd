package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/mcpserve"
)

func runCLI(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func TestHelpListsMCPCommands(t *testing.T) {
	out, _, err := runCLI("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  mcp list ", "\n  mcp serve ", "\n  mcp token new "} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if dev, _, err := runCLI("help", "dev"); err != nil || !strings.Contains(dev, "\n  --mcp-address ") {
		t.Errorf("toolgate help dev: %v; lacks --mcp-address:\n%s", err, dev)
	}
	if _, _, err := runCLI("mcp"); err == nil || !strings.Contains(err.Error(), "mcp serve") {
		t.Errorf("toolgate mcp: %v, want the mcp usage", err)
	}
	if _, _, err := runCLI("mcp", "list"); err == nil || !strings.Contains(err.Error(), "mcp list --mcp FILE") {
		t.Errorf("toolgate mcp list without --mcp: %v, want its usage", err)
	}
}

func TestMCPTokenNewPrintsTheTokenOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	out, errOut, err := runCLI("mcp", "token", "new", "alice", "--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, mcpserve.TokenPrefix) || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout %q: want the token alone", out)
	}
	if !strings.Contains(errOut, "shown this once") || strings.Contains(errOut, tok) {
		t.Errorf("stderr %q: want a note that it is shown once, without the token", errOut)
	}
	toks, err := mcpserve.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := toks.Lookup(tok); !ok || e.Name != "alice" {
		t.Errorf("the printed token is not alice's: %v %v", e, ok)
	}
	if _, _, err := runCLI("mcp", "token", "new", "--tokens", file); err == nil {
		t.Error("token new without NAME taken")
	}
}

func TestMCPServeRefusesBadFlagsBeforeStarting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	for _, tc := range []struct {
		args []string
		why  string
	}{
		{[]string{"mcp", "serve"}, "one of --listen"},
		{[]string{"mcp", "serve", "--stdio", "--listen", "127.0.0.1:0"}, "one of --listen"},
		{[]string{"mcp", "serve", "--listen", "127.0.0.1:0"}, "needs --tokens"},
		{[]string{"mcp", "serve", "--listen", "0.0.0.0:0", "--tokens", file}, "not a loopback address"},
		{[]string{"mcp", "serve", "--listen", "127.0.0.1:0", "--tokens", file, "--listen-tls-cert", "c.pem"}, "both a certificate and its key"},
		{[]string{"mcp", "serve", "--listen", "127.0.0.1:0", "--tokens", file}, "does not exist"},
		{[]string{"mcp", "serve", "--stdio", "--tokens", file}, "takes no --tokens"},
		{[]string{"mcp", "serve", "--listen", "127.0.0.1:0", "--tokens", file, "--run", "x"}, "go with --stdio"},
		{[]string{"dev", "--mcp-address", "127.0.0.1:0"}, "needs --mcp-tokens"},
		{[]string{"dev", "--mcp-address", "0.0.0.0:0", "--mcp-tokens", file}, "loopback"},
		{[]string{"dev", "--mcp-address", "127.0.0.1:0", "--mcp-tokens", file, "--no-worker"}, "in-process worker"},
	} {
		_, _, err := runCLI(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want a refusal saying %q", strings.Join(tc.args, " "), err, tc.why)
		}
	}
}
