package audit_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// The principals a server under toolgate's authorizer stamps.
var (
	aWorker   = &commonpb.Principal{Type: "worker", Name: "toolgate-worker"}
	theServer = &commonpb.Principal{Type: "temporal", Name: "internal"}
)

func aPerson(name string) *commonpb.Principal { return &commonpb.Principal{Type: "person", Name: name} }

// stampLikeTheServer stamps every event with the principal the server
// gives it when it serves with toolgate's authorizer and principal
// propagation: the person's who started, signalled or reset the run (and
// the workflow task each schedules), none on what the server's own timers
// and child workflows write, the worker's on the rest (tasks polled and
// answered, activities run).
func stampLikeTheServer(h *historypb.History, requester string) {
	var prev *commonpb.Principal
	for _, ev := range h.Events {
		var p *commonpb.Principal
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			p = aPerson(requester)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			p = aWorker
			if ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				p = aPerson("dave")
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			p = prev // written with what made it
		case enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
			enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
		default:
			p = aWorker
		}
		ev.Principal, prev = p, p
	}
}

// stamped is a fixture stamped like the server, then changed.
func stamped(t *testing.T, name string, change func(*historypb.History)) string {
	t.Helper()
	return edit(t, name, func(h *historypb.History) {
		stampLikeTheServer(h, "carol")
		if change != nil {
			change(h)
		}
	})
}

// nth is the history's nth event (from 1) of type typ.
func nth(t *testing.T, h *historypb.History, typ enumspb.EventType, n int) *historypb.HistoryEvent {
	t.Helper()
	for _, ev := range h.Events {
		if ev.GetEventType() == typ {
			if n--; n == 0 {
				return ev
			}
		}
	}
	t.Fatalf("no %s number %d", typ, n)
	return nil
}

// rogueTask makes the nth workflow task completion, and the events it wrote,
// a person's: someone who is not a worker answered the task.
func rogueTask(t *testing.T, h *historypb.History, n int, p *commonpb.Principal) *historypb.HistoryEvent {
	t.Helper()
	wtc := nth(t, h, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, n)
	wtc.Principal = p
	for _, ev := range h.Events[wtc.GetEventId():] {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED || ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
			break
		}
		ev.Principal = p
	}
	return wtc
}

