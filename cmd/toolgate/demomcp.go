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
	"strings"
	"time"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/mcpsource"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// The demo's file in the shared directory, what it holds at the start of
// every demo, and how the text the demo's write puts there begins and ends.
const (
	demoMCPFile    = "hello.txt"
	demoMCPContent = "Hello from the shared directory. toolgate reads this file through an MCP server.\n"
	demoMCPWritten = "Hello again: run "
	demoMCPSigned  = " wrote this, after a human approved it at toolgate's gate.\n"
)

// resetDemoMCPFile puts the demo's file back to its sample text, so every
// demo reads the same text first whatever the last demo wrote. It rewrites
// only a file the demo made (its sample, or the text a demo's write left);
// one holding other text is left alone, and the demo stops. It returns
// whether the file was made now.
func resetDemoMCPFile(path string) (made bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		made = true
	case err != nil:
		return false, fmt.Errorf("reading the demo's file: %w", err)
	case string(b) == demoMCPContent:
		return false, nil
	case !isDemoMCPWrite(string(b)):
		return false, fmt.Errorf("%s holds text the demo did not write, and the demo rewrites it: move the file away, or give --share another directory", path)
	}
	if err := os.WriteFile(path, []byte(demoMCPContent), 0o644); err != nil {
		return false, fmt.Errorf("writing the demo's file: %w", err)
	}
	return made, nil
}

// demoMCPWrite is the text run id's write puts in the demo's file.
func demoMCPWrite(id string) string { return demoMCPWritten + id + demoMCPSigned }

// isDemoMCPWrite says whether s is the text a demo's write left.
func isDemoMCPWrite(s string) bool {
	id, ok := strings.CutPrefix(s, demoMCPWritten)
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, demoMCPSigned)
	return ok && strings.HasPrefix(id, "demo-mcp-") && !strings.ContainsAny(id, " \n")
}

// demoMCP is `toolgate demo --mcp FILE`: the embedded server and a worker
// with the file's servers, and a scripted run against a filesystem server
// (the support planner only knows the desk): read a file, read it again (a
// memo hit), write it (held at the gate until approved), read it again (the
// write dropped the memo). share is the directory the file's server serves;
// it and a sample file are made if missing (the server refuses to start on a
// directory that does not exist). Each demo starts from the same file: its
// sample text (resetDemoMCPFile).
func (c *cli) demoMCP(ctx context.Context, data, file, share string, yes bool) error {
	if err := os.MkdirAll(share, 0o755); err != nil {
		return fmt.Errorf("creating the shared directory: %w", err)
	}
	abs, err := filepath.Abs(share)
	if err != nil {
		return err
	}
	path := filepath.Join(abs, demoMCPFile)
	made, err := resetDemoMCPFile(path)
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(c.stdout, "demo file: %s, made with its sample text\n", path)
	} else {
		fmt.Fprintf(c.stdout, "demo file: %s, reset to its sample text\n", path)
	}
	fmt.Fprintf(c.stdout, "starting the embedded Temporal server (data in %s) and the MCP servers of %s …\n", data, file)
	// The worker serves the demo's own desk (no call of this demo uses it),
	// never the desk of a `toolgate dev` on the same data directory.
	wo := &workerOptions{mcpFile: file, deskDB: filepath.Join(data, demo.DemoDeskFile)}
	s, err := c.up(ctx, devserver.Options{DataDir: data, Address: "127.0.0.1:0", Namespace: "default"}, connect.Settings{}, wo, nil)
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
		"content": demoMCPWrite(id)})}
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
