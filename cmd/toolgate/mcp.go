package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/mcpsource"
)

// MCPJournalFile is the MCP journal's file in the data directory: the
// results of destructive MCP calls by idempotency key (mcpsource.FileJournal).
const MCPJournalFile = "mcp-journal.db"

func mcpFlag(fs *flag.FlagSet) *string {
	return fs.String("mcp", "", "an MCP file (YAML or JSON, examples/mcp-files.yaml): the tools of its servers, named SERVER__TOOL, join the worker's")
}

// mcpTools is an --mcp file's servers, connected, and the journal of their
// destructive calls.
type mcpTools struct {
	source  *mcpsource.Source
	journal *mcpsource.FileJournal
}

// close disconnects from the servers (stopping stdio ones), then closes the
// journal. Call it after the worker has stopped.
func (m *mcpTools) close() {
	if m == nil {
		return
	}
	if m.source != nil {
		_ = m.source.Close()
	}
	if m.journal != nil {
		_ = m.journal.Close()
	}
}

// openMCP loads the --mcp file, opens the journal at DATA/mcp-journal.db and
// connects to every server. "" opens nothing (nil).
func (c *cli) openMCP(ctx context.Context, file, dataDir string) (*mcpTools, error) {
	if file == "" {
		return nil, nil
	}
	cfg, err := mcpsource.Load(file)
	if err != nil {
		return nil, err
	}
	if err := private.Dir(dataDir); err != nil {
		return nil, err
	}
	j, err := mcpsource.OpenJournal(filepath.Join(dataDir, MCPJournalFile))
	if err != nil {
		return nil, err
	}
	m := &mcpTools{journal: j}
	// Connecting to each server and listing its tools is bounded by its
	// connect_timeout (mcpsource.DefaultConnectTimeout unless the file says).
	m.source, err = mcpsource.Open(ctx, cfg, mcpsource.Options{
		Journal:   j,
		AfterCall: faultAfterMCP(), // nil unless built with -tags toolgate_fault (fault.go)
		Logger:    c.mcpLogger(),
	})
	if err != nil {
		m.close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var refused []string
	for _, l := range m.source.List() {
		if l.Refused != "" {
			refused = append(refused, oneLine(l.Name)+": "+oneLine(l.Refused))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(c.stderr, "toolgate: %s: tools not registered: %s\n", file, strings.Join(refused, "; "))
	}
	return m, nil
}

// mcpLogger keeps the MCP SDK's client log to warnings and errors on stderr.
func (c *cli) mcpLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// mcpList is `toolgate mcp list --mcp FILE [--json]`.
func (c *cli) mcpList(ctx context.Context, args []string) error {
	fs := c.flags("mcp list")
	file := mcpFlag(fs)
	asJSON := fs.Bool("json", false, "print the listing as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *file == "" {
		return errors.New("usage: toolgate mcp list --mcp FILE [--json]")
	}
	cfg, err := mcpsource.Load(*file)
	if err != nil {
		return err
	}
	src, err := mcpsource.Open(ctx, cfg, mcpsource.Options{Logger: c.mcpLogger()}) // each server within its connect_timeout
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	defer src.Close()
	list := src.List()
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if list == nil {
			list = []mcpsource.Listing{}
		}
		return enc.Encode(list)
	}
	printListing(c.stdout, list)
	return nil
}

// printListing prints how toolgate treats each tool, and why. Everything a
// server chose (names, annotations, titles) is escaped: a server is not
// trusted with the operator's terminal either.
func printListing(w io.Writer, list []mcpsource.Listing) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDESTRUCTIVE\tMEMOIZED\tWHY\tANNOTATIONS")
	var refused []mcpsource.Listing
	for _, l := range list {
		if l.Refused != "" {
			refused = append(refused, l)
			continue
		}
		name := oneLine(l.Name)
		if l.Local {
			name += " (local)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, yesNo(l.Destructive), yesNo(l.Memoized), oneLine(l.Why), annotations(l))
	}
	_ = tw.Flush()
	reads := map[string]int{} // memoized tools per server
	for _, l := range list {
		if l.Memoized && l.Refused == "" {
			reads[l.Server]++
		}
	}
	for _, l := range list {
		switch {
		case !l.Destructive || l.Refused != "" || len(l.Invalidates) == 0:
		case len(l.Invalidates) == reads[l.Server]:
			fmt.Fprintf(w, "%s drops the memoized results of every read of %s\n", oneLine(l.Name), oneLine(l.Server))
		default:
			fmt.Fprintf(w, "%s drops the memoized results of %s\n", oneLine(l.Name), oneLine(strings.Join(l.Invalidates, ", ")))
		}
	}
	for _, l := range refused {
		fmt.Fprintf(w, "refused %s: %s\n", oneLine(l.Name), oneLine(l.Refused))
	}
	fmt.Fprintln(w, "why: declared = the file says so; default = not declared, so gated and never memoized; annotation = the file trusts this server's readOnlyHint")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// annotations is the server's annotations of a tool, as it sent them, or "-".
func annotations(l mcpsource.Listing) string {
	if l.Annotations == nil {
		return "-"
	}
	b, err := json.Marshal(l.Annotations)
	if err != nil || string(b) == "{}" {
		return "-"
	}
	return truncate(oneLine(string(b)), 200)
}
