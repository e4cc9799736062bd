package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Item 3 of issue 44, and the audit of both namespaces: a rewind is carried
// out by a worker on an operator's signed request and recorded in the
// authority namespace; a reset no record covers takes no note, grants
// nobody anything, and `toolgate audit --server` names it. The operator and
// the attacker are persons (no credential): both may reset runs in the
// runs' namespace, as on `toolgate dev`.

// recordsOf reads rewind records from the stack's authority namespace over
// c (a person may read it).
func (s *stack) recordsOf(c client.Client) audit.RecordReader {
	ac := s.inAuthority(c)
	return func(reset string) (workflows.RewindRecord, error) {
		var rec workflows.RewindRecord
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		err := authority.Lookup(ctx, ac, s.authorityNamespace(), workflows.RewindRecordPrefix+reset, &rec)
		return rec, err
	}
}

// auditRuns audits every run of workflow id as `toolgate audit --server`
// does, reading over c: run id -> report.
func (s *stack) auditRuns(c client.Client, id string) map[string]audit.Report {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	runs, _, err := audit.Runs(ctx, c, devserver.DefaultNamespace, []string{id}, 0, nil, audit.WithRewindRecords(s.recordsOf(c)))
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]audit.Report{}
	for _, r := range runs {
		if r.Err != nil {
			s.t.Fatalf("auditing run %s of %s: %v", r.RunID, id, r.Err)
		}
		out[r.RunID] = r.Report
	}
	return out
}

// closedTicket runs id to its end: alice approves closing TKT-2.
func (s *stack) closedTicket(id string, k keyring) {
	s.t.Helper()
	s.start(id, workflows.RunInput{Goal: "close TKT-2", Planner: scripted("done", step(call("close_ticket", `{"ticket_id":"TKT-2"}`)))})
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		s.t.Fatalf("run %s: %+v", id, res)
	}
}

