package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/replay"
)

// The end-to-end tests that matter for persistence, again with the embedded
// server on PostgreSQL (history and visibility) and the desk in PostgreSQL:
// the walk-through, continue-as-new, a server restart mid-run (memo intact),
// and workers killed -9 while runs wait and right after a side effect.
// Skipped without PostgreSQL (pgtest), failed under TOOLGATE_REQUIRE_POSTGRES=1.
func TestOnPostgres(t *testing.T) {
	longSuite(t)
	t.Parallel()
	for name, test := range map[string]func(*testing.T, *stack){
		"walk-through":                  testSeedWalkThroughThroughTheClientAPI,
		"continue-as-new, replayed":     testContinueAsNewReplayed,
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

// testContinueAsNewReplayed is the continue-as-new session, then every run of
// its chain read back from the server (PostgreSQL) and replayed against
// AgentRun, as `toolgate replay` does with an exported history.
func testContinueAsNewReplayed(t *testing.T, s *stack) {
	testSessionContinueAsNewOnARealHistory(t, s)
	const id = "session-can"
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	chain := runChain(t, s, id, desc.GetWorkflowExecutionInfo().GetFirstRunId())
	if len(chain) < 2 {
		t.Fatalf("%d runs in the chain, want it continued as new", len(chain))
	}
	for _, r := range chain {
		var h historypb.History
		it := s.client.GetWorkflowHistory(ctx, id, r.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of run %s: %v", r.runID, err)
			}
			h.Events = append(h.Events, ev)
		}
		b, err := protojson.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), r.runID+".json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := replay.File(path); err != nil {
			t.Fatalf("run %s (%d events): %v", r.runID, len(h.Events), err)
		}
	}
	t.Logf("replayed %d runs of %s from PostgreSQL", len(chain), id)
}
