package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
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
	reqBy    string         // the verified requester
	startAt  int            // index of the start entry; -1 none
	updates  map[string]int // update id -> entry index
	tokens   []pendingToken
	runRes   *workflows.RunResult
	traceAt  int64 // the event holding the trace
	closedAs enumspb.EventType
	failMsg  string
}

func (a *auditor) event(ev *historypb.HistoryEvent) error {
	at, id := ev.GetEventTime().AsTime(), ev.GetEventId()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a.startAt = -1
		var in struct {
			Goal         string `json:"goal"`
			RequestToken string `json:"request_token"`
			Carry        *struct {
				RequestedBy string `json:"requested_by"`
			} `json:"carry"`
		}
		if err := decodePayload(ev.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil {
			return fmt.Errorf("the run's input: %w", err)
		}
		a.goal = in.Goal
		if in.Carry != nil {
			a.reqBy = in.Carry.RequestedBy
			a.rep.Notes = append(a.rep.Notes, "a continued run: its earlier decisions are in the histories of the runs before it")
		}
		if in.RequestToken != "" {
			a.startAt = len(a.rep.Entries)
			a.rep.Entries = append(a.rep.Entries, Entry{At: at, EventID: id, Kind: KindStart, Via: ViaStart, Applied: true,
				Approver: peekApprover(in.RequestToken), Problem: "pending"})
			a.tokens = append(a.tokens, pendingToken{at: a.startAt, token: in.RequestToken, action: signed.ActionStart})
		}
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		return a.marker(ev.GetMarkerRecordedEventAttributes())
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
			Grant    struct {
				ID string `json:"id"`
			} `json:"grant"`
		}
		if err := decodePayload(u.GetOutcome().GetSuccess(), &res); err == nil {
			e.Result = res.Decision
			if res.Grant.ID != "" {
				e.Result = res.Grant.ID
			}
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
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

// marker takes the worker's config (and so its policy) from the
// toolgate.config local activity's marker.
func (a *auditor) marker(m *historypb.MarkerRecordedEventAttributes) error {
	if m.GetMarkerName() != "LocalActivity" || a.config != nil {
		return nil
	}
	var data struct {
		ActivityType string `json:"ActivityType"`
	}
	if err := decodePayload(m.GetDetails()["data"], &data); err != nil || data.ActivityType != workflows.ConfigActivity {
		return nil
	}
	var cfg workflows.WorkerConfig
	if err := decodePayload(m.GetDetails()["result"], &cfg); err != nil {
		return fmt.Errorf("the %s marker's result: %w", workflows.ConfigActivity, err)
	}
	a.config = &cfg
	if cfg.Policy != nil {
		a.rep.Recorded = true
		if a.pol == nil {
			a.pol = cfg.Policy
		}
	}
	return nil
}

// pendingToken is a token to verify once the whole history is read (the
// policy is recorded after the start).
type pendingToken struct {
	at     int // entry index
	token  string
	action string
	in     *workflows.DecisionInput // approve and reject: the payload it came with
}

// decision makes the entry of an approve, reject, grant or revoke update or
// signal; it returns its index, or -1 for anything else.
func (a *auditor) decision(at time.Time, id int64, via, name string, p *commonpb.Payloads) int {
	e := Entry{At: at, EventID: id, Via: via, Problem: "pending"}
	switch name {
	case workflows.UpdateApprove, workflows.UpdateReject:
		var in workflows.DecisionInput
		if err := decodePayload(p, &in); err != nil {
			e.Kind, e.Problem = name, "malformed payload: "+err.Error()
			break
		}
		e.CallID, e.Digest = in.CallID, in.ArgsDigest
		if in.Token == "" {
			e.Kind, e.Approver = KindUnsigned, in.Approver
			e.Result = name // what it asked for; the update's answer replaces it
			break
		}
		e.Kind, e.Approver = name, peekApprover(in.Token)
		a.tokens = append(a.tokens, pendingToken{at: len(a.rep.Entries), token: in.Token, action: name, in: &in})
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
	if a.startAt >= 0 && a.closedAs == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED && strings.Contains(a.failMsg, "request_token refused") {
		a.rep.Entries[a.startAt].Applied = false
		a.rep.Entries[a.startAt].Result = "refused: " + a.failMsg
	}
	for _, t := range a.tokens {
		a.verify(t)
	}
	for i := range a.rep.Entries {
		if e := &a.rep.Entries[i]; e.Kind == KindUnsigned {
			e.Problem = ProblemUnsigned
			if a.rep.Recorded {
				e.Problem = "unsigned: the run's policy takes only signed decisions"
			}
		}
	}
	a.trace()
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
