package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reference MCP filesystem server the MCP tests run over stdio. Tests
// never download it: .ci/run installs it with npm before the test command
// and names it in MCPFilesystemEnv, and sets MCPRequireEnv so that a missing
// server fails the tests there instead of skipping them.
const (
	// MCPFilesystemEnv names the installed server: its executable
	// (node_modules/.bin/mcp-server-filesystem) or its dist/index.js.
	MCPFilesystemEnv = "TOOLGATE_MCP_FILESYSTEM"
	// MCPRequireEnv=1 makes a missing server a failure (CI).
	MCPRequireEnv = "TOOLGATE_REQUIRE_MCP"
	// MCPFilesystemPackage is the npm package and the version the tests
	// expect (examples/mcp-files.yaml declares its tools).
	MCPFilesystemPackage = "@modelcontextprotocol/server-filesystem@2026.8.31"
)

// MCPFilesystem returns the command that starts the MCP filesystem server
// named by $TOOLGATE_MCP_FILESYSTEM, to which the caller appends the
// directories it may serve. Without one the test is skipped, saying how to
// install it — or fails, when $TOOLGATE_REQUIRE_MCP is 1.
func MCPFilesystem(t testing.TB) []string {
	t.Helper()
	path := os.Getenv(MCPFilesystemEnv)
	problem := ""
	switch fi, err := os.Stat(path); {
	case path == "":
		problem = MCPFilesystemEnv + " is not set"
	case err != nil:
		problem = MCPFilesystemEnv + "=" + path + ": " + err.Error()
	case fi.IsDir():
		problem = MCPFilesystemEnv + "=" + path + " is a directory, not the server's executable or dist/index.js"
	}
	if problem != "" {
		msg := problem + ": the MCP tests need the MCP filesystem server, installed once (the tests never download it): " +
			"npm install --no-audit --no-fund --prefix /tmp/mcpfs " + MCPFilesystemPackage +
			" && export " + MCPFilesystemEnv + "=/tmp/mcpfs/node_modules/.bin/mcp-server-filesystem"
		skipUnlessRequired(t, MCPRequireEnv, msg)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(abs, ".js") || strings.HasSuffix(abs, ".mjs") {
		return []string{"node", abs}
	}
	return []string{abs}
}

// The official MCP TypeScript SDK, the client the MCP server's tests drive
// from Node.js (testsuite/e2e/testdata/mcpclient.cjs): .ci/run installs it
// with npm outside the clone and names its directory in MCPNodeSDKEnv.
const (
	// MCPNodeSDKEnv names the directory that holds node_modules/@modelcontextprotocol/sdk.
	MCPNodeSDKEnv = "TOOLGATE_MCP_NODE_SDK"
	// MCPNodeSDKPackage is the npm package and the version the tests expect.
	MCPNodeSDKPackage = "@modelcontextprotocol/sdk@1.32.2"
)

// MCPNodeSDK returns the directory $TOOLGATE_MCP_NODE_SDK names, in which
// node_modules holds the MCP TypeScript SDK. Without one the test is
// skipped, saying how to install it — or fails, when $TOOLGATE_REQUIRE_MCP is 1.
func MCPNodeSDK(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(MCPNodeSDKEnv)
	problem := ""
	switch _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); {
	case dir == "":
		problem = MCPNodeSDKEnv + " is not set"
	case err != nil:
		problem = MCPNodeSDKEnv + "=" + dir + ": no @modelcontextprotocol/sdk under its node_modules (" + err.Error() + ")"
	}
	if problem != "" {
		msg := problem + ": the MCP server's Node.js client tests need the MCP TypeScript SDK, installed once (the tests never download it): " +
			"npm install --no-audit --no-fund --prefix /tmp/mcpsdk " + MCPNodeSDKPackage + " && export " + MCPNodeSDKEnv + "=/tmp/mcpsdk"
		skipUnlessRequired(t, MCPRequireEnv, msg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// skipUnlessRequired skips the test saying msg — or fails it, when the
// environment variable require is 1 (CI), where what is missing is installed.
func skipUnlessRequired(t testing.TB, require, msg string) {
	t.Helper()
	if os.Getenv(require) == "1" {
		t.Fatalf("%s (%s=1: required here)", msg, require)
	}
	t.Skip(msg)
}
