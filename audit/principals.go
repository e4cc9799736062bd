package audit

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/workflows"
)

// This file checks who wrote the events whose writer matters, by the
// server's word. A Temporal server (1.32 and later) whose authorizer names
// each caller, with the namespace's dynamic config
// frontend.enablePrincipalPropagation on, stamps every event a call makes it
// write with the caller's principal (HistoryEvent.principal: a type and a
// name), computed from the caller's credential — never the identity a client
// writes into its request. Events its own timers and task queues write (an
// activity's timeout, a timer firing) carry none.
//
// The events checked are the ones that give a run its results and its
// rules: every workflow task answered (completed, or failed by whoever
// answered it), every activity closed (completed, failed, cancelled; timed
// out, when a call wrote it), every reset (its WorkflowTaskFailed of cause
// RESET_WORKFLOW), termination and change of the run's versioning override
// (which pins the run to the worker that answers its tasks). Each must be a
// worker's (principal type "worker") or the server's own ("temporal"); a
// reset may also be a person's when an operator's signed rewind, verified,
// names it. Anything else the audit names, and it fails the audit: a person
// who completed a tool's activity forged its result; one who answered a
// workflow task wrote what the run did in that task — in its first, the
// policy it is held to.

// The principal types toolgate's authorizer gives (package principal, the
// contract of `toolgate dev`'s server; any server that serves toolgate
// workers should give the same): a worker's credential, a person's (or
// none), the server's own parts.
const (
	principalWorker = principal.Worker
	principalPerson = principal.Person
	principalServer = principal.Temporal
)

// Writer is one event whose writer matters, with the principal the server
// stamped on it.
type Writer struct {
	At      time.Time
	EventID int64
	// EventType is the event's type as Temporal names it, without its
	// prefix: "WorkflowTaskCompleted", "ActivityTaskCompleted".
	EventType string
	// What says what the event did: "activity close_ticket (call c-3)
	// completed", "reset of run …".
	What string
	// PrincipalType and PrincipalName are the server's principal; both ""
	// when the event carries none.
	PrincipalType string
	PrincipalName string
	// Vouched: written by a worker or the server (or, a reset, vouched for
	// by an operator's verified rewind); Basis says which.
	Vouched bool
	Basis   string
	// Gap: the event carries no principal though other events of the
	// history do, so who wrote it cannot be told.
	Gap     bool
	Problem string // why not Vouched
}

// Principal is the writer as "type name" ("worker toolgate-1"), "" for none.
func (w Writer) Principal() string {
	switch {
	case w.PrincipalType == "" && w.PrincipalName == "":
		return ""
	case w.PrincipalName == "":
		return w.PrincipalType
	}
	return w.PrincipalType + " " + w.PrincipalName
}

// Unvouched lists the events written by neither a worker nor the server
// (nor, for a reset, vouched for by a verified rewind), and those of a
// history with principals that carry none: each fails the audit.
func (r Report) Unvouched() []Writer {
	var out []Writer
	for _, w := range r.Writers {
		if !w.Vouched {
			out = append(out, w)
		}
	}
	return out
}

// stamping says how an event's type is checked.
type stamping int

const (
	unchecked stamping = iota
	// always: only a call to the frontend writes it (a task answered, an
	// activity closed by its worker, a reset), so where the server stamps
	// principals it always carries one, and one without is a gap.
	always
	// byCall: the server's own timers or limits write it too, carrying no
	// principal; one that carries one was written by that caller.
	byCall
)

// checkedAs says how an event is checked.
func checkedAs(ev *historypb.HistoryEvent) stamping {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return always
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		switch ev.GetWorkflowTaskFailedEventAttributes().GetCause() {
		case enumspb.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND, enumspb.WORKFLOW_TASK_FAILED_CAUSE_FAILOVER_CLOSE_COMMAND:
			// written with a termination or a timeout of the run (checked
			// there), not by whoever answered the task
			return unchecked
		}
		return always
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		return byCall
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
		if o := ev.GetWorkflowExecutionOptionsUpdatedEventAttributes(); o.GetVersioningOverride() != nil || o.GetUnsetVersioningOverride() {
			return always
		}
	}
	return unchecked
}

