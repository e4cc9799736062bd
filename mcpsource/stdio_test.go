package mcpsource

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary is also a stdio MCP server, when its first argument is
// stdioServerArg (an argument, not a variable: a child must never run the
// tests, which would start children of their own).
const (
	stdioServerArg = "mcpsource-test-stdio-server"
	stdioServerEnv = "MCPSOURCE_TEST_FLAG"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == stdioServerArg {
		stdioServer()
		return
	}
	os.Exit(m.Run())
}

func stdioCommand() string {
	return "[" + strconv.Quote(os.Args[0]) + ", " + stdioServerArg + "]"
}

func stdioServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	addTool(s, "whoami", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{
			"pid": os.Getpid(), "flag": os.Getenv(stdioServerEnv), "secret": os.Getenv("MCPSOURCE_TEST_SECRET")}}, nil
	})
	addTool(s, "crash", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

type whoami struct {
	PID    int    `json:"pid"`
	Flag   string `json:"flag"`
	Secret string `json:"secret"`
}

func TestStdioServerThatExitsIsRetryableAndRestarted(t *testing.T) {
	env := map[string]string{"FLAG": "on", "SECRET": "hunter2"}
	file := "servers:\n  local:\n    command: " + stdioCommand() + "\n    env:\n      " + stdioServerEnv + ": ${FLAG}\n      MCPSOURCE_TEST_SECRET: x-${SECRET}\n"
	src := open(t, file, Options{Getenv: func(k string) string { return env[k] }})
	assert.ElementsMatch(t, []string{"local__whoami", "local__crash"}, registered(src))

	res, err := run(t, src, "local__whoami", "k-1", `{}`, nil)
	require.NoError(t, err)
	var first whoami
	require.NoError(t, json.Unmarshal(res.Result, &first))
	assert.Equal(t, "on", first.Flag)
	assert.Equal(t, "x-hunter2", first.Secret)

	_, err = run(t, src, "local__crash", "k-2", `{}`, nil)
	ae := appErr(t, err)
	assert.False(t, ae.NonRetryable(), "a server that exits is retryable: %v", err)

	res, err = run(t, src, "local__whoami", "k-3", `{}`, nil)
	require.NoError(t, err)
	var second whoami
	require.NoError(t, json.Unmarshal(res.Result, &second))
	assert.NotEqual(t, first.PID, second.PID, "the server was started again")
	assert.Equal(t, "x-hunter2", second.Secret)
}

func TestStdioUnsetEnvVariableIsAClearError(t *testing.T) {
	file := "servers:\n  local:\n    command: " + stdioCommand() + "\n    env:\n      " + stdioServerEnv + ": ${MCPSOURCE_UNSET_FLAG}\n"
	cfg, err := Parse([]byte(file))
	require.NoError(t, err)
	_, err = Open(context.Background(), cfg, Options{Getenv: func(string) string { return "" }})
	require.ErrorContains(t, err, "MCPSOURCE_UNSET_FLAG")
}
