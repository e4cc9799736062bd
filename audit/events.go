package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// auditor walks one history.
type auditor struct {
	rep      Report
	pol      *policy.Policy // to verify against (nil until the config marker, if not given)
	engine   *policy.Engine
	engErr   error
	config   *workflows.WorkerConfig
	goal     string
	input    []byte // the run's input as the start event holds it
	approval string // the input's approval ("human", "deny", "always_approve")
	reqBy    string // the verified requester
	startAt  int    // index of the start entry; -1 none
	// continued: the run continued a run of its chain (its input carries
	// what that run handed over); carried are the grants it handed over.
	continued bool
	carried   []workflows.Grant
	// version is the run's rules version (its GetVersion marker of
	// versionChangeID); workflow.DefaultVersion (-1) without one.
	version   int
	updates   map[string]int          // update id -> entry index
	inputs    map[int]decisionPayload // entry index -> an approve or reject's payload
	claims    map[int]signed.Claims   // entry index -> a verified token's claims
	grantUses map[string][]string     // grant id -> the calls it let through so far
	tokens    []pendingToken
	resets    []resetEvent           // the resets the history holds, in event order
	rewinds   []int                  // entry indexes of the rewind notes
	notes     []workflows.RewindNote // and their notes, in the same order
	ran       []ranCall              // tool activities scheduled, in event order
	// ledgerAnswers are the fleet ledger's answers, in event order (guards.go).
	ledgerAnswers []ledgerAnswer
	// notifies are the waiting calls' deliveries by scheduled event id, and
	// links what they reported sent (rules version 9); forkAt is the fork
	// activity's scheduled event, forkers who forked the run and its sources.
	notifies map[int64]workflows.Notification
	links    []sentLinks
	forkAt   int64
	forkers  []string
	locals   []localRun
	runRes   *workflows.RunResult
	traceAt  int64 // the event holding the trace
	closedAs enumspb.EventType
	failMsg  string
	// events are the history's events; configAt the event that recorded
	// the config the run is held to (its toolgate.config marker), -1 for
	// none (a continued run's comes with its input).
	events   []*historypb.HistoryEvent
	configAt int64
	// signedResets are the resets an operator's verified rewind note names:
	// reset event id -> who, as a writer's basis says it (principals.go).
	signedResets map[int64]string
	// records reads a worker's record of a reset from the authority
	// namespace (WithRewindRecords); nil: the audit reads no namespace.
	records RecordReader
}

// versionChangeID is the change id of AgentRun's rules version
// (workflows/agentrun.go), and these the versions the audit tells apart.
const (
	versionChangeID = "decision-kind"
	versionKind     = 1  // decisions name their kind (gate or interrupt)
	versionDigest   = 3  // decisions must name args_digest
	versionTrust2   = 5  // fail closed to the strictest verdict; start tokens sign input_digest
	versionRewinds  = 14 // a rewind is carried out, and recorded, by a worker
)

// decisionPayload is an approve or reject as it came.
type decisionPayload struct {
	approve bool
	in      *workflows.DecisionInput
}

// ranCall is a tool's activity as its ActivityTaskScheduled event holds it.
type ranCall struct {
	at      time.Time
	eventID int64
	tool    string // the activity type: the tool's name
	req     tool.Request
	bad     string // why its input is not a tool.Request
}

// localRun is a local activity of a tool (not toolgate's own): its marker
// records no input, so its arguments are taken from the trace.
type localRun struct {
	at      time.Time
	eventID int64
	tool    string
}