// writers is each writer checked as "id type principal: vouched|FAIL".
func writers(rep audit.Report) []string {
	var out []string
	for _, w := range rep.Writers {
		check := "vouched"
		if !w.Vouched {
			check = "FAIL"
		}
		out = append(out, strings.Join([]string{itoa(w.EventID), w.EventType, w.Principal() + ":", check}, " "))
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func hasNote(rep audit.Report, prefix string) int {
	n := 0
	for _, s := range rep.Notes {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

const noPrincipalsNote = "the server recorded no principals in this history"

// Every fixture was recorded on a server without principal propagation: the
// audit checks no writer, fails nothing for it, and says so once.
func TestWritersNoPrincipals(t *testing.T) {
	for _, name := range []string{"policy_quorum.json", "approve_v3.json", "rewound_v9.json", "nexus_v10.json"} {
		rep := fixture(t, name, nil)
		assert.False(t, rep.Principals, name)
		assert.Empty(t, rep.Writers, name)
		assert.Empty(t, rep.Unvouched(), name)
		assert.Equal(t, 1, hasNote(rep, noPrincipalsNote), "%s: %q", name, rep.Notes)
	}
	note := fixture(t, "policy_quorum.json", nil).Notes
	assert.Contains(t, strings.Join(note, "\n"), "frontend.enablePrincipalPropagation", "it says how to turn it on")
	assert.Contains(t, strings.Join(note, "\n"), "an authorizer that tells workers from persons")
}

// A history every task and activity of which a worker wrote is clean: each
// is listed, vouched for by the worker, and no note says principals are
// missing.
func TestWritersAllWorkers(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", nil), nil)
	assert.True(t, rep.Principals)
	assert.Equal(t, []string{
		"4 WorkflowTaskCompleted worker toolgate-worker: vouched",
		"13 WorkflowTaskCompleted worker toolgate-worker: vouched",
		"18 WorkflowTaskCompleted worker toolgate-worker: vouched",
		"25 ActivityTaskCompleted worker toolgate-worker: vouched",
		"28 WorkflowTaskCompleted worker toolgate-worker: vouched",
	}, writers(rep))
	assert.Empty(t, rep.Unvouched())
	assert.Zero(t, hasNote(rep, noPrincipalsNote))
	assert.Empty(t, rep.Failed())
	assert.Empty(t, rep.Mismatches())
	assert.Equal(t, `a worker ("toolgate-worker")`, rep.Writers[3].Basis)
	assert.Equal(t, "activity refund (call c-1) completed", rep.Writers[3].What)
}

// Issue 43, item 4: a person completes a tool's activity by its id with a
// result of their own. Every signature verifies and what ran is what was
// approved; the result is forged, and the audit names the event.
func TestWritersForgedToolResult(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		nth(t, h, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1).Principal = aPerson("mallory")
	}), nil)
	assert.Empty(t, rep.Failed(), "the decisions verify")
	assert.Empty(t, rep.Mismatches(), "what ran was approved")
	bad := rep.Unvouched()
	require.Len(t, bad, 1, "%q", writers(rep))
	w := bad[0]
	assert.Equal(t, int64(25), w.EventID)
	assert.Equal(t, "ActivityTaskCompleted", w.EventType)
	assert.Equal(t, "person", w.PrincipalType)
	assert.Equal(t, "mallory", w.PrincipalName)
	assert.False(t, w.Gap)
	assert.Equal(t, `activity refund (call c-1) completed by person "mallory", neither a worker nor the server: its result is theirs, not the activity's: a forged result`, w.Problem)
}

// Issues 43, items 2 and 3: a person's worker answers the run's workflow
// task. The audit names the completion and what it wrote — in the first
// task, the config marker that holds the policy the run is held to — and the
// note on the recorded policy says who wrote it.
func TestWritersRogueWorkflowTask(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		rogueTask(t, h, 1, aPerson("mallory"))
	}), nil)
	bad := rep.Unvouched()
	require.Len(t, bad, 1, "%q", writers(rep))
	w := bad[0]
	assert.Equal(t, int64(4), w.EventID)
	assert.Equal(t, "WorkflowTaskCompleted", w.EventType)
	assert.Equal(t, "person mallory", w.Principal())
	assert.Contains(t, w.Problem, `workflow task completed by person "mallory", neither a worker nor the server: someone who is not a worker answered the run's workflow task, `+
		`so what the run did in it is theirs; it wrote 5 MarkerRecorded (version decision-kind 4), 6 UpsertWorkflowSearchAttributes (upsert workflow search attributes), `+
		`7 MarkerRecorded (local activity toolgate.config: the run's tool specs and policy), 8 UpsertWorkflowSearchAttributes`)
	assert.Contains(t, rep.Notes[0], audit.NoteUnvouchedPolicy)
	assert.Contains(t, rep.Notes[0], `whoever answered the run's first workflow task (here person "mallory", by the server's word) wrote it`)

	// a later task answered by a rogue worker: it accepted an approval
	rep = auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		rogueTask(t, h, 3, aPerson("mallory"))
	}), nil)
	require.Len(t, rep.Unvouched(), 1)
	assert.Equal(t, int64(18), rep.Unvouched()[0].EventID)
	assert.Contains(t, rep.Unvouched()[0].Problem, "it wrote 19 WorkflowExecutionUpdateAccepted (update approve accepted), 20 WorkflowExecutionUpdateCompleted (update completed)")
	assert.Contains(t, rep.Notes[0], `(here worker "toolgate-worker", by the server's word)`)
}

