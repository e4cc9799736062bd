package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/pgtest"
)

// The end-to-end tests that matter for persistence, again with the embedded
// server on PostgreSQL (history and visibility) and the desk in PostgreSQL:
// the walk-through, continue-as-new, a server restart mid-run (memo intact),
// and workers killed -9 while runs wait and right after a side effect.
// Skipped without PostgreSQL (pgtest), failed under TOOLGATE_REQUIRE_POSTGRES=1.
func TestOnPostgres(t *testing.T) {
	t.Parallel()
	for name, test := range map[string]func(*testing.T, *stack){
		"walk-through":                  testSeedWalkThroughThroughTheClientAPI,
		"continue-as-new":               testSessionContinueAsNewOnARealHistory,
		"server restart mid-run":        testServerRestartMidRun,
		"worker killed while waiting":   testWorkerCrashWhileWaiting,
		"worker killed after an effect": testWorkerCrashAfterSideEffect,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, newPGStack(t))
		})
	}
}

// newPGStack is newStack on PostgreSQL: the embedded server on a fresh
// database of the test server (pgtest), and the desk on another, which every
// worker of the test, in-process or not, shares. Without PostgreSQL the test
// is skipped (fails under TOOLGATE_REQUIRE_POSTGRES=1).
func newPGStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{t: t, dataDir: t.TempDir(), sdkLog: &syncBuffer{},
		serverDB: pgtest.FreshDB(t, "srv"), deskDB: pgtest.FreshDB(t, "desk")}
	t.Cleanup(func() {
		if t.Failed() && s.sdkLog.Len() > 0 {
			t.Logf("SDK log:\n%s", s.sdkLog.String())
		}
	})
	s.startServer()
	return s
}

// sql returns query (with ? placeholders) for the desk's database: $1, $2, …
// on PostgreSQL.
func (s *stack) sql(query string) string {
	if s.deskDB == "" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
