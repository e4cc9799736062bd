package mcpsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/tool"
)

// Separator joins a server's name and its tool's: <server>__<tool>.
const Separator = "__"

// Options say how a Source connects and where it keeps its journal.
type Options struct {
	// Getenv expands ${VAR} in headers and env (default os.Getenv).
	Getenv func(string) string
	// Journal keeps the results of destructive calls by idempotency key, so
	// a retried call (a worker killed after the server answered) is answered
	// from it instead of calling the server again. Nil: none.
	Journal Journal
	// AfterCall, if set, runs after a destructive call's result is kept in
	// the journal and before the activity returns (fault injection in tests).
	AfterCall func(name, idempotencyKey string)
	// Logger receives the SDK's client log (nil: none).
	Logger *slog.Logger
}

// Source is the tools of every server of a Config, connected.
type Source struct {
	conns []*conn
	tools []tool.Tool
	list  []Listing
}

// Listing says how toolgate treats one tool of a server, and why.
type Listing struct {
	Name        string               `json:"name"` // <server>__<tool>
	Server      string               `json:"server"`
	Tool        string               `json:"tool"`
	Destructive bool                 `json:"destructive"`
	Memoized    bool                 `json:"memoized"`
	Local       bool                 `json:"local,omitempty"`
	Why         string               `json:"why"` // declared | default | annotation
	Invalidates []string             `json:"invalidates,omitempty"`
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
	// Refused says why the tool is not registered (a name or schema toolgate cannot take).
	Refused string `json:"refused,omitempty"`
}

// Open connects to every server of cfg and lists its tools. A tool the file
// declares that the server does not serve fails it: a typo must not leave
// the real tool ungoverned. Close the Source when the worker stops.
func Open(ctx context.Context, cfg *Config, opts Options) (*Source, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	s := &Source{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		c := newConn(name, cfg.Servers[name], opts)
		s.conns = append(s.conns, c)
		tools, err := c.listTools(ctx)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("MCP server %s: %w", name, err)
		}
		if err := s.add(c, tools); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// add registers one server's tools under the file's rules.
func (s *Source) add(c *conn, tools []*mcp.Tool) error {
	served := map[string]*mcp.Tool{}
	for _, t := range tools {
		served[t.Name] = t
	}
	for _, declared := range slices.Sorted(maps.Keys(c.cfg.Tools)) {
		if served[declared] == nil {
			return fmt.Errorf("MCP server %s: the file declares tool %q, which the server does not serve (it serves %s)", c.name, declared, strings.Join(slices.Sorted(maps.Keys(served)), ", "))
		}
	}
	var lists []Listing
	specs := make([]tool.Spec, len(tools))
	for i, t := range tools {
		l := c.classify(t)
		if l.Refused == "" {
			// Refuse what toolgate cannot register (its input schema) before
			// the invalidations are worked out: a destructive tool's
			// Invalidates must name only registered tools, or the worker
			// refuses to start.
			specs[i] = tool.Spec{Name: l.Name, Description: describe(c.name, t), Destructive: l.Destructive, Local: l.Local}
			specs[i].Schema, _ = json.Marshal(t.InputSchema)
			if err := (tool.Tool{Spec: specs[i]}).Validate(); err != nil {
				l.Refused = err.Error()
			}
		}
		lists = append(lists, l)
	}
	// A read's invalidated_by narrows which declared destructive tools drop
	// it; a destructive tool the file does not declare (the operator does not
	// know what it does) drops every read of its server.
	for i := range lists {
		l := &lists[i]
		if !l.Destructive || l.Refused != "" {
			continue
		}
		for _, r := range lists {
			if r.Destructive || r.Refused != "" {
				continue
			}
			by := c.cfg.Tools[r.Tool].InvalidatedBy
			if l.Why != "declared" || len(by) == 0 || slices.Contains(by, l.Tool) {
				l.Invalidates = append(l.Invalidates, r.Name)
			}
		}
	}
	for i, l := range lists {
		s.list = append(s.list, l)
		if l.Refused != "" {
			continue
		}
		spec := specs[i]
		spec.Invalidates = l.Invalidates
		s.tools = append(s.tools, tool.Tool{Spec: spec, Run: c.activity(tools[i].Name, l)})
	}
	return nil
}

// classify says how toolgate treats t: the file's declaration, else
// destructive — unless the file trusts the server's annotations and t says
// it is read-only and not destructive.
func (c *conn) classify(t *mcp.Tool) Listing {
	l := Listing{Name: c.name + Separator + t.Name, Server: c.name, Tool: t.Name, Annotations: t.Annotations}
	decl, declared := c.cfg.Tools[t.Name]
	switch {
	case declared && decl.Destructive != nil:
		l.Destructive, l.Why, l.Local = *decl.Destructive, "declared", decl.Local && !*decl.Destructive
	case c.cfg.TrustAnnotations && t.Annotations != nil && t.Annotations.ReadOnlyHint &&
		t.Annotations.DestructiveHint != nil && !*t.Annotations.DestructiveHint:
		l.Why = "annotation"
	default:
		l.Destructive, l.Why = true, "default"
	}
	l.Memoized = !l.Destructive
	if err := (tool.Spec{Name: l.Name}).Validate(); err != nil {
		l.Refused = err.Error()
	}
	return l
}

// describe is what the planner is told of a tool: the server's description,
// and its annotations (shown, never trusted for the gate).
func describe(server string, t *mcp.Tool) string {
	d := strings.TrimSpace(t.Description)
	if t.Annotations != nil {
		if a, err := json.Marshal(t.Annotations); err == nil {
			d += fmt.Sprintf(" [MCP server %s; its annotations: %s]", server, a)
		}
	}
	return d
}

// Tools are the servers' tools as toolgate tools, for worker.Options.Tools.
func (s *Source) Tools() []tool.Tool { return s.tools }

// List says how toolgate treats each tool the servers serve.
func (s *Source) List() []Listing { return s.list }

// Close disconnects from every server (a stdio server is stopped).
func (s *Source) Close() error {
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}