// Dave's rewind, sent by a person's client, is carried out by a worker:
// the worker resets the run (the server says so: the reset's principal is
// a worker's), records the rewind in the authority namespace, and the run
// takes dave's note. The audit of both namespaces passes; the same audit of
// the runs' namespace, where persons write, names their events.
func TestARewindIsCarriedOutByAWorkerAndRecorded(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s, person := newTrust5Stack(t, trust3Policy(t, k))
	const id = "trust5-rewind"
	s.closedTicket(id, k)
	rw := s.rewindBy(id, "c-1", k, "dave")
	note := noteIn(t, rewindNoteOf(t, s.history(id, rw.RunID)))

	rec, err := s.recordsOf(person)(note.Reset)
	if err != nil {
		t.Fatalf("the rewind's record: %v", err)
	}
	if rec.NewRunID != rw.RunID || rec.WorkflowID != id || rec.BaseRunID != rw.Preview.BaseRunID || rec.Event != rw.Preview.ResetEvent || rec.By != "dave" || !rec.Signed {
		t.Fatalf("the rewind's record %+v, want dave's signed rewind of %s (run %s at event %d) into run %s", rec, id, rw.Preview.BaseRunID, rw.Preview.ResetEvent, rw.RunID)
	}
	for _, ev := range s.history(id, rw.RunID).GetEvents() {
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW && ev.GetPrincipal().GetType() != principal.Worker {
			t.Fatalf("the reset's principal is %v, want a worker's: the worker carries the rewind out", ev.GetPrincipal())
		}
	}
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("after the rewind: %+v", res)
	}

	reps := s.auditRuns(person, id)
	rep, ok := reps[rw.RunID]
	if len(reps) != 2 || !ok {
		t.Fatalf("audited runs %v, want the first run and %s", slices.Collect(maps.Keys(reps)), rw.RunID)
	}
	if f, u := rep.Failed(), rep.Unvouched(); len(f) != 0 || len(u) != 0 || !rep.Principals {
		t.Fatalf("the rewound run's audit: failed %+v, unvouched %+v (principals %v)", f, u, rep.Principals)
	}
	rewound := false
	for _, e := range rep.Entries {
		rewound = rewound || (e.Kind == audit.KindRewind && e.Verified && e.Applied && e.Approver == "dave")
	}
	if !rewound {
		t.Fatalf("the audit shows no verified rewind by dave: %+v", rep.Entries)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	auth, err := audit.Namespace(ctx, person, s.authorityNamespace(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !auth.Principals || auth.Executions == 0 || auth.Events == 0 || len(auth.Unvouched) != 0 {
		t.Fatalf("the authority namespace's audit: %d executions, %d events, principals %v, unvouched %+v", auth.Executions, auth.Events, auth.Principals, auth.Unvouched)
	}
	// The same check of the runs' namespace names what persons wrote there:
	// the rewind's request, which dave's client started.
	runs, err := audit.Namespace(ctx, person, devserver.DefaultNamespace, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, x := range runs.Unvouched {
		named = named || (x.WorkflowID == workflows.RewindWorkflowID(note.Reset) && x.EventType == "WorkflowExecutionStarted" &&
			x.PrincipalType == principal.Person && strings.Contains(x.Problem, `person "anonymous", neither a worker nor the server`))
	}
	if !named {
		t.Fatalf("the runs' namespace audited as the authority one: unvouched %+v, want the rewind request's start by person anonymous", runs.Unvouched)
	}
}

// A rewind request waits for a worker (none polls the queue it was sent
// to), and anyone may read it: the attacker copies dave's signed note from
// it, resets the run as the note says with dave's reason and reset id, and
// sends the note to the run that reset made. No worker recorded that reset:
// the run refuses the note, waits for a new approval of the call it was
// reset to, and the audit names the reset — no record covers it, a person
// made it.
func TestAResetNoWorkerRecordedTakesNoNote(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s, attacker := newTrust5Stack(t, trust3Policy(t, k))
	const id = "trust5-copied-rewind"
	s.closedTicket(id, k)
	p, err := s.tg.RewindPreview(rewindCtx(t), id, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	reset := hex.EncodeToString(b)
	note := workflows.RewindNote{CallID: "c-1", Tool: p.Tool, Step: p.Step, BaseRunID: p.BaseRunID, Event: p.ResetEvent, Preview: p.Digest, By: "dave", Reset: reset,
		Token: k.sign(t, signed.Claims{Approver: "dave", WorkflowID: id, Action: signed.ActionRewind, CallID: "c-1", Source: p.BaseRunID, Preview: p.Digest, Reset: reset})}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := attacker.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.RewindWorkflowID(reset), TaskQueue: "no-worker-polls-this"},
		workflows.RewindWorkflow, workflows.RewindRequest{WorkflowID: id, Note: note}); err != nil {
		t.Fatalf("dave's rewind request: %v", err)
	}

	// The attacker reads the request and carries it out itself.
	var copied workflows.RewindRequest
	it := attacker.GetWorkflowHistory(ctx, workflows.RewindWorkflowID(reset), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &copied); err != nil || copied.Note.Token == "" {
		t.Fatalf("the request's input: %v (%+v)", err, copied)
	}
	resp, err := attacker.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: devserver.DefaultNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: copied.Note.BaseRunID},
		Reason:                    fmt.Sprintf("toolgate rewind to just before c-1 (step %d) by dave, preview %s, %s", copied.Note.Step, copied.Note.Preview, workflows.ResetMark(copied.Note.Reset)),
		WorkflowTaskFinishEventId: copied.Note.Event, RequestId: copied.Note.Reset, ResetReapplyExcludeTypes: noReapply})
	if err != nil {
		t.Fatalf("the attacker's reset: %v", err)
	}
	if err := attacker.SignalWorkflow(ctx, id, resp.GetRunId(), workflows.SignalRewound, copied.Note); err != nil {
		t.Fatal(err)
	}
	s.awaitRefused(id, workflows.SignalRewound, "no worker recorded carrying out the reset that made this run")
	if got := records(s.mustTrace(id), "c-1", workflows.TraceRewound); len(got) != 0 {
		t.Fatalf("the run took the copied note: %+v", got)
	}
	// It grants nobody anything: the reset run asks for the call again.
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("after the attacker's reset: %+v", res)
	}

	rep, ok := s.auditRuns(attacker, id)[resp.GetRunId()]
	if !ok {
		t.Fatalf("no audit of the attacker's run %s", resp.GetRunId())
	}
	var reset1 []audit.Entry
	for _, e := range rep.Failed() {
		if e.Kind == audit.KindReset && strings.Contains(e.Problem, "no worker's record covers it: the authority namespace holds no "+workflows.RewindRecordPrefix+reset) {
			reset1 = append(reset1, e)
		}
	}
	if len(reset1) != 1 {
		t.Fatalf("the audit fails %+v, want the attacker's reset named as covered by no record", rep.Failed())
	}
	unvouched := rep.Unvouched()
	if len(unvouched) != 1 || unvouched[0].PrincipalType != principal.Person || !strings.Contains(unvouched[0].What, "reset of run "+p.BaseRunID) {
		t.Fatalf("unvouched events %+v, want the attacker's reset, a person's", unvouched)
	}
	if _, err := s.recordsOf(attacker)(reset); !errors.Is(err, authority.ErrNoRecord) {
		t.Fatalf("a record of the attacker's reset: %v", err)
	}
}
