package mcpsource

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liarServer serves tools whose annotations range from honest to lying.
func liarServer(t *testing.T) *testServer {
	return serve(t, func(s *mcp.Server) {
		addTool(s, "plain", nil, say("ok"))
		// It deletes, and says it is not destructive (but not that it is read-only).
		addTool(s, "delete_all", &mcp.ToolAnnotations{DestructiveHint: ptr(false)}, say("deleted"))
		// Says read-only but leaves destructiveHint unset (which means true).
		addTool(s, "half_read", &mcp.ToolAnnotations{ReadOnlyHint: true}, say("ok"))
		// Says read-only and not destructive.
		addTool(s, "honest_read", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)}, say("ok"))
		// Says read-only and destructive.
		addTool(s, "confused", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(true)}, say("ok"))
		// The file declares this one a read; the server says it destroys.
		addTool(s, "declared_read", &mcp.ToolAnnotations{DestructiveHint: ptr(true)}, say("ok"))
		// The file declares this one destructive; the server says it reads.
		addTool(s, "declared_write", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)}, say("ok"))
	})
}

func liarFile(url string, trust bool) string {
	f := "servers:\n  s:\n    url: " + url + "\n"
	if trust {
		f += "    trust_annotations: true\n"
	}
	return f + "    tools:\n      declared_read: {destructive: false, local: true}\n      declared_write: {destructive: true}\n"
}

type class struct {
	destructive bool
	why         string
}

func checkClasses(t *testing.T, src *Source, want map[string]class) {
	t.Helper()
	for name, w := range want {
		l := listing(t, src, "s__"+name)
		assert.Equal(t, w.destructive, l.Destructive, "%s: destructive", name)
		assert.Equal(t, !w.destructive, l.Memoized, "%s: memoized", name)
		assert.Equal(t, w.why, l.Why, "%s: why", name)
		assert.Empty(t, l.Refused, name)
		spec := find(t, src, "s__"+name).Spec
		assert.Equal(t, w.destructive, spec.Destructive, "%s: registered spec", name)
	}
	assert.Len(t, src.Tools(), len(want))
}

func TestClassifyDefaultDenyIgnoresAnnotations(t *testing.T) {
	ts := liarServer(t)
	src := open(t, liarFile(ts.url(), false), Options{})
	checkClasses(t, src, map[string]class{
		"plain":          {true, "default"},
		"delete_all":     {true, "default"},
		"half_read":      {true, "default"},
		"honest_read":    {true, "default"}, // not trusted without trust_annotations
		"confused":       {true, "default"},
		"declared_read":  {false, "declared"},
		"declared_write": {true, "declared"},
	})
	l := listing(t, src, "s__declared_read")
	assert.True(t, l.Local)
	assert.True(t, find(t, src, "s__declared_read").Spec.Local)
	assert.False(t, listing(t, src, "s__declared_write").Local)
}

func TestClassifyTrustedAnnotationsNeedBothHints(t *testing.T) {
	ts := liarServer(t)
	src := open(t, liarFile(ts.url(), true), Options{})
	checkClasses(t, src, map[string]class{
		"plain":          {true, "default"},
		"delete_all":     {true, "default"}, // destructiveHint false alone is not a read
		"half_read":      {true, "default"}, // readOnlyHint alone is not a read
		"honest_read":    {false, "annotation"},
		"confused":       {true, "default"},
		"declared_read":  {false, "declared"}, // the file wins over the server
		"declared_write": {true, "declared"},
	})
	assert.False(t, listing(t, src, "s__honest_read").Local, "annotations never make a tool local")
}

func TestAnnotationsAreShownToThePlanner(t *testing.T) {
	ts := liarServer(t)
	src := open(t, liarFile(ts.url(), false), Options{})
	spec := find(t, src, "s__delete_all").Spec
	assert.Contains(t, spec.Description, "test tool delete_all")
	assert.Contains(t, spec.Description, `"destructiveHint":false`)
	assert.Contains(t, spec.Description, "MCP server s")
	require.NotNil(t, listing(t, src, "s__delete_all").Annotations)
	assert.JSONEq(t, `{"type":"object"}`, string(spec.Schema))
	assert.Equal(t, "test tool plain", find(t, src, "s__plain").Spec.Description)
}

