package mcpsource

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRefuses(t *testing.T) {
	cases := []struct {
		name, file, want string
	}{
		{"no servers", `servers: {}`, "no servers"},
		{"unknown top-level key", "servers:\n  a:\n    url: http://x\nextra: 1\n", "field extra not found"},
		{"unknown server key", "servers:\n  a:\n    url: http://x\n    trust: true\n", "field trust not found"},
		{"unknown tool key", "servers:\n  a:\n    url: http://x\n    tools:\n      t:\n        destructve: true\n", "field destructve not found"},
		{"duplicate key", "servers:\n  a:\n    url: http://x\n    url: http://y\n", "already defined"},
		{"both command and url", "servers:\n  a:\n    url: http://x\n    command: [srv]\n", "exactly one of command (stdio) and url"},
		{"neither command nor url", "servers:\n  a:\n    headers: {X: y}\n", "exactly one of command (stdio) and url"},
		{"url scheme", "servers:\n  a:\n    url: ftp://x\n", "want http:// or https://"},
		{"upper-case server name", "servers:\n  Files:\n    url: http://x\n", "servers.Files: a server name"},
		{"underscore in server name", "servers:\n  my_files:\n    url: http://x\n", "servers.my_files: a server name"},
		{"server name too long", "servers:\n  " + strings.Repeat("a", 25) + ":\n    url: http://x\n", "a server name"},
		{"server name starts with a digit", "servers:\n  1a:\n    url: http://x\n", "a server name"},
		{"too many sessions", "servers:\n  a:\n    url: http://x\n    sessions: 33\n", "servers.a.sessions: 33 is outside 1..32"},
		{"negative sessions", "servers:\n  a:\n    url: http://x\n    sessions: -1\n", "servers.a.sessions: -1 is outside"},
		{"local without destructive", "servers:\n  a:\n    url: http://x\n    tools:\n      t: {local: true}\n", "servers.a.tools.t: local is for reads"},
		{"local and destructive", "servers:\n  a:\n    url: http://x\n    tools:\n      t: {local: true, destructive: true}\n", "local is for reads"},
		{"invalidated_by an undeclared tool", "servers:\n  a:\n    url: http://x\n    tools:\n      r: {destructive: false, invalidated_by: [w]}\n",
			"servers.a.tools.r.invalidated_by: w is not declared destructive: true"},
		{"invalidated_by a read", "servers:\n  a:\n    url: http://x\n    tools:\n      r: {destructive: false, invalidated_by: [r2]}\n      r2: {destructive: false}\n",
			"r2 is not declared destructive: true"},
		{"invalidated_by a tool without destructive", "servers:\n  a:\n    url: http://x\n    tools:\n      r: {destructive: false, invalidated_by: [w]}\n      w: {}\n",
			"w is not declared destructive: true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	c, err := Parse([]byte(`
servers:
  files:
    command: [files-server, --root, /tmp]
    env: {TOKEN: "${FILES_TOKEN}"}
    tools:
      read_file: {destructive: false, local: true}
      list: {destructive: false, invalidated_by: [write_file]}
      write_file: {destructive: true}
  tickets-2:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${TICKETS_TOKEN}"}
    trust_annotations: true
`))
	require.NoError(t, err)
	require.Len(t, c.Servers, 2)
	assert.Equal(t, []string{"write_file"}, c.Servers["files"].Tools["list"].InvalidatedBy)
	assert.True(t, c.Servers["tickets-2"].TrustAnnotations)

	// JSON is YAML.
	_, err = Parse([]byte(`{"servers": {"a": {"url": "http://x", "tools": {"t": {"destructive": false}}}}}`))
	require.NoError(t, err)
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("servers:\n  A:\n    url: http://x\n"), 0o600))
	_, err := Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "reading the MCP file")
}

func headerServer(t *testing.T) *testServer {
	return serve(t, func(s *mcp.Server) { addTool(s, "ping", nil, say("pong")) })
}

func TestHeadersExpandFromTheEnvironment(t *testing.T) {
	ts := headerServer(t)
	env := map[string]string{"TG_TOKEN": "s3cret", "TG_TENANT": "acme"}
	file := "servers:\n  api:\n    url: " + ts.url() + "\n    headers:\n      Authorization: Bearer ${TG_TOKEN}\n      X-Tenant: ${TG_TENANT}-1\n"
	src := open(t, file, Options{Getenv: func(k string) string { return env[k] }})
	_, err := run(t, src, "api__ping", "k-1", `{}`, nil)
	require.NoError(t, err)

	seen := ts.seen()
	require.NotEmpty(t, seen)
	for _, h := range seen {
		assert.Equal(t, "Bearer s3cret", h.Get("Authorization"))
		assert.Equal(t, "acme-1", h.Get("X-Tenant"))
	}
	// The file keeps the reference, never the secret.
	assert.NotContains(t, file, "s3cret")
}

func TestHeadersUnsetVariableIsAClearError(t *testing.T) {
	ts := headerServer(t)
	file := "servers:\n  api:\n    url: " + ts.url() + "\n    headers:\n      Authorization: Bearer ${TG_MISSING_TOKEN}\n"
	cfg, err := Parse([]byte(file))
	require.NoError(t, err)
	_, err = Open(context.Background(), cfg, Options{Getenv: func(string) string { return "" }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MCP server api")
	assert.Contains(t, err.Error(), "TG_MISSING_TOKEN")
	assert.Contains(t, err.Error(), "empty")
	assert.Empty(t, ts.seen(), "nothing is sent with a header that could not be filled in")
}
