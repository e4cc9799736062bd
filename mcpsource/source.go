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

	textcut "github.com/toolgate/toolgate/internal/text"
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

// MaxSpecBytes bounds the specs of every MCP tool a Source registers, in all
// (as JSON, invalidations included): well under worker.MaxConfigBytes, so
// that the worker's own tools and policy always fit in what every run
// records, whatever the servers serve. Tools past it, in name order, are
// refused and listed as such.
const MaxSpecBytes = 256 << 10

// server is one server's tools as listed, before they are registered.
type server struct {
	c     *conn
	tools []*mcp.Tool
	lists []Listing
	specs []tool.Spec
}

// Open connects to every server of cfg and lists its tools. A tool the file
// declares that the server does not serve fails it: a typo must not leave
// the real tool ungoverned. A tool toolgate cannot take (its name, its
// schema, a description or schema over the bounds of package tool, or past
// MaxSpecBytes) is refused and listed with the reason, never registered: no
// server can stop the worker or the runs on it. Close the Source when the
// worker stops.
func Open(ctx context.Context, cfg *Config, opts Options) (*Source, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	s := &Source{}
	var servers []*server
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		c := newConn(name, cfg.Servers[name], opts)
		s.conns = append(s.conns, c)
		tools, err := c.listTools(ctx)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("MCP server %s: %w", name, err)
		}
		srv, err := list(c, tools)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		servers = append(servers, srv)
	}
	budget(servers)
	for _, srv := range servers {
		s.add(srv)
	}
	return s, nil
}

// list classifies one server's tools under the file's rules and refuses
// what toolgate cannot register.
func list(c *conn, tools []*mcp.Tool) (*server, error) {
	served := map[string]*mcp.Tool{}
	for _, t := range tools {
		served[t.Name] = t
	}
	for _, declared := range slices.Sorted(maps.Keys(c.cfg.Tools)) {
		if served[declared] == nil {
			return nil, fmt.Errorf("MCP server %s: the file declares tool %q, which the server does not serve (it serves %s)", c.name, declared, truncate(strings.Join(slices.Sorted(maps.Keys(served)), ", "), 2000))
		}
	}
	srv := &server{c: c, tools: tools, specs: make([]tool.Spec, len(tools))}
	for i, t := range tools {
		l := c.classify(t)
		if l.Refused == "" {
			// Refuse what toolgate cannot register (its input schema, a
			// description or schema over its bound) before the invalidations
			// are worked out: a destructive tool's Invalidates must name only
			// registered tools, or the worker refuses to start.
			spec := tool.Spec{Name: l.Name, Description: describe(c.name, t), Destructive: l.Destructive, Local: l.Local}
			spec.Schema, _ = json.Marshal(t.InputSchema)
			if err := (tool.Tool{Spec: spec}).Validate(); err != nil {
				l.Refused = err.Error()
			}
			srv.specs[i] = spec
		}
		srv.lists = append(srv.lists, l)
	}
	return srv, nil
}

// invalidates reports whether destructive tool d's success drops read r's
// memoized results (both of c's server): a read's invalidated_by narrows
// which declared destructive tools drop it; a destructive tool the file does
// not declare (the operator does not know what it does) drops every read of
// its server.
func (c *conn) invalidates(d, r Listing) bool {
	by := c.cfg.Tools[r.Tool].InvalidatedBy
	return d.Why != "declared" || len(by) == 0 || slices.Contains(by, d.Tool)
}

// budget refuses, in name order across every server, each tool whose spec
// would take the MCP tools past MaxSpecBytes. A tool's share is its spec's
// JSON, and for each pair of a destructive tool and a read it drops, the
// read's name in the destructive tool's invalidates (charged to whichever of
// the two comes later in name order), so what is admitted stays within the
// bound once the invalidations are worked out.
func budget(servers []*server) {
	type entry struct {
		srv *server
		i   int
	}
	var order []entry
	for _, srv := range servers {
		for i, l := range srv.lists {
			if l.Refused == "" {
				order = append(order, entry{srv, i})
			}
		}
	}
	slices.SortFunc(order, func(a, b entry) int { return strings.Compare(a.srv.lists[a.i].Name, b.srv.lists[b.i].Name) })
	used := 0
	admitted := map[*server][]int{}
	for _, e := range order {
		l := &e.srv.lists[e.i]
		spec, _ := json.Marshal(e.srv.specs[e.i])
		cost := len(spec) + 1
		if l.Destructive {
			cost += len(`,"invalidates":[]`)
		}
		for _, j := range admitted[e.srv] {
			o := e.srv.lists[j]
			switch {
			case l.Destructive && !o.Destructive && e.srv.c.invalidates(*l, o):
				cost += len(o.Name) + 3
			case !l.Destructive && o.Destructive && e.srv.c.invalidates(o, *l):
				cost += len(l.Name) + 3
			}
		}
		if used+cost > MaxSpecBytes {
			l.Refused = fmt.Sprintf("its spec (%d bytes with its invalidations) would take the MCP tools' specs past %d bytes in all (mcpsource.MaxSpecBytes; tools are taken in name order, %d bytes already)", cost, MaxSpecBytes, used)
			continue
		}
		used += cost
		admitted[e.srv] = append(admitted[e.srv], e.i)
	}
}

// add registers one server's tools that were not refused, with their invalidations.
func (s *Source) add(srv *server) {
	c, lists := srv.c, srv.lists
	for i := range lists {
		l := &lists[i]
		if !l.Destructive || l.Refused != "" {
			continue
		}
		for _, r := range lists {
			if !r.Destructive && r.Refused == "" && c.invalidates(*l, r) {
				l.Invalidates = append(l.Invalidates, r.Name)
			}
		}
	}
	for i, l := range lists {
		s.list = append(s.list, l)
		if l.Refused != "" {
			continue
		}
		spec := srv.specs[i]
		spec.Invalidates = l.Invalidates
		s.tools = append(s.tools, tool.Tool{Spec: spec, Run: c.activity(srv.tools[i].Name, l)})
	}
}

// truncate cuts s to n bytes at most, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return textcut.Cut(s, n) + "…"
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