// Some events of a history carry principals and others of the kinds checked
// do not: each such event is a gap, named, and fails the audit. Those the
// server's own timers write (an activity's timeout) carry none and are the
// server's.
func TestWritersGap(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		nth(t, h, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 2).Principal = nil
	}), nil)
	bad := rep.Unvouched()
	require.Len(t, bad, 1, "%q", writers(rep))
	assert.True(t, bad[0].Gap)
	assert.Equal(t, int64(13), bad[0].EventID)
	assert.Equal(t, "", bad[0].Principal())
	assert.Contains(t, bad[0].Problem, "workflow task completed carries no principal, though the server stamped other events of this history: who wrote it cannot be told")
	assert.Zero(t, hasNote(rep, noPrincipalsNote))

	rep = auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		ev := nth(t, h, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1)
		ev.EventType, ev.Principal = enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, nil
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: &historypb.ActivityTaskTimedOutEventAttributes{
			ScheduledEventId: ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()}}
	}), nil)
	assert.Empty(t, rep.Unvouched(), "%q", writers(rep))
	assert.Contains(t, writers(rep), "25 ActivityTaskTimedOut : vouched")
}

// The server's own parts (principal type "temporal") may write anything.
func TestWritersTheServer(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		nth(t, h, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1).Principal = theServer
	}), nil)
	assert.Empty(t, rep.Unvouched())
	assert.Contains(t, writers(rep), "25 ActivityTaskCompleted temporal internal: vouched")
}

// Under the stock authorizer every principal is the credential's kind
// ("jwt"), a worker's as a person's: nothing is vouched for, and the audit
// says why.
func TestWritersStockAuthorizer(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if ev.Principal != nil {
				ev.Principal = &commonpb.Principal{Type: "jwt", Name: "svc-toolgate"}
			}
		}
	}), nil)
	require.Len(t, rep.Unvouched(), len(rep.Writers))
	require.Len(t, rep.Writers, 5)
	assert.Contains(t, rep.Writers[0].Problem, `(principal type "jwt" is none toolgate's authorizer gives: this server's authorizer does not tell a worker from a person, see docs/threat-model.md)`)
}

// A reset is an operator's act: a person's reset is vouched for by the
// operator's signed rewind naming it, verified; without one (a note that
// does not verify, or none, or a run without a policy) it is named.
func TestWritersReset(t *testing.T) {
	rep := auditFile(t, stamped(t, "rewound_v9.json", nil), nil)
	requireAllVerified(t, rep)
	assert.Empty(t, rep.Unvouched(), "%q", writers(rep))
	reset := writerAt(t, rep, 14)
	assert.Equal(t, "WorkflowTaskFailed", reset.EventType)
	assert.True(t, reset.Vouched)
	assert.Equal(t, `person "dave", not a worker, but dave's verified rewind (event 20) names this reset`, reset.Basis)
	assert.True(t, writerAt(t, rep, 51).Vouched, "a worker's own failed task")

	rep = auditFile(t, stamped(t, "rewound_v9.json", func(h *historypb.History) {
		editRewindNote(t, h, func(n *workflows.RewindNote) { n.Token = flipSignature(n.Token) })
	}), nil)
	reset = writerAt(t, rep, 14)
	assert.False(t, reset.Vouched)
	assert.Contains(t, reset.Problem, `reset of run `)
	assert.Contains(t, reset.Problem, `by person "dave", neither a worker nor the server: no operator's signed rewind, verified, names this reset`)
	require.Len(t, rep.Unvouched(), 1)

	rep = auditFile(t, stamped(t, "rewound_v9.json", func(h *historypb.History) {
		withoutPolicy(t, h)
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) { in.Token = "" })
		editRewindNote(t, h, func(n *workflows.RewindNote) { n.Token = "" })
	}), nil)
	require.Len(t, rep.Unvouched(), 1)
	assert.Contains(t, rep.Unvouched()[0].Problem, "the run had no policy, so no signed rewind can vouch for it")
	assert.Empty(t, rep.Failed(), "the unsigned note itself fails nothing")

	// the same reset by a worker is a worker's
	rep = auditFile(t, stamped(t, "rewound_v9.json", func(h *historypb.History) {
		withoutPolicy(t, h)
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) { in.Token = "" })
		editRewindNote(t, h, func(n *workflows.RewindNote) { n.Token = "" })
		h.Events[13].Principal = aWorker
	}), nil)
	assert.Empty(t, rep.Unvouched())
}

