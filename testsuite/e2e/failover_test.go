package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// newDevProcStack starts `toolgate dev --db POSTGRES --no-worker` (the server
// only, as a subprocess) on a fresh database, with the desk in another, and
// dials it. Workers are started with startWorkerProc.
func newDevProcStack(t *testing.T) (*stack, *proc) {
	t.Helper()
	s := &stack{t: t, dataDir: t.TempDir(), sdkLog: &syncBuffer{},
		serverDB: pgtest.FreshDB(t, "srv"), deskDB: pgtest.FreshDB(t, "desk")}
	dev := startProc(t, "toolgate dev", nil, "dev", "--db", s.serverDB, "--no-worker",
		"--address", "127.0.0.1:0", "--data", s.dataDir)
	ready := regexp.MustCompile(`(?m)^ready (\S+)$`)
	testenv.Eventually(t, startTimeout, "toolgate dev --db … --no-worker ready", func() error {
		if dev.exited() {
			t.Fatalf("toolgate dev exited: %v\n%s", dev.waitErr, dev.out.String())
		}
		m := ready.FindStringSubmatch(dev.out.String())
		if m == nil {
			return fmt.Errorf("no ready line yet")
		}
		s.external = m[1]
		return nil
	})
	s.dialExternal()
	return s, dev
}

// Failover on PostgreSQL: one server (`toolgate dev --db … --no-worker`),
// workers as separate processes sharing the desk's PostgreSQL database.
// Fifty runs each propose a refund and wait at the gate; `toolgate pending`
// lists all fifty through PostgreSQL visibility. Worker A is killed -9 while
// the runs wait; worker C starts; 45 calls are approved (by signal and by
// update, at once) and 5 rejected; worker B kills itself -9 right after its
// first refund commits, with other calls in flight. Every run completes on
// the remaining worker, and the desk holds exactly one payment per approved
// call and none for a rejected one.
func TestFailoverOnPostgres(t *testing.T) {
	longSuite(t)
	t.Parallel()
	const n, rejected = 50, 5
	s, _ := newDevProcStack(t)
	// The workers poll with the worker token dev wrote (a client without it
	// is a person's); s.client, a person's, starts, decides and reads.
	token := "TOOLGATE_TOKEN_FILE=" + filepath.Join(s.dataDir, "auth", devserver.WorkerTokenFile)
	a := s.startWorkerProc("worker A", []string{token})
	b := s.startWorkerProc("worker B (dies after its first refund commits)", []string{token, "TOOLGATE_FAULT_CRASH_AFTER_COMMIT=refund"})

	id := func(i int) string { return fmt.Sprintf("failover-%02d", i) }
	for i := range n {
		s.start(id(i), workflows.RunInput{Goal: "refund one euro",
			Planner: scripted("done", step(call("refund", `{"booking_id":"BK-2","amount_cents":100,"reason":"failover"}`)))})
	}
	// The approvals inbox, through the CLI and PostgreSQL visibility.
	var inbox []tgclient.PendingCall
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("toolgate pending lists %d calls", n), func() error {
		out, code := runCLI(t, waitTimeout, "pending", "--json", "--all", "--address", s.address())
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		inbox = nil
		if err := json.Unmarshal([]byte(out), &inbox); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(inbox) != n {
			return fmt.Errorf("%d pending calls", len(inbox))
		}
		return nil
	})

	a.kill()
	if err := a.wait(t, 10*time.Second); !killedBySIGKILL(err) {
		t.Fatalf("worker A exit: %v, want killed by SIGKILL", err)
	}
	s.startWorkerProc("worker C", []string{token})

	decide := sync.WaitGroup{}
	errs := make([]error, n)
	for i, pc := range inbox {
		in := workflows.DecisionInput{CallID: pc.CallID, Approver: "op", ArgsDigest: pc.ArgsDigest, Kind: pc.Kind}
		decide.Go(func() {
			switch {
			case i < rejected:
				in.Reason = "not this one"
				errs[i] = s.client.SignalWorkflow(context.Background(), pc.RunID, "", workflows.SignalReject, in)
			case i%2 == 0:
				errs[i] = s.client.SignalWorkflow(context.Background(), pc.RunID, "", workflows.SignalApprove, in)
			default:
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				_, errs[i] = s.tg.Decide(ctx, pc.RunID, true, in)
			}
		})
	}
	decide.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("deciding %s: %v", inbox[i].RunID, err)
		}
	}
	if err := b.wait(t, 2*time.Minute); !killedBySIGKILL(err) {
		t.Fatalf("worker B exit: %v, want killed by SIGKILL after a refund committed", err)
	}

	wantPaid := map[string]bool{} // idempotency keys of the approved calls
	retried := 0
	for i, pc := range inbox {
		res := s.result(pc.RunID, 2*time.Minute)
		if res.Status != workflows.StatusCompleted {
			t.Fatalf("%s: %+v, want completed", pc.RunID, res)
		}
		status := workflows.TraceOK
		if i < rejected {
			status = workflows.TraceRejected
		} else {
			wantPaid[s.key(pc.RunID, pc.CallID)] = true
		}
		recs := records(res.Trace, pc.CallID, status)
		if len(recs) != 1 {
			t.Fatalf("%s: trace %v, want one %s record for %s", pc.RunID, events(res.Trace), status, pc.CallID)
		}
		if recs[0].Attempts > 1 {
			retried++
		}
	}
	t.Logf("%d approved refunds were retried after a worker died", retried)

	pays, err := s.openDesk().Payments(context.Background(), "BK-2")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range pays {
		seen[p.IdempotencyKey]++
	}
	for k, c := range seen {
		if c != 1 || !wantPaid[k] {
			t.Errorf("payment key %s: %d payments, approved %v; want exactly one per approved call", k, c, wantPaid[k])
		}
	}
	if len(pays) != n-rejected || len(seen) != len(wantPaid) {
		t.Fatalf("%d payments under %d keys, want %d: one per approved call", len(pays), len(seen), n-rejected)
	}
}
