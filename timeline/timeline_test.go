package timeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

func ev(id int64, t enumspb.EventType, task int64) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventId: id, EventType: t}
	switch t {
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{WorkflowTaskCompletedEventId: task}}
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		e.Attributes = &historypb.HistoryEvent_TimerStartedEventAttributes{TimerStartedEventAttributes: &historypb.TimerStartedEventAttributes{WorkflowTaskCompletedEventId: task}}
	}
	return e
}

// A running run's history is cut after its last completed workflow task —
// that task's commands kept, since a replay matches them — and before what
// the workflow has not seen yet; a closed run's is kept whole.
func TestReplayableKeepsTheLastTasksCommands(t *testing.T) {
	events := []*historypb.HistoryEvent{
		ev(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0),
		ev(2, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0),
		ev(3, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0),
		ev(4, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 0),
		ev(5, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 4),
		ev(6, enumspb.EVENT_TYPE_TIMER_STARTED, 4),
		ev(7, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 0),
		ev(8, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0),
		ev(9, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0),
	}
	if got := replayable(events); len(got) != 6 {
		t.Fatalf("cut after event %d, want after 6 (the last task's commands kept)", got[len(got)-1].GetEventId())
	}
	closed := append(events[:6:6], ev(7, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, 4))
	if got := replayable(closed); len(got) != 7 {
		t.Fatalf("a closed history was cut to %d events", len(got))
	}
	if got := replayable(events[:3]); got != nil {
		t.Fatalf("no task completed: %d events kept, want none", len(got))
	}
}

func signal(id int64, name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{
			WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name}}}
}

