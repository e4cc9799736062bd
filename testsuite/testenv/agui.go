package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// The AG-UI TypeScript client, the client the AG-UI end-to-end tests drive
// from Node.js (testsuite/e2e/testdata/aguiclient.cjs): .ci/run installs it
// with npm outside the clone, names its directory in AGUIClientEnv and sets
// AGUIRequireEnv.
const (
	// AGUIClientEnv names the npm prefix directory that holds
	// node_modules/@ag-ui/client.
	AGUIClientEnv = "TOOLGATE_AGUI_NODE_CLIENT"
	// AGUIRequireEnv=1 makes a missing client a failure (CI).
	AGUIRequireEnv = "TOOLGATE_REQUIRE_AGUI"
	// AGUIClientPackage is the npm package and the version the tests expect.
	AGUIClientPackage = "@ag-ui/client@1.0.0"
)

// AGUIClient returns the directory $TOOLGATE_AGUI_NODE_CLIENT names, in
// which node_modules holds @ag-ui/client. Without one the test is skipped,
// saying how to install it — or fails, when $TOOLGATE_REQUIRE_AGUI is 1.
func AGUIClient(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(AGUIClientEnv)
	problem := ""
	switch _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json")); {
	case dir == "":
		problem = AGUIClientEnv + " is not set"
	case err != nil:
		problem = AGUIClientEnv + "=" + dir + ": no @ag-ui/client under its node_modules (" + err.Error() + ")"
	}
	if problem != "" {
		msg := problem + ": the AG-UI tests need the AG-UI TypeScript client, installed once (the tests never download it): " +
			"npm install --no-audit --no-fund --prefix /tmp/agui-npm " + AGUIClientPackage + " && export " + AGUIClientEnv + "=/tmp/agui-npm"
		skipUnlessRequired(t, AGUIRequireEnv, msg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