func TestDeclaredToolTheServerDoesNotServeFailsOpen(t *testing.T) {
	ts := liarServer(t)
	cfg, err := Parse([]byte("servers:\n  s:\n    url: " + ts.url() + "\n    tools:\n      delete_al: {destructive: false}\n"))
	require.NoError(t, err)
	_, err = Open(context.Background(), cfg, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"delete_al"`)
	assert.Contains(t, err.Error(), "MCP server s")
	assert.Contains(t, err.Error(), "delete_all")
}

func TestToolNamesToolgateCannotTakeAreRefused(t *testing.T) {
	long := strings.Repeat("x", 70)
	ts := serve(t, func(s *mcp.Server) {
		addTool(s, "files.read", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)}, say("ok"))
		addTool(s, long, nil, say("ok"))
		addTool(s, "write", nil, say("ok"))
		addTool(s, "read", nil, say("ok"))
	})
	src := open(t, "servers:\n  s:\n    url: "+ts.url()+"\n    trust_annotations: true\n    tools:\n      read: {destructive: false}\n", Options{})
	assert.ElementsMatch(t, []string{"s__read", "s__write"}, registered(src))
	for _, name := range []string{"s__files.read", "s__" + long} {
		l := listing(t, src, name)
		assert.NotEmpty(t, l.Refused, name)
		assert.Contains(t, l.Refused, "tool name")
	}
	// A refused read is not named in what a destructive tool invalidates.
	assert.Equal(t, []string{"s__read"}, find(t, src, "s__write").Spec.Invalidates)
	assert.Len(t, src.List(), 4)
}

func TestReadWithASchemaToolgateRefusesIsNotInvalidated(t *testing.T) {
	ts := serve(t, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "remote_ref", InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"a": map[string]any{"$ref": "https://example.com/a.json"}},
		}}, say("ok"))
		addTool(s, "read", nil, say("ok"))
		addTool(s, "write", nil, say("ok"))
	})
	src := open(t, "servers:\n  s:\n    url: "+ts.url()+"\n    tools:\n      remote_ref: {destructive: false}\n      read: {destructive: false}\n", Options{})
	assert.ElementsMatch(t, []string{"s__read", "s__write"}, registered(src))
	assert.NotEmpty(t, listing(t, src, "s__remote_ref").Refused)
	// Every Invalidates must name a registered tool, or the worker refuses to start.
	assert.Equal(t, []string{"s__read"}, find(t, src, "s__write").Spec.Invalidates)
}

func invalidationServer(t *testing.T) *testServer {
	return serve(t, func(s *mcp.Server) {
		for _, n := range []string{"get", "list", "search", "create", "delete", "undeclared"} {
			addTool(s, n, nil, say(n))
		}
	})
}

func TestDestructiveInvalidatesEveryReadByDefault(t *testing.T) {
	ts := invalidationServer(t)
	other := invalidationServer(t)
	src := open(t, "servers:\n  s:\n    url: "+ts.url()+`
    tools:
      get: {destructive: false}
      list: {destructive: false}
      search: {destructive: false}
      create: {destructive: true}
      delete: {destructive: true}
  o:
    url: `+other.url()+`
    tools:
      get: {destructive: false}
`, Options{})
	reads := []string{"s__get", "s__list", "s__search"}
	for _, w := range []string{"s__create", "s__delete", "s__undeclared"} {
		assert.ElementsMatch(t, reads, listing(t, src, w).Invalidates, w)
		assert.ElementsMatch(t, reads, find(t, src, w).Spec.Invalidates, w)
	}
	for _, r := range reads {
		assert.Empty(t, find(t, src, r).Spec.Invalidates, r)
	}
	// Another server's writes do not drop this server's reads, nor the reverse.
	assert.ElementsMatch(t, []string{"o__get"}, find(t, src, "o__delete").Spec.Invalidates)
}

func TestInvalidatedByNarrows(t *testing.T) {
	ts := invalidationServer(t)
	src := open(t, "servers:\n  s:\n    url: "+ts.url()+`
    tools:
      get: {destructive: false, invalidated_by: [delete]}
      list: {destructive: false, invalidated_by: [create, delete]}
      search: {destructive: false}
      create: {destructive: true}
      delete: {destructive: true}
`, Options{})
	want := map[string][]string{
		"s__create":     {"s__list", "s__search"},
		"s__delete":     {"s__get", "s__list", "s__search"},
		"s__undeclared": {"s__get", "s__list", "s__search"}, // the operator does not know what it does: it drops every read
	}
	for w, reads := range want {
		assert.ElementsMatch(t, reads, find(t, src, w).Spec.Invalidates, w)
		assert.ElementsMatch(t, reads, listing(t, src, w).Invalidates, w)
	}
}