// The preview sorts the calls after the point: a destructive call that ran
// stays done, a read that ran runs again, a human's decision is dropped (a
// rule's decides again by itself), a call before the point is none of
// these; user messages after the point are counted, and the digest names
// all of it.
func TestPreviewSaysWhatStaysAndWhatIsDropped(t *testing.T) {
	tl := &Timeline{WorkflowID: "w", LastEvent: 40,
		Runs: []Run{{RunID: "r1", Version: 7, Planner: "scripted"}, {RunID: "r2", Version: 7, Planner: "scripted"}},
		Steps: []Step{
			{Step: 1, RunID: "r1", ResetEvent: 4, Calls: []Call{{ID: "c-1", Tool: "close_ticket", Destructive: true, Ran: true, Decision: "approved", Approver: "alice"}}},
			{Step: 2, RunID: "r1", ResetEvent: 10, Calls: []Call{
				{ID: "c-2", Tool: "refund", Destructive: true, Ran: true, Decision: "approved", Approver: "bob"},
				{ID: "c-3", Tool: "search_tickets", Ran: true}}},
			{Step: 3, RunID: "r1", ResetEvent: 10, Calls: []Call{{ID: "c-4", Tool: "refund", Destructive: true, Ran: true, Decision: "approved", Approver: "rule:small"}}},
			{Step: 4, RunID: "r2", ResetEvent: 6, Calls: []Call{
				{ID: "c-5", Tool: "close_ticket", Destructive: true, Decision: "rejected", Approver: "carol"},
				{ID: "c-6", Tool: "search_tickets", Status: "cache_hit"}}},
		},
		chain: []chainRun{
			{id: "r1", events: []*historypb.HistoryEvent{signal(3, "message"), signal(12, "message"), signal(13, "approve")}},
			{id: "r2", events: []*historypb.HistoryEvent{signal(2, "message")}},
		}}
	p, err := tl.Preview("c-2")
	if err != nil {
		t.Fatal(err)
	}
	ids := func(cs []Call) (out []string) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	for what, got := range map[string][]string{"redo": p.Redo, "kept": ids(p.Kept), "dropped": ids(p.Dropped), "reads": ids(p.Reads)} {
		want := map[string][]string{"redo": {"c-2", "c-3", "c-4", "c-5", "c-6"}, "kept": {"c-2", "c-4"}, "dropped": {"c-2", "c-5"}, "reads": {"c-3"}}[what]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	if p.Messages != 2 || p.BaseRunID != "r1" || p.ResetEvent != 10 || p.Step != 2 {
		t.Errorf("preview %+v: want 2 messages dropped, run r1 reset to event 10", p)
	}
	if p.Digest != p.digest() || len(p.Digest) != 64 {
		t.Errorf("digest %q", p.Digest)
	}
	// c-4's step began in the workflow task c-2's began in: a rewind to c-4
	// runs that task again from its start, so it redoes c-2's step too.
	if q, err := tl.Preview("c-4"); err != nil || fmt.Sprint(q.Redo) != "[c-2 c-3 c-4 c-5 c-6]" {
		t.Errorf("a rewind to c-4 redoes %v (%v), want every call from c-2's step on", q.Redo, err)
	}
	tl.LastEvent++
	if q, _ := tl.Preview("c-2"); q.Digest == p.Digest {
		t.Error("a run that moved on has the same digest")
	}
	if _, err := tl.Preview("c-9"); err == nil {
		t.Error("a preview of a call the run never made")
	}
	tl.Runs[0].Version = 6
	if _, err := tl.Preview("c-2"); err == nil || !strings.Contains(err.Error(), "rules version 6") {
		t.Errorf("a chain started under rules 6: %v", err)
	}
	tl.Runs[0].Version, tl.Runs[1].Planner = 7, "external"
	if _, err := tl.Preview("c-2"); err == nil || !strings.Contains(err.Error(), "external client") {
		t.Errorf("an externally planned chain: %v", err)
	}
}

// readFixture reads a recorded history as a run of a chain.
func readFixture(t *testing.T, name string) chainRun {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testsuite", "histories", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return chainRun{id: "fixture-run", events: h.GetEvents()}
}

// The observer, replaying the recorded rewound and forked histories with
// AgentRun's code, sees their steps, their calls, their trace and — at a
// call — the state its step began from.
func TestObserveTheRecordedRewindAndFork(t *testing.T) {
	r := readFixture(t, "rewound_v16.json")
	wid := r.events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	o := &workflows.Observer{AtStep: 2}
	if err := observe(wid, r, o, Options{}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, rec := range o.Trace {
		statuses = append(statuses, rec.CallID+" "+rec.Status)
	}
	if o.Version != 16 || len(o.Steps) < 2 || o.State == nil || o.State.Calls != 1 || len(o.Step) != 1 || o.Step[0].Tool != "close_ticket" {
		t.Fatalf("observed %+v, state %+v", o.Steps, o.State)
	}
	if !strings.Contains(strings.Join(statuses, ","), "c-2 rewound") {
		t.Errorf("trace %v, want the rewind", statuses)
	}

	f := readFixture(t, "forked_v16.json")
	fo := &workflows.Observer{}
	if err := observe(f.events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId(), f, fo, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(fo.Trace) == 0 || fo.Trace[0].Status != workflows.TraceForked || fo.Input.Planner.Kind != "scripted" || fo.Input.Fork == nil {
		t.Fatalf("the fork observed: trace %+v, input %+v", fo.Trace, fo.Input)
	}
	if len(fo.Steps) == 0 || fo.Steps[0].Calls[0].ID != "c-2" || string(fo.Steps[0].Calls[0].Args) != `{"ticket_id":"TKT-1"}` {
		t.Errorf("the fork's first step: %+v, want c-2 proposed again with TKT-1", fo.Steps)
	}
}

// A run that notifies replays under the observer with
// its deliveries: they are commands of its history like any other.
func TestObserveARunThatNotifies(t *testing.T) {
	r := readFixture(t, "notified_v16.json")
	o := &workflows.Observer{}
	if err := observe(r.events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId(), r, o, Options{}); err != nil {
		t.Fatal(err)
	}
	var notices int
	for _, rec := range o.Trace {
		if rec.Status == workflows.TraceNotified || rec.Status == workflows.TraceNotifyFailed {
			notices++
		}
	}
	if o.Version != 16 || len(o.Steps) != 3 || notices < 3 {
		t.Fatalf("observed version %d, %d steps, %d notification records; want 16, 3, at least 3", o.Version, len(o.Steps), notices)
	}
	// The close's step says what became of it, not who was told last.
	st := steps([]Run{{RunID: "r"}}, []*workflows.Observer{o})
	if len(st) != 2 || st[1].Calls[0].ID != "c-2" || st[1].Calls[0].Status != workflows.TraceOK || !st[1].Calls[0].Ran || len(st[1].Calls[0].Result) == 0 {
		t.Fatalf("steps %+v, want c-2 ok with its result", st)
	}
}

// update is a grant, revoke or other update the run accepted at event id
// and completed at id+1: with res its result, or refused when res is nil.
func update(t *testing.T, id int64, name string, res any) []*historypb.HistoryEvent {
	t.Helper()
	accepted := &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Input: &updatepb.Input{Name: name}}}}}
	outcome := &updatepb.Outcome{Value: &updatepb.Outcome_Failure{Failure: &failurepb.Failure{Message: "grant refused"}}}
	if res != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(res)
		if err != nil {
			t.Fatal(err)
		}
		outcome = &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: p}}
	}
	completed := &historypb.HistoryEvent{EventId: id + 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{
			WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{AcceptedEventId: id, Outcome: outcome}}}
	return []*historypb.HistoryEvent{accepted, completed}
}

