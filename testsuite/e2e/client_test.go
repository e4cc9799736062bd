package e2e

import (
	"context"
	"errors"
	"testing"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// toolgate's client on the real server: every refusal a caller must tell
// apart comes back as its typed error, and nothing refused changes the run.
func TestClientRefusalsAreTyped(t *testing.T) {
	s := newStack(t)
	s.startWorker(false)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	is := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}

	_, err := s.tg.State(ctx, "no-such-run")
	is("state of an unknown run", err, tgclient.ErrUnknownRun)
	_, err = s.tg.Start(ctx, "bad-input", workflows.RunInput{Goal: "x", Planner: scripted("x"), Approval: "maybe"})
	is("start with an unknown approval", err, tgclient.ErrRefusedInput)
	_, err = s.tg.Start(ctx, "bad-input", workflows.RunInput{Goal: "x", Planner: scripted("x"), Approval: workflows.PolicyAlwaysApprove})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.tg.Result(ctx, "bad-input")
	is("always_approve on a worker that does not allow it", err, tgclient.ErrRefusedInput)

	const id = "client-typed"
	s.start(id, workflows.RunInput{Goal: "close them", Planner: scripted("closed",
		step(call("close_ticket", `{"ticket_id":"TKT-3"}`)), step(call("close_ticket", `{"ticket_id":"TKT-2"}`)))})
	_, err = s.tg.Start(ctx, id, workflows.RunInput{Goal: "again", Planner: scripted("x")})
	is("a second start under a running id", err, tgclient.ErrRefusedInput)
	st := s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout)
	it := st.Interrupts[0]
	_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: "c-7", Approver: "x", ArgsDigest: it.ArgsDigest})
	is("a call not proposed", err, tgclient.ErrUnknownCall)
	_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: it.CallID, Approver: "x", ArgsDigest: "beef"})
	is("another digest", err, tgclient.ErrDigestMismatch)
	_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: it.CallID, Approver: "x"})
	is("no digest", err, tgclient.ErrRefusedInput)
	_, err = s.tg.Decide(ctx, "no-such-run", true, workflows.DecisionInput{CallID: "c-1", Approver: "x", ArgsDigest: it.ArgsDigest})
	is("a decision for an unknown run", err, tgclient.ErrUnknownRun)

	outs, err := s.tg.Approve(ctx, id, tgclient.As("alice"), it.CallID, "c-9")
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Err != nil || outs[0].Result.Decision != workflows.TraceApproved || outs[0].Interrupt.ArgsDigest != it.ArgsDigest {
		t.Errorf("approve %s: %+v, want approved, bound to %s", it.CallID, outs[0], it.ArgsDigest)
	}
	is("c-9 in the same approve", outs[1].Err, tgclient.ErrUnknownCall)
	if n := tgclient.Refused(outs); n != 1 {
		t.Errorf("%d refused, want 1", n)
	}
	testenv.Eventually(t, waitTimeout, "c-2 waiting", func() error {
		st, err := s.state(id)
		if err == nil && (len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-2") {
			err = errors.New("c-2 not waiting yet")
		}
		return err
	})
	_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: it.CallID, Approver: "x", ArgsDigest: it.ArgsDigest})
	is("a decided call", err, tgclient.ErrAlreadyDecided)
	if _, err := s.tg.Reject(ctx, id, tgclient.Decider{Approver: "bob", Text: "not that one"}, "c-2"); err != nil {
		t.Fatal(err)
	}
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
}