// checkWriters checks the writer of every event whose writer matters (once
// the rewinds are checked: a verified one vouches for its reset).
func (a *auditor) checkWriters() {
	for _, ev := range a.events {
		if ev.GetPrincipal() != nil {
			a.rep.Principals = true
			break
		}
	}
	if !a.rep.Principals {
		a.rep.Notes = append(a.rep.Notes, noPrincipals)
		return
	}
	for i, ev := range a.events {
		how := checkedAs(ev)
		if how == unchecked {
			continue
		}
		p := ev.GetPrincipal()
		w := Writer{At: ev.GetEventTime().AsTime(), EventID: ev.GetEventId(), EventType: eventName(ev.GetEventType()),
			What: a.describe(ev), PrincipalType: p.GetType(), PrincipalName: p.GetName()}
		switch {
		case p == nil && how == byCall:
			w.Vouched, w.Basis = true, "the server (no principal: written by the server's own timers or limits, not by a call)"
		case p == nil:
			w.Gap = true
			w.Problem = w.What + " carries no principal, though the server stamped other events of this history: who wrote it cannot be told " +
				"(principal propagation was off for part of the run, or the event came by a path the server does not stamp)"
		case p.GetType() == principalWorker:
			w.Vouched, w.Basis = true, fmt.Sprintf("a worker (%q)", p.GetName())
		case p.GetType() == principalServer:
			w.Vouched, w.Basis = true, fmt.Sprintf("the server (%q)", p.GetName())
		default:
			if by, ok := a.signedResets[ev.GetEventId()]; ok && isReset(ev) {
				w.Vouched, w.Basis = true, fmt.Sprintf("%s, not a worker, but %s names this reset", principalWords(p), by)
				break
			}
			w.Problem = a.unvouched(ev, i, p, w.What)
		}
		a.rep.Writers = append(a.rep.Writers, w)
	}
}

// noPrincipals is the note on a history no event of which carries a
// principal.
const noPrincipals = "the server recorded no principals in this history (no event carries one), so who completed its workflow tasks and activities, " +
	"reset or terminated it cannot be checked: a client of the namespace that answered a task or completed a tool's activity by its id looks here " +
	"exactly like a worker. To check it, serve with an authorizer that tells workers from persons (toolgate dev's; see docs/threat-model.md) " +
	"and the dynamic config frontend.enablePrincipalPropagation on for the namespace, then export the history again"

// isReset says whether ev is a reset's WorkflowTaskFailed.
func isReset(ev *historypb.HistoryEvent) bool {
	return ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
}

// principalWords is a principal as a sentence names it: `person "mallory"`.
func principalWords(p *commonpb.Principal) string {
	switch {
	case p.GetType() == "" && p.GetName() == "":
		return "an empty principal"
	case p.GetName() == "":
		return p.GetType() + " (no name)"
	case p.GetType() == "":
		return fmt.Sprintf("a principal of no type named %q", p.GetName())
	}
	return fmt.Sprintf("%s %q", p.GetType(), p.GetName())
}

