package e2e

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/audit"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// honestGuards puts a budget on trust3Policy's refunds.
const honestGuards = `guards:
  - {id: refund-budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 100000, window: 1h}
`

// An honest run, acted on by persons (no credential) as on `toolgate dev`:
// alice closes a ticket, bob approves a guarded refund, dave rewinds the run
// to the refund and carol approves it again (it pays once), erin forks it
// at the refund and bob approves the fork's. `toolgate audit --server`
// verifies every run of both chains and the authority namespace — claims,
// the rewind's record, the fleet ledger — with nothing unvouched.
func TestAnHonestRunVerifiesInBothNamespaces(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s, person := newTrust5Stack(t, trust3PolicyWith(t, k, honestGuards))
	const id, fork = "trust5-honest", "trust5-honest-fork"
	s.closeThenRefund(id, k, "TKT-1", "BK-1", 2500)
	s.signedDecide(id, k, "bob", true, "c-2")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the run: %+v", res)
	}
	s.rewindBy(id, "c-2", k, "dave")
	s.awaitCalls(id, "c-2")
	s.signedDecide(id, k, "carol", true, "c-2")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted || len(s.payments("BK-1")) != 1 {
		t.Fatalf("after the rewind: %s, payments %v (want one: the same call, the same key)", res.Status, s.payments("BK-1"))
	}
	if _, err := s.tg.Fork(rewindCtx(t), id, "c-2", fork, nil, tgclient.Operator{Name: "erin", Key: k["erin"]}); err != nil {
		t.Fatal(err)
	}
	s.awaitCalls(fork, "c-2")
	s.signedDecide(fork, k, "bob", true, "c-2")
	if res := s.result(fork, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the fork: %+v", res)
	}
	if v, ok, err := s.tg.Guards(rewindCtx(t), workflows.TaskQueue); err != nil || !ok || len(v.Guards) != 1 {
		t.Fatalf("the fleet ledger: %+v (started %v): %v", v, ok, err)
	}

	for _, wid := range []string{id, fork} {
		reps := s.auditRuns(person, wid)
		if len(reps) == 0 {
			t.Fatalf("no run of %s audited", wid)
		}
		for run, rep := range reps {
			if f, m, u := rep.Failed(), rep.Mismatches(), rep.Unvouched(); len(f)+len(m)+len(u) != 0 || !rep.Principals {
				t.Errorf("%s/%s: failed %+v, mismatches %+v, unvouched %+v (principals %v)", wid, run, f, m, u, rep.Principals)
			}
		}
	}
	var kinds []string
	for _, rep := range s.auditRuns(person, id) {
		for _, e := range rep.Entries {
			kinds = append(kinds, e.Kind)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	auth, err := audit.Namespace(ctx, person, s.authorityNamespace(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !auth.Principals || auth.Executions < 5 || len(auth.Unvouched) != 0 {
		t.Fatalf("the authority namespace: %d executions, principals %v, unvouched %+v", auth.Executions, auth.Principals, auth.Unvouched)
	}
	t.Logf("audited: %d executions of the authority namespace, %d of its events written by a call; the rewound chain's entries %v", auth.Executions, auth.Events, kinds)
}
