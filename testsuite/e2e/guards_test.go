package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// guardsPolicy: refunds of at most 5.00 run by rule, under one fleet budget
// of 500.00 an hour; close_ticket waits for support; ops may pause a tool.
const guardsPolicy = `approvers:
  alice: {key: %q, roles: [ops, support]}
  bob:   {key: %q, roles: [support]}
operators: [ops]
tools:
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 500", decide: allow}
  close_ticket:
    approvers: {roles: [support]}
guards:
  - {id: refund-budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 50000, window: 1h,
     reason: "the fleet refunds at most 500.00 an hour"}
  - {id: close-loop, kind: repeat, tools: [close_ticket], limit: 2, window: 10m}
`

// guardsStack is a stack whose workers run guardsPolicy, with alice's and
// bob's keys in dir.
func guardsStack(t *testing.T) (s *stack, dir, pol string) {
	s = newStack(t)
	dir = t.TempDir()
	pol = writeFile(t, dir, "policy.yaml", fmt.Sprintf(guardsPolicy, newCLIKey(t, dir, "alice"), newCLIKey(t, dir, "bob")))
	return s, dir, pol
}

// paid is the sum and number of the desk's payments on the bookings.
func (s *stack) paid(t *testing.T, bookings ...string) (sum int64, n int) {
	t.Helper()
	d := s.openDesk()
	defer d.Close()
	for _, b := range bookings {
		pays, err := d.Payments(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pays {
			sum += p.AmountCents
			n++
		}
	}
	return sum, n
}

// 200 runs refund 3.00 each at once against one budget of 500.00, though
// two workers are killed -9 and the server restarted while they go: every
// run is paid or told the guard's reason, the desk never pays past the
// budget, and the ledger counts every cent paid. A worker killed while it
// holds a lease (docs/guards.md) leaves its slice counted as spent: the
// ledger's sum is the budget used up (to within a refund, or past it by
// what it counted twice), of which the desk paid what it paid. The ledger continued as new on the way.
func TestFleetBudgetHoldsAcrossCrashesAndRestarts(t *testing.T) {
	longSuite(t)
	s, _, pol := guardsStack(t)
	flags := []string{"--policy", pol, "--ledger-updates-per-run", "100"}
	w := s.startWorkerProc("worker 1", nil, flags...)

	const runs, cents, limit = 200, 300, 50000
	// The desk refuses a refund past a booking's amount: 80 runs on BK-1
	// (240.00), 33 on BK-3 (99.00), the rest on BK-2 (450.00).
	booking := func(i int) string {
		switch {
		case i < 80:
			return "BK-1"
		case i < 113:
			return "BK-3"
		}
		return "BK-2"
	}
	ids := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		ids[i] = fmt.Sprintf("budget-%03d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.start(ids[i], workflows.RunInput{Goal: "refund 3.00",
				Planner: scripted("refunded", step(call("refund", fmt.Sprintf(`{"booking_id":%q,"amount_cents":%d}`, booking(i), cents))))})
		}()
	}
	wg.Wait()
	bookings := []string{"BK-1", "BK-2", "BK-3"}
	// A new worker fetches the ledger's whole history, and may meet the
	// server's transient "premature end of stream" on a workflow under
	// updates (temporalio/temporal#7741) a few times before it goes on: the
	// waits are generous.
	const patience = 4 * time.Minute
	waitPaid := func(n int) {
		deadline := time.Now().Add(patience)
		for {
			if _, got := s.paid(t, bookings...); got >= n {
				t.Logf("%d payments made", got)
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("%d payments after %v, want at least %d", got, patience, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPaid(30)
	w.kill() // kill -9, with reservations, refunds and settlements in flight
	w = s.startWorkerProc("worker 2", nil, flags...)
	waitPaid(80)
	w.kill()
	s.stopServer()
	s.startServer()
	s.startWorkerProc("worker 3", nil, flags...)

	var ok, denied int
	for _, id := range ids {
		res := s.result(id, patience)
		refunds := records(res.Trace, "c-1", workflows.TraceOK)
		blocked := records(res.Trace, "c-1", workflows.TraceBlocked)
		switch {
		case len(refunds) == 1:
			ok++
		case len(blocked) == 1 && blocked[0].Rule == "guard:refund-budget" && strings.HasPrefix(blocked[0].Error, plan.DeniedByLedger) &&
			strings.Contains(blocked[0].Error, "the fleet refunds at most 500.00 an hour"):
			denied++
		default:
			t.Errorf("run %s: trace %v, want c-1 ok or denied by guard refund-budget", id, events(res.Trace))
		}
	}
	sum, n := s.paid(t, bookings...)
	if most := limit / cents; ok+denied != runs || n != ok || sum != int64(ok*cents) || ok > most {
		t.Fatalf("%d runs paid, %d denied; the desk holds %d payments summing %d; want every run paid or denied, at most %d paid (%d), and the desk's payments those of the runs paid",
			ok, denied, n, sum, most, most*cents)
	}
	v, started, err := s.tg.Guards(context.Background(), workflows.TaskQueue)
	if err != nil || !started {
		t.Fatalf("toolgate guards: %v (started %v)", err, started)
	}
	var committed, reserved int64
	for _, g := range v.Guards {
		for _, sc := range g.Scopes {
			if g.ID == "refund-budget" {
				committed, reserved = committed+sc.Committed, reserved+sc.Reserved
			}
		}
	}
	// The ledger may count more than the budget after the kills (a call a
	// killed worker's lease held and another worker then committed counts
	// twice: docs/guards.md), never less than what was paid; the desk never
	// pays past the budget (checked above). A reservation a killed worker
	// sent to the ledger, whose call a lease then answered and settled on a
	// worker killed before its next renewal said so, stays reserved until
	// its window ends (docs/guards.md): counted, never freed early.
	if counted := committed + reserved; counted < sum || counted <= limit-2*cents {
		s.logSettles(t, ids)
		t.Fatalf("the ledger counts %d committed and %d reserved, want the budget used up (over %d) and at least what the desk paid (%d)",
			committed, reserved, limit-2*cents, sum)
	}
	if reserved > 0 {
		s.logSettles(t, ids)
	}
	t.Logf("the desk paid %d refunds (%d); the ledger counts %d spent and %d reserved: %d held by the killed workers' leases and reservations",
		ok, sum, committed, reserved, committed+reserved-sum)
	if first := s.ledgerFirstEvent(t, "refund-budget"); first.GetContinuedExecutionRunId() == "" {
		t.Fatalf("guard refund-budget's ledger did not continue as new (it took %d updates at 100 a run)", 2*runs)
	}
}

// ledgerFirstEvent is the start event of the current run of guard's ledger
// ("": the task queue's).
func (s *stack) ledgerFirstEvent(t *testing.T, guard string) interface{ GetContinuedExecutionRunId() string } {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	it := s.inAuthority(s.client).GetWorkflowHistory(ctx, ledger.ShardID(workflows.TaskQueue, guard), "", false, 0)
	ev, err := it.Next()
	if err != nil {
		t.Fatalf("the ledger's history: %v", err)
	}
	return ev.GetWorkflowExecutionStartedEventAttributes()
}

// The kill switch from the CLI: once `toolgate pause` returns, a call that
// waited is refused when approved — `toolgate approve` says so, exit 1 —
// and the pause shows in pending; after `toolgate
// unpause` the next approval runs. A pause signed by one who is not an
// operator is refused, and says why.
func TestPauseStopsEveryRunAndUnpauseLetsThemGoOn(t *testing.T) {
	t.Parallel()
	s, dir, pol := guardsStack(t)
	s.startWorkerProc("worker", nil, "--policy", pol)
	cli := cliAt(t, s.address())
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	const n = 3
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("pause-%d", i)
		s.start(id, workflows.RunInput{Goal: "close a ticket",
			Planner: scripted("done", step(call("close_ticket", fmt.Sprintf(`{"ticket_id":"TKT-%d","resolution":"done"}`, i))))})
		s.awaitNext(id, waitTimeout, "gate:close_ticket")
	}
	out := cli(1, "pause", "close_ticket", "--reason", "INC-7: wrong tickets closed", "--as", "bob", "--key", key("bob"))
	if !strings.Contains(out, "bob holds [support]") || !strings.Contains(out, "operators") {
		t.Fatalf("a pause by bob (not an operator): %s", out)
	}
	out = cli(0, "pause", "close_ticket", "--reason", "INC-7: wrong tickets closed", "--as", "alice", "--key", key("alice"))
	if !strings.Contains(out, "PAUSED close_ticket by alice") {
		t.Fatalf("toolgate pause: %s", out)
	}
	if out := cli(0, "pending"); !strings.Contains(out, "PAUSED fleet-wide on task queue toolgate: close_ticket, by alice") {
		t.Fatalf("toolgate pending does not show the pause:\n%s", out)
	}
	for i := 1; i <= n-1; i++ {
		id := fmt.Sprintf("pause-%d", i)
		out := cli(1, "approve", id, "c-1", "--as", "bob", "--key", key("bob"))
		if !strings.Contains(out, "c-1 close_ticket will be refused by the pause, not run: close_ticket is paused fleet-wide by alice") ||
			!strings.Contains(out, "1 call approved while its tool is paused: nothing runs until it is unpaused") {
			t.Fatalf("toolgate approve during the pause:\n%s", out)
		}
		res := s.result(id, waitTimeout)
		blocked := records(res.Trace, "c-1", workflows.TraceBlocked)
		if len(records(res.Trace, "c-1", workflows.TraceOK)) != 0 || len(blocked) != 2 ||
			!strings.Contains(blocked[1].Error, "close_ticket is paused fleet-wide by alice") || !strings.Contains(blocked[1].Error, "INC-7") {
			t.Fatalf("run %s approved during the pause: %v, want c-1 refused by the pause", id, events(res.Trace))
		}
	}
	cli(0, "unpause", "close_ticket", "--as", "alice", "--key", key("alice"))
	if out := cli(0, "guards"); !strings.Contains(out, "nothing is paused") {
		t.Fatalf("toolgate guards after the unpause:\n%s", out)
	}
	last := fmt.Sprintf("pause-%d", n)
	cli(0, "approve", last, "c-1", "--as", "bob", "--key", key("bob"))
	if res := s.result(last, waitTimeout); len(records(res.Trace, "c-1", workflows.TraceOK)) != 1 {
		t.Fatalf("run %s approved after the unpause: %v, want c-1 ok", last, events(res.Trace))
	}
}

// An agent that loops on the same destructive call is stopped at the
// repeat limit; a rejected call, and one the tool fails, give their
// reservation back.
func TestRepeatLimitAndReleases(t *testing.T) {
	t.Parallel()
	s, dir, pol := guardsStack(t)
	s.startWorkerProc("worker", nil, "--policy", pol)
	cli := cliAt(t, s.address())
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	closeIt := call("close_ticket", `{"ticket_id":"TKT-2","resolution":"again"}`)
	const id = "loop"
	s.start(id, workflows.RunInput{Goal: "close TKT-2, again and again",
		Planner: scripted("done", step(closeIt), step(closeIt), step(closeIt))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	cli(0, "reject", id, "c-1", "--reason", "not yet", "--as", "bob", "--key", key("bob"))
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	cli(0, "approve", id, "c-2", "--as", "bob", "--key", key("bob"))
	res := s.result(id, waitTimeout)
	if len(records(res.Trace, "c-1", workflows.TraceReleased)) != 1 {
		t.Errorf("the rejected call c-1: %v, want its reservation released", events(res.Trace))
	}
	if len(records(res.Trace, "c-2", workflows.TraceOK)) != 1 {
		t.Errorf("c-2: %v, want ok", events(res.Trace))
	}
	blocked := records(res.Trace, "c-3", workflows.TraceBlocked)
	if len(blocked) != 1 || blocked[0].Rule != "guard:close-loop" || !strings.Contains(blocked[0].Error, "3rd time within 10m") {
		t.Fatalf("the third close of TKT-2: %v, want it stopped by guard close-loop", events(res.Trace))
	}

	// A refund the desk refuses (no such booking) ran and failed: released,
	// and the ledger holds nothing for it.
	const failing = "refund-fails"
	s.start(failing, workflows.RunInput{Goal: "refund a booking that does not exist",
		Planner: scripted("done", step(call("refund", `{"booking_id":"BK-404","amount_cents":500}`)))})
	res = s.result(failing, waitTimeout)
	if len(records(res.Trace, "c-1", workflows.TraceError)) != 1 || len(records(res.Trace, "c-1", workflows.TraceReleased)) != 1 {
		t.Fatalf("%s: %v, want c-1 failed and released", failing, events(res.Trace))
	}
	v, _, err := s.tg.Guards(context.Background(), workflows.TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range v.Guards {
		for _, sc := range g.Scopes {
			if g.ID == "refund-budget" && (sc.Committed != 0 || sc.Reserved != 0) {
				t.Fatalf("refund-budget after a failed refund: %+v, want nothing counted", sc)
			}
		}
	}
}

// A refund approved, paid and then rewound to before it is proposed again
// with the same arguments: re-approved, it pays once (the desk's key) and
// the ledger counts it once, though the run's own state was rolled back.
func TestRewoundRunReapprovedPaysAndCountsOnce(t *testing.T) {
	t.Parallel()
	s, dir, pol := guardsStack(t)
	s.startWorkerProc("worker", nil, "--policy", pol)
	cli := cliAt(t, s.address())
	as := func(who string) []string { return []string{"--as", who, "--key", filepath.Join(dir, who+".key")} }
	plan := writeFile(t, dir, "plan.json", `{"goal":"refund 9.00 on BK-1","planner":{"kind":"scripted","answer":"done",
  "turns":[[{"tool":"refund","args":{"booking_id":"BK-1","amount_cents":900}}]]}}`)
	const id = "guard-rewind"
	cli(0, "run", "--id", id, "--plan", plan)
	s.awaitCalls(id, "c-1")
	cli(0, append([]string{"approve", id, "c-1"}, as("bob")...)...)
	if res := s.result(id, waitTimeout); len(records(res.Trace, "c-1", workflows.TraceOK)) != 1 {
		t.Fatalf("before the rewind: %v", events(res.Trace))
	}
	out := cli(0, "rewind", id, "--to", "c-1", "--dry-run")
	m := regexp.MustCompile(`(?m)^digest: ([0-9a-f]{64})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("toolgate rewind --dry-run:\n%s", out)
	}
	cli(0, append([]string{"rewind", id, "--to", "c-1", "--expect", m[1]}, as("alice")...)...)
	s.awaitCalls(id, "c-1")
	cli(0, append([]string{"approve", id, "c-1"}, as("bob")...)...)
	res := s.result(id, waitTimeout)
	if len(records(res.Trace, "c-1", workflows.TraceOK)) != 1 {
		t.Fatalf("after the rewind: %v", events(res.Trace))
	}
	reserved := records(res.Trace, "c-1", workflows.TraceReserved)
	if len(reserved) == 0 || !strings.Contains(reserved[0].Reason, "counted once") {
		t.Errorf("the rewound run's reservation: %+v, want it known to the ledger (counted once)", reserved)
	}
	if sum, n := s.paid(t, "BK-1"); n != 1 || sum != 900 {
		t.Fatalf("BK-1 holds %d payments summing %d, want the one of 900", n, sum)
	}
	v, _, err := s.tg.Guards(context.Background(), workflows.TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range v.Guards {
		for _, sc := range g.Scopes {
			if g.ID == "refund-budget" && (sc.Committed != 900 || sc.Reserved != 0) {
				t.Fatalf("refund-budget after the rewind: %+v, want 900 committed once", sc)
			}
		}
	}
}

// logSettles names, for a failure's diagnosis, each reservation the ledger
// still holds and, for the run whose local activities answered that call,
// the answers its history holds (a marker's answer names its entry).
func (s *stack) logSettles(t *testing.T, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	res, err := s.inAuthority(s.client).QueryWorkflow(ctx, ledger.ShardID(workflows.TaskQueue, "refund-budget"), "", ledger.QueryState)
	var st ledger.State
	if err == nil {
		err = res.Get(&st)
	}
	if err != nil {
		t.Logf("the ledger's state: %v", err)
		return
	}
	open := map[string]ledger.Entry{}
	for _, e := range st.Entries {
		if !e.Committed && !e.Released {
			open[e.Key] = e
		}
	}
	t.Logf("the ledger holds %d entries, %d open; %d leases", len(st.Entries), len(open), len(st.Leases))
	for _, id := range ids {
		it := s.client.GetWorkflowHistory(ctx, id, "", false, 0)
		var answers []string
		held := false
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			m := ev.GetMarkerRecordedEventAttributes()
			if m == nil {
				continue
			}
			for _, d := range m.GetDetails() {
				text := ""
				for _, p := range d.GetPayloads() {
					text += string(p.GetData())
				}
				if !strings.Contains(text, "entry") && !strings.Contains(text, "ledger") {
					continue
				}
				for key := range open {
					if strings.Contains(text, key) {
						held = true
					}
				}
				answers = append(answers, fmt.Sprintf("event %d: %.400s", ev.GetEventId(), text))
			}
		}
		if held {
			t.Logf("run %s holds an open entry; its markers: %s", id, strings.Join(answers, " | "))
		}
	}
}