// The preview lists the grants and revokes the chain took after the point
// — in the run reset, from the reset event on, and in every later run —
// which a rewind drops, as it lists the decisions it drops: a grant before
// the point, a grant update the run refused and another update are none of
// them; and they change the digest.
func TestPreviewListsTheGrantsAndRevokesItDrops(t *testing.T) {
	g1 := workflows.Grant{ID: "g-1", Tool: "refund", By: "bob"}
	g2 := workflows.Grant{ID: "g-2", Tool: "refund", By: "bob", When: "args.amount_cents < 10000", Uses: 2}
	revoked := g1
	revoked.RevokedBy = "carol"
	var r1, r2 []*historypb.HistoryEvent
	r1 = append(r1, update(t, 5, workflows.UpdateGrant, workflows.GrantResult{Grant: g1})...)       // before the point: kept
	r1 = append(r1, update(t, 12, workflows.UpdateGrant, workflows.GrantResult{Grant: g2})...)      // after it: dropped
	r1 = append(r1, update(t, 14, workflows.UpdateGrant, nil)...)                                   // refused: no grant
	r1 = append(r1, update(t, 16, workflows.UpdateApprove, workflows.DecisionResult{})...)          // not a grant
	r2 = append(r2, update(t, 3, workflows.UpdateRevoke, workflows.GrantResult{Grant: revoked})...) // a later run: dropped
	tl := &Timeline{WorkflowID: "w", LastEvent: 20,
		Runs: []Run{{RunID: "r1", Version: 7, Planner: "scripted"}, {RunID: "r2", Version: 7, Planner: "scripted"}},
		Steps: []Step{
			{Step: 1, RunID: "r1", ResetEvent: 4, Calls: []Call{{ID: "c-1", Tool: "search_tickets", Ran: true}}},
			{Step: 2, RunID: "r1", ResetEvent: 10, Calls: []Call{{ID: "c-2", Tool: "refund", Destructive: true, Ran: true, Decision: "approved", Approver: "grant:bob"}}},
		},
		chain: []chainRun{{id: "r1", events: r1}, {id: "r2", events: r2}}}
	p, err := tl.Preview("c-2")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.Grants {
		got = append(got, a.String())
	}
	want := []string{"g-2 refund granted by bob (when args.amount_cents < 10000, 2 uses)", "g-1 refund revoked by carol (granted by bob)"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("grants dropped: %q, want %q", got, want)
	}
	all, err := tl.Preview("c-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Grants) != 3 || all.Grants[0].Grant.ID != "g-1" || all.Grants[0].Act != ActGranted {
		t.Errorf("a rewind to c-1 (event 4) drops every grant and revoke: %+v", all.Grants)
	}
	p.Grants = nil
	if p.digest() == p.Digest {
		t.Error("the digest does not cover the grants dropped")
	}
}