func (a *auditor) event(ev *historypb.HistoryEvent) error {
	at, id := ev.GetEventTime().AsTime(), ev.GetEventId()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a.startAt = -1
		attrs := ev.GetWorkflowExecutionStartedEventAttributes()
		var in struct {
			Goal         string          `json:"goal"`
			Approval     string          `json:"approval"`
			RequestToken string          `json:"request_token"`
			Fork         *workflows.Fork `json:"fork"`
			Carry        *struct {
				RequestedBy string                  `json:"requested_by"`
				ForkedBy    []string                `json:"forked_by"`
				Config      *workflows.WorkerConfig `json:"config"`
				Grants      []workflows.Grant       `json:"grants"`
			} `json:"carry"`
		}
		if err := decodePayload(attrs.GetInput(), &in); err != nil {
			return fmt.Errorf("the run's input: %w", err)
		}
		if ps := attrs.GetInput().GetPayloads(); len(ps) > 0 {
			a.input = ps[0].GetData()
		}
		a.goal, a.approval = in.Goal, in.Approval
		switch {
		case in.Carry == nil:
		case attrs.GetInitiator() != enumspb.CONTINUE_AS_NEW_INITIATOR_WORKFLOW:
			// A carry only AgentRun itself hands over, continuing as new; one
			// in a client's start, a cron or a retry is not the chain's.
			a.rep.Notes = append(a.rep.Notes, fmt.Sprintf("the run's input carries a previous run's state, but the run was started by %s, not continued as new by AgentRun: "+
				"the tool specs, policy, requester and grants in that carry are not the chain's and are not taken", attrs.GetInitiator()))
		default:
			a.continued, a.reqBy, a.carried, a.forkers = true, in.Carry.RequestedBy, in.Carry.Grants, in.Carry.ForkedBy
			if in.Carry.Config != nil {
				a.takeConfig(in.Carry.Config)
			}
			a.rep.Notes = append(a.rep.Notes, "a continued run: its earlier decisions are in the histories of the runs before it")
		}
		if in.Fork != nil {
			a.startFork(at, id, in.Fork, in.RequestToken)
		} else if in.RequestToken != "" {
			a.startAt = len(a.rep.Entries)
			a.rep.Entries = append(a.rep.Entries, Entry{At: at, EventID: id, Kind: KindStart, Via: ViaStart, Applied: true,
				Approver: peekApprover(in.RequestToken), Problem: "pending"})
			a.tokens = append(a.tokens, pendingToken{at: a.startAt, token: in.RequestToken, action: signed.ActionStart})
		}
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		return a.marker(at, id, ev.GetMarkerRecordedEventAttributes())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		s := ev.GetActivityTaskScheduledEventAttributes()
		a.scheduled(id, s)
		rc := ranCall{at: at, eventID: id, tool: s.GetActivityType().GetName()}
		if err := decodePayload(s.GetInput(), &rc.req); err != nil {
			rc.bad = err.Error()
		} else if rc.req.CallID == "" {
			rc.bad = "no call_id"
		}
		a.ran = append(a.ran, rc)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		c := ev.GetActivityTaskCompletedEventAttributes()
		a.activityDone(id, c.GetScheduledEventId(), c.GetResult(), nil)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		f := ev.GetActivityTaskFailedEventAttributes()
		a.activityDone(id, f.GetScheduledEventId(), nil, &failureDetails{f.GetFailure().GetApplicationFailureInfo().GetDetails()})
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		f := ev.GetActivityTaskTimedOutEventAttributes()
		a.activityDone(id, f.GetScheduledEventId(), nil, &failureDetails{f.GetFailure().GetTimeoutFailureInfo().GetLastHeartbeatDetails()})
	case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
		if s := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); s.GetSignalName() == ledger.SignalSettle &&
			strings.HasPrefix(s.GetWorkflowExecution().GetWorkflowId(), ledger.IDPrefix) {
			a.ledgerSignal(at, id, s.GetInput()) // a settlement (guards.go)
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		req := u.GetAcceptedRequest()
		name := req.GetInput().GetName()
		i := a.decision(at, id, ViaUpdate, name, req.GetInput().GetArgs())
		if i >= 0 {
			a.updates[req.GetMeta().GetUpdateId()] = i
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		u := ev.GetWorkflowExecutionUpdateCompletedEventAttributes()
		i, ok := a.updates[u.GetMeta().GetUpdateId()]
		if !ok {
			return nil
		}
		e := &a.rep.Entries[i]
		if f := u.GetOutcome().GetFailure(); f != nil {
			e.Applied, e.Result = false, "refused: "+f.GetMessage()
			return nil
		}
		e.Applied = true
		var res struct {
			Decision string `json:"decision"`
			Status   string `json:"status"` // a withdrawal's: the call's status`
			Grant    struct {
				ID string `json:"id"`
			} `json:"grant"`
		}
		if err := decodePayload(u.GetOutcome().GetSuccess(), &res); err == nil {
			e.Result = res.Decision
			if e.Kind == KindWithdraw {
				e.Result, e.Problem = res.Status, ""
			}
			if res.Grant.ID != "" {
				e.Result = res.Grant.ID
			}
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			a.resets = append(a.resets, resetEvent{at: at, eventID: id, base: f.GetBaseRunId(), newRun: f.GetNewRunId(), reason: f.GetFailure().GetMessage()})
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
		if s.GetSignalName() == workflows.SignalRewound {
			a.rewindNote(at, id, s.GetInput())
			return nil
		}
		if i := a.decision(at, id, ViaSignal, s.GetSignalName(), s.GetInput()); i >= 0 {
			a.rep.Entries[i].Applied = true
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		a.closedAs = ev.GetEventType()
		var res workflows.RunResult
		if err := decodePayload(ev.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res); err != nil {
			return fmt.Errorf("the run's result: %w", err)
		}
		a.runRes = &res
		a.traceAt = id
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		a.closedAs = ev.GetEventType()
		a.failMsg = ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		a.closedAs = ev.GetEventType()
	}
	return nil
}

// marker takes the run's rules version from its GetVersion marker, the
// worker's config (and so its policy) from the toolgate.config local
// activity's marker, and notes every other local activity.
func (a *auditor) marker(at time.Time, id int64, m *historypb.MarkerRecordedEventAttributes) error {
	switch m.GetMarkerName() {
	case "Version":
		var change string
		var version int
		if decodePayload(m.GetDetails()["change-id"], &change) == nil && change == versionChangeID &&
			decodePayload(m.GetDetails()["version"], &version) == nil {
			a.version = version
			a.rep.Version = version
		}
		return nil
	case "LocalActivity":
	default:
		return nil
	}
	var data struct {
		ActivityType string `json:"ActivityType"`
	}
	if err := decodePayload(m.GetDetails()["data"], &data); err != nil {
		return nil
	}
	switch data.ActivityType {
	case workflows.ConfigActivity:
	case workflows.ChainActivity:
		return nil
	case ledger.ReserveActivity, ledger.SettleActivity: // the fleet ledger's answers (guards.go)
		a.ledgerMarker(at, id, data.ActivityType, m.GetDetails()["result"])
		return nil
	default:
		a.locals = append(a.locals, localRun{at: at, eventID: id, tool: data.ActivityType})
		return nil
	}
	if a.config != nil {
		return nil
	}
	var cfg workflows.WorkerConfig
	if err := decodePayload(m.GetDetails()["result"], &cfg); err != nil {
		return fmt.Errorf("the %s marker's result: %w", workflows.ConfigActivity, err)
	}
	a.configAt = id
	a.takeConfig(&cfg)
	return nil
}

// takeConfig holds the run to the worker's config it recorded (its
// toolgate.config marker, or for a continued run the carry): its tool specs
// and its policy, unless the caller gave one.
func (a *auditor) takeConfig(cfg *workflows.WorkerConfig) {
	a.config = cfg
	if cfg.Policy != nil {
		a.rep.Recorded = true
		if a.pol == nil {
			a.pol = cfg.Policy
		}
	}
}

// pendingToken is a token to verify once the whole history is read (the
// policy is recorded after the start).
type pendingToken struct {
	at     int // entry index
	token  string
	action string
	in     *workflows.DecisionInput // approve and reject: the payload it came with
	note   *workflows.RewindNote    // a rewind: the note it came with
}

// decision makes the entry of an approve, reject, respond, grant, revoke or withdraw update or
// signal; it returns its index, or -1 for anything else.
func (a *auditor) decision(at time.Time, id int64, via, name string, p *commonpb.Payloads) int {
	e := Entry{At: at, EventID: id, Via: via, Problem: "pending"}
	switch name {
	case workflows.UpdateApprove, workflows.UpdateReject, workflows.UpdateRespond:
		var in workflows.DecisionInput
		if err := decodePayload(p, &in); err != nil {
			e.Kind, e.Problem = name, "malformed payload: "+err.Error()
			break
		}
		e.CallID, e.Digest = in.CallID, in.ArgsDigest
		a.inputs[len(a.rep.Entries)] = decisionPayload{approve: name == workflows.UpdateApprove, in: &in}
		if in.Token == "" {
			e.Kind, e.Approver = KindUnsigned, in.Approver
			e.Result = name // what it asked for; the update's answer replaces it
			break
		}
		e.Kind, e.Approver = name, peekApprover(in.Token)
		a.tokens = append(a.tokens, pendingToken{at: len(a.rep.Entries), token: in.Token, action: name, in: &in})
	case workflows.UpdateWithdraw:
		var in workflows.WithdrawInput
		if err := decodePayload(p, &in); err != nil {
			e.Kind, e.Problem = KindWithdraw, "malformed payload: "+err.Error()
			break
		}
		e.Kind, e.CallID, e.Approver, e.Result, e.Problem = KindWithdraw, in.CallID, workflows.WithdrawnBy, name, ""
	case workflows.UpdateGrant, workflows.UpdateRevoke:
		if via != ViaUpdate {
			return -1 // not a signal the run takes
		}
		var in workflows.TokenInput
		e.Kind = name
		if err := decodePayload(p, &in); err != nil || in.Token == "" {
			e.Problem = "malformed payload: no token"
			break
		}
		e.Approver = peekApprover(in.Token)
		a.tokens = append(a.tokens, pendingToken{at: len(a.rep.Entries), token: in.Token, action: name})
	default:
		return -1
	}
	a.rep.Entries = append(a.rep.Entries, e)
	return len(a.rep.Entries) - 1
}

// finish verifies the tokens, adds the run's own decisions from its trace,
// and orders the entries by time.
func (a *auditor) finish() {
	a.rep.Policy = a.pol
	if a.pol != nil {
		a.engine, a.engErr = policy.Compile(a.pol)
	}
	if a.startAt >= 0 && a.closedAs == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED &&
		(strings.Contains(a.failMsg, "request_token refused") || a.rep.Entries[a.startAt].Kind == KindFork && strings.Contains(a.failMsg, "fork refused")) {
		a.rep.Entries[a.startAt].Applied = false
		a.rep.Entries[a.startAt].Result = "refused: " + a.failMsg
	}
	for _, t := range a.tokens {
		a.verify(t)
	}
	for i := range a.rep.Entries {
		if e := &a.rep.Entries[i]; e.Kind == KindUnsigned || e.Unsigned {
			e.Problem = ProblemUnsigned
			switch {
			case !a.rep.Recorded:
			case e.Kind == KindRewind:
				e.Problem = "unsigned: the run's policy takes a rewind only signed by an operator"
			case e.Kind == KindFork:
				e.Problem = "unsigned: the run's policy takes a fork only signed by an operator"
			default:
				e.Problem = "unsigned: the run's policy takes only signed decisions"
			}
		}
	}
	a.checkRewinds()
	a.checkWriters()
	a.executions()
	a.trace()
	a.guards()
	switch a.closedAs {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		a.rep.Notes = append(a.rep.Notes, "the run continued as new: the decisions its rules and grants took are in the trace of the chain's last run")
	case enumspb.EVENT_TYPE_UNSPECIFIED:
		a.rep.Notes = append(a.rep.Notes, "the run had not closed when exported: the decisions its rules and grants took are not in this history")
	default:
		a.rep.Notes = append(a.rep.Notes, "the run did not complete: the decisions its rules and grants took are not in this history")
	}
	slices.SortStableFunc(a.rep.Entries, func(x, y Entry) int { return x.At.Compare(y.At) })
}
