package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/mcpsource"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// The demo's file in the shared directory, and what it holds at first.
const (
	demoMCPFile    = "hello.txt"
	demoMCPContent = "Hello from the shared directory. toolgate reads this file through an MCP server.\n"
)

// demoMCP is `toolgate demo --mcp FILE`: the embedded server and a worker
// with the file's servers, and a scripted run against a filesystem server
// (the support planner only knows the desk): read a file, read it again (a
// memo hit), write it (held at the gate until approved), read it again (the
// write dropped the memo). share is the directory the file's server serves;
// it and a sample file are made if missing (the server refuses to start on a
// directory that does not exist).
func (c *cli) demoMCP(ctx context.Context, data, file, share string, yes bool) error {
	if err := os.MkdirAll(share, 0o755); err != nil {
		return fmt.Errorf("creating the shared directory: %w", err)
	}
	abs, err := filepath.Abs(share)
	if err != nil {
		return err
	}
	path := filepath.Join(abs, demoMCPFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(path, []byte(demoMCPContent), 0o644); err != nil {
			return fmt.Errorf("creating the sample file: %w", err)
		}
		fmt.Fprintf(c.stdout, "created %s\n", path)
	}
	fmt.Fprintf(c.stdout, "starting the embedded Temporal server (data in %s) and the MCP servers of %s …\n", data, file)
	s, err := c.up(ctx, devserver.Options{DataDir: data, Address: "127.0.0.1:0", Namespace: "default"}, connect.Settings{}, &workerOptions{mcpFile: file}, nil)
	if err != nil {
		return err
	}
	defer s.stop()
	server, err := demoFilesServer(s.mcp.source.List())
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(c.stdout, "\nhow toolgate treats the tools of %s (toolgate mcp list --mcp %s):\n", file, file)
	printListing(c.stdout, s.mcp.source.List())

	id := fmt.Sprintf("demo-mcp-%d", time.Now().UnixNano())
	read := tool.Proposal{Tool: server + mcpsource.Separator + "read_text_file", Args: mustJSON(map[string]string{"path": path})}
	write := tool.Proposal{Tool: server + mcpsource.Separator + "write_file", Args: mustJSON(map[string]string{"path": path,
		"content": "Hello again: run " + id + " wrote this, after a human approved it at toolgate's gate.\n"})}
	in := workflows.RunInput{Goal: "read " + demoMCPFile + " twice, rewrite it, read it again",
		Planner: plan.Config{Kind: plan.KindScripted, Answer: "Read " + demoMCPFile + " (the second read from the memo), rewrote it once approved, and read the new text.",
			Turns: [][]tool.Proposal{{read}, {read}, {write}, {read}}}}
	decider := func(id string) func(workflows.Interrupt) error {
		switch {
		case yes:
			return func(it workflows.Interrupt) error {
				return c.sendAndSay(ctx, s.client, id, "approve", workflows.DecisionInput{CallID: it.CallID, Approver: "demo --yes", ArgsDigest: it.ArgsDigest, Kind: it.Kind})
			}
		case !isTerminal(c.stdin):
			fmt.Fprintf(c.stdout, "(no terminal and no --yes: a decision is needed from another shell; the server is at %s)\n", s.server.Address())
			return nil
		}
		return c.askAtTerminal(ctx, s.client, id, nil)
	}
	res, err := c.demoRun(ctx, s, id, in, decider)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(path); err == nil {
		fmt.Fprintf(c.stdout, "\n%s now reads: %s\n", path, oneLine(string(b)))
	}
	return resultError(res)
}

// demoFilesServer is the name of the file's server that serves the
// filesystem server's read_text_file and write_file.
func demoFilesServer(list []mcpsource.Listing) (string, error) {
	served := map[string]map[string]bool{}
	for _, l := range list {
		if l.Refused != "" {
			continue
		}
		if served[l.Server] == nil {
			served[l.Server] = map[string]bool{}
		}
		served[l.Server][l.Tool] = true
	}
	for _, name := range slices.Sorted(maps.Keys(served)) {
		if served[name]["read_text_file"] && served[name]["write_file"] {
			return name, nil
		}
	}
	return "", errors.New("no server serves read_text_file and write_file: the MCP demo runs against a filesystem server (@modelcontextprotocol/server-filesystem, examples/mcp-files.yaml)")
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