func writerAt(t *testing.T, rep audit.Report, id int64) audit.Writer {
	t.Helper()
	for _, w := range rep.Writers {
		if w.EventID == id {
			return w
		}
	}
	t.Fatalf("no writer at event %d in %q", id, writers(rep))
	return audit.Writer{}
}

// A run terminated by a person is named; one the server terminated (a
// limit, no principal) is the server's.
func TestWritersTerminated(t *testing.T) {
	terminated := func(p *commonpb.Principal) func(*historypb.History) {
		return func(h *historypb.History) {
			last := h.Events[len(h.Events)-1]
			last.EventType, last.Principal = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, p
			last.Attributes = &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{
				Reason: "enough", Identity: "toolgate-worker@host"}}
		}
	}
	rep := auditFile(t, stamped(t, "policy_quorum.json", terminated(aPerson("mallory"))), nil)
	require.Len(t, rep.Unvouched(), 1)
	assert.Equal(t, `run terminated (reason "enough", identity "toolgate-worker@host" as the caller gave it) by person "mallory", neither a worker nor the server: `+
		`a run is terminated by a worker or the server only`, rep.Unvouched()[0].Problem)

	rep = auditFile(t, stamped(t, "policy_quorum.json", terminated(nil)), nil)
	assert.Empty(t, rep.Unvouched())
	assert.Contains(t, writers(rep), "30 WorkflowExecutionTerminated : vouched")
}

// A person who pins the run to a worker deployment of theirs chooses who
// answers its tasks: the change is named.
func TestWritersVersioningPinned(t *testing.T) {
	rep := auditFile(t, stamped(t, "policy_quorum.json", func(h *historypb.History) {
		last := h.Events[len(h.Events)-1]
		h.Events = append(h.Events, &historypb.HistoryEvent{EventId: last.EventId + 1, EventTime: last.EventTime, Principal: aPerson("mallory"),
			EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionOptionsUpdatedEventAttributes{WorkflowExecutionOptionsUpdatedEventAttributes: &historypb.WorkflowExecutionOptionsUpdatedEventAttributes{
				VersioningOverride: &workflowpb.VersioningOverride{Override: &workflowpb.VersioningOverride_Pinned{Pinned: &workflowpb.VersioningOverride_PinnedOverride{
					Version: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "mine", BuildId: "evil"}}}}}}})
	}), nil)
	require.Len(t, rep.Unvouched(), 1)
	assert.Equal(t, `the run pinned to worker deployment "mine", build "evil" by person "mallory", neither a worker nor the server: `+
		`whoever pins a run chooses which worker answers its tasks`, rep.Unvouched()[0].Problem)
}

// With a policy given, a recorded policy that is not the given one is named,
// what differs said; the same one is not.
func TestPolicyGivenDiffers(t *testing.T) {
	recorded := fixture(t, "policy_quorum.json", nil).Policy
	assert.Empty(t, fixture(t, "policy_quorum.json", clonePolicy(t, recorded)).PolicyDiffers)
	assert.Empty(t, fixture(t, "policy_quorum.json", nil).PolicyDiffers, "none given")

	pol := clonePolicy(t, recorded)
	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	alice := pol.Approvers["alice"]
	alice.Key = signed.FormatPublicKey(pub)
	pol.Approvers["alice"] = alice
	pol.Approvers["erin"] = alice
	pol.Operators = []string{"nobody"}
	rep := fixture(t, "policy_quorum.json", pol)
	assert.Empty(t, rep.Failed(), "alice decided nothing here: every token still verifies")
	assert.Equal(t, []string{
		`approver "alice" has another key in the recorded policy (` + clip(recorded.Approvers["alice"].Key) + `, given ` + clip(alice.Key) + `)`,
		`approver "erin" is in the given policy only`,
		`operators differs`,
	}, rep.PolicyDiffers)

	rep = fixture(t, "approve_v3.json", clonePolicy(t, recorded))
	assert.Equal(t, []string{"the run recorded no policy: it was held to none (its decisions were unauthenticated)"}, rep.PolicyDiffers)
}

func clip(k string) string { return k[:20] + "…" }