// unvouched says why an event written by principal p, neither a worker nor
// the server, fails the audit.
func (a *auditor) unvouched(ev *historypb.HistoryEvent, i int, p *commonpb.Principal, what string) string {
	by := principalWords(p)
	var why string
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		why = "someone who is not a worker answered the run's workflow task, so what the run did in it is theirs"
		if wrote := a.wrote(i, p); wrote != "" {
			why += "; it wrote " + wrote
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		if isReset(ev) {
			why = "no operator's signed rewind, verified, names this reset"
			if !a.rep.Recorded {
				why = "the run had no policy, so no signed rewind can vouch for it"
			}
		} else {
			why = "someone who is not a worker took the run's workflow task and failed it"
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		why = "its result is theirs, not the activity's: a forged result"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		why = "its outcome is theirs, not the activity's"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		why = "a run is terminated by a worker or the server only"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
		why = "whoever pins a run chooses which worker answers its tasks"
	}
	s := fmt.Sprintf("%s by %s, neither a worker nor the server: %s", what, by, why)
	if t := p.GetType(); t != principalPerson {
		s += fmt.Sprintf(" (principal type %q is none toolgate's authorizer gives: this server's authorizer does not tell a worker from a person, see docs/threat-model.md)", t)
	}
	return s
}

// commands are the event types only a workflow task's completion writes:
// what whoever answered the task made the run do.
var commands = map[enumspb.EventType]bool{
	enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:                              true,
	enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:                       true,
	enumspb.EVENT_TYPE_MARKER_RECORDED:                                      true,
	enumspb.EVENT_TYPE_TIMER_STARTED:                                        true,
	enumspb.EVENT_TYPE_TIMER_CANCELED:                                       true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:                   true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:                  true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:                         true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:                            true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:                          true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:                  true,
	enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:         true,
	enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:             true,
	enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: true,
	enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:                    true,
	enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:                         true,
	enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:                            true,
	enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:                     true,
}

// maxWrote bounds how many events wrote lists.
const maxWrote = 8

// wrote lists the events the workflow task completed at index i wrote,
// with the same principal: "6 MarkerRecorded (local activity
// toolgate.config: the run's tool specs and policy), 7 ActivityTaskScheduled
// (close_ticket, call c-3)"; "" for none.
func (a *auditor) wrote(i int, p *commonpb.Principal) string {
	var out []string
	n := 0
	for _, ev := range a.events[i+1:] {
		q := ev.GetPrincipal()
		if !commands[ev.GetEventType()] || q.GetType() != p.GetType() || q.GetName() != p.GetName() {
			break
		}
		if n++; n <= maxWrote {
			out = append(out, fmt.Sprintf("%d %s (%s)", ev.GetEventId(), eventName(ev.GetEventType()), a.describe(ev)))
		}
	}
	if n > maxWrote {
		out = append(out, fmt.Sprintf("and %d more", n-maxWrote))
	}
	return strings.Join(out, ", ")
}

// describe says what an event did, for a Writer's What and wrote.
func (a *auditor) describe(ev *historypb.HistoryEvent) string {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		return "workflow task completed"
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		f := ev.GetWorkflowTaskFailedEventAttributes()
		if isReset(ev) {
			return fmt.Sprintf("reset of run %s (reason %q)", f.GetBaseRunId(), clipText(f.GetFailure().GetMessage(), 200))
		}
		return fmt.Sprintf("workflow task failed (%s)", words(f.GetCause().String()))
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return a.activity(ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()) + " completed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		return a.activity(ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()) + " failed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return a.activity(ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()) + " cancelled"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return a.activity(ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()) + " timed out"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return a.activity(ev.GetEventId())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		t := ev.GetWorkflowExecutionTerminatedEventAttributes()
		return fmt.Sprintf("run terminated (reason %q, identity %q as the caller gave it)", clipText(t.GetReason(), 200), clipText(t.GetIdentity(), 128))
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
		o := ev.GetWorkflowExecutionOptionsUpdatedEventAttributes()
		if o.GetUnsetVersioningOverride() {
			return "the run's versioning override removed"
		}
		v := o.GetVersioningOverride()
		if pin := v.GetPinned().GetVersion(); pin != nil {
			return fmt.Sprintf("the run pinned to worker deployment %q, build %q", pin.GetDeploymentName(), pin.GetBuildId())
		}
		return "the run's versioning override set"
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		m := ev.GetMarkerRecordedEventAttributes()
		switch m.GetMarkerName() {
		case "LocalActivity":
		case "Version":
			var change string
			var version int
			_ = decodePayload(m.GetDetails()["change-id"], &change)
			_ = decodePayload(m.GetDetails()["version"], &version)
			return fmt.Sprintf("version %s %d", change, version)
		default:
			return "marker " + m.GetMarkerName()
		}
		var data struct {
			ActivityType string `json:"ActivityType"`
		}
		_ = decodePayload(m.GetDetails()["data"], &data)
		if data.ActivityType == workflows.ConfigActivity {
			return "local activity " + data.ActivityType + ": the run's tool specs and policy"
		}
		return "local activity " + data.ActivityType
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		return "update " + ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() + " accepted"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		return "update completed"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return "the run's result"
	case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
		s := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes()
		return fmt.Sprintf("signal %s to %s", s.GetSignalName(), s.GetWorkflowExecution().GetWorkflowId())
	}
	return words(eventName(ev.GetEventType()))
}

// activity names the activity scheduled at event id: "activity close_ticket
// (call c-3)", "activity toolgate.notify".
func (a *auditor) activity(scheduled int64) string {
	for _, rc := range a.ran {
		if rc.eventID != scheduled {
			continue
		}
		if rc.bad == "" && rc.req.CallID != "" {
			return fmt.Sprintf("activity %s (call %s)", rc.tool, rc.req.CallID)
		}
		return "activity " + rc.tool
	}
	return fmt.Sprintf("activity scheduled at event %d", scheduled)
}

// eventName is an event type as Temporal's documentation names it:
// "ActivityTaskCompleted".
func eventName(t enumspb.EventType) string { return t.String() }

// words is a name in camel case as words: "timer canceled".
func words(camel string) string {
	var b strings.Builder
	for i, r := range camel {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// clipText is text from a run as a message quotes it: at most n bytes,
// cut at a character's start.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
