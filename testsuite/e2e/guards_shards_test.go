package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// shardsPolicy: refunds of at most 5.00 run by rule, under a budget of
// 500.00 and a rate of two refunds an hour; ops may pause a tool.
const shardsPolicy = `approvers:
  alice: {key: %q, roles: [ops, support]}
operators: [ops]
tools:
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 500", decide: allow}
guards:
  - {id: refund-budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 50000, window: 1h}
  - {id: refund-pace, kind: rate, tools: [refund], limit: 2, window: 1h, reason: "two refunds an hour"}
`

// Each guard counts in a ledger of its own, and the task queue's ledger
// keeps the pauses and counts nothing: a refund counts toward both guards'
// ledgers; the third is refused by the rate, and the budget's ledger lets
// its reservation go, so the budget counts only the two refunds paid.
func TestEachGuardCountsInALedgerOfItsOwn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(shardsPolicy, newCLIKey(t, dir, "alice")))
	s.startWorkerProc("worker", nil, "--policy", pol)

	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("shards-%d", i)
		s.start(id, workflows.RunInput{Goal: "refund 1.00", Planner: scripted("done",
			step(call("refund", fmt.Sprintf(`{"booking_id":"BK-%d","amount_cents":100}`, i))))})
		res := s.result(id, waitTimeout)
		ok, blocked := records(res.Trace, "c-1", workflows.TraceOK), records(res.Trace, "c-1", workflows.TraceBlocked)
		switch {
		case i < 3 && len(ok) != 1:
			t.Fatalf("run %s: %v, want c-1 ok", id, events(res.Trace))
		case i == 3 && (len(ok) != 0 || len(blocked) != 1 || blocked[0].Rule != "guard:refund-pace" || !strings.Contains(blocked[0].Error, "two refunds an hour")):
			t.Fatalf("run %s: %v, want c-1 refused by guard refund-pace", id, events(res.Trace))
		}
	}
	if sum, n := s.paid(t, "BK-1", "BK-2", "BK-3"); n != 2 || sum != 200 {
		t.Fatalf("the desk holds %d payments summing %d, want 2 summing 200", n, sum)
	}

	// Each guard's use is in its own ledger; toolgate guards gathers them.
	want := map[string]int64{"refund-budget": 200, "refund-pace": 2}
	testenv.Eventually(t, waitTimeout, "each guard's count", func() error {
		v, ok, err := s.tg.Guards(context.Background(), workflows.TaskQueue)
		if err != nil || !ok {
			return fmt.Errorf("guards: %v (started %v)", err, ok)
		}
		if len(v.Guards) != 2 {
			return fmt.Errorf("guards %+v, want two", v.Guards)
		}
		for _, g := range v.Guards {
			if len(g.Scopes) != 1 || g.Scopes[0] != (ledger.ScopeView{Scope: "all", Committed: want[g.ID]}) {
				return fmt.Errorf("guard %s: %+v, want %d committed, none reserved or leased", g.ID, g.Scopes, want[g.ID])
			}
		}
		return nil
	})
	ac := s.inAuthority(s.client)
	for _, g := range []string{"refund-budget", "refund-pace"} {
		d, err := ac.DescribeWorkflowExecution(context.Background(), ledger.ShardID(workflows.TaskQueue, g), "")
		if err != nil {
			t.Fatalf("guard %s's ledger: %v", g, err)
		}
		if typ := d.GetWorkflowExecutionInfo().GetType().GetName(); typ != ledger.WorkflowName {
			t.Fatalf("guard %s's ledger runs %s", g, typ)
		}
	}
	res, err := ac.QueryWorkflow(context.Background(), ledger.ID(workflows.TaskQueue), "", ledger.QueryState)
	if err != nil {
		t.Fatalf("the task queue's ledger: %v", err)
	}
	var st ledger.State
	if err := res.Get(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Entries) != 0 || len(st.Used) != 0 {
		t.Fatalf("the task queue's ledger holds %d entries and %d spent slices, want none: it counts no guard", len(st.Entries), len(st.Used))
	}
}
