package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// pending is a call paused for a human: the interrupt shown to operators and,
// once it arrives, the decision.
type pending struct {
	Interrupt
	need     policy.Approvers // who may decide; Count approvals decide it (Interrupt.ApprovedBy so far)
	proposed policy.Approvers // who might decide the call as proposed: an edit never needs fewer
	notes    []string         // the approvals' notes
	tokens   []string         // the approvals' signed tokens (under a policy): the proof the permit's worker verifies
	data     json.RawMessage  // the approvals' answer to the tool's question (interrupts)
	response json.RawMessage  // a human's answer in the tool's place (respond)
	cancel   bool             // the rejection cancels the call
	decided  bool
	by       string         // who decided
	via      []string       // "NAME: CHANNEL" for each decision made by a click on a notification
	links    []LinkProof    // the links the run's deliveries sent for this wait (links.go)
	approval *tool.Approval // set when approved
	reason   string         // set when rejected
}

// maxRefusals bounds the refused decisions kept in state.
const maxRefusals = 20

// askStage asks a human about the call: the gate's question (kind gate) or
// the tool's own (kind interrupt), on this exact call. Who may answer is the
// rule's approvers (f.asked), or the tool's.
func (r *run) askStage(ctx workflow.Context, f *flight) stage {
	c := f.c
	digest, _ := tool.Digest(c.Tool, c.Args)
	now := r.now()
	timeout := time.Duration(r.in.ApprovalTimeout)
	p := &pending{Interrupt: Interrupt{CallID: c.ID, Tool: c.Tool, CallArgs: c.Args, ArgsDigest: digest,
		Kind: f.kind, Reason: clip(f.question, MaxTextBytes), RequestedAt: now, ExpiresAt: now.Add(timeout)}}
	if spec := specOf(r.Config, c.Tool); spec != nil {
		p.Destructive = spec.Destructive
	}
	switch v := f.asked; {
	case r.engine == nil:
		p.setNeed(policy.Approvers{Count: 1}, false)
	case v != nil:
		p.Rule = v.Rule
		p.setNeed(v.Need, true)
	default:
		p.setNeed(r.engine.Policy().ToolApprovers(c.Tool), true)
	}
	p.proposed = p.need
	r.pending = append(r.pending, p)
	r.publish(ctx)
	f.wait, f.told = p, &told{event: NotifyWaiting}
	return stageWait
}

// waitStage waits for the decision on the call's question. An approval lets
// the call on (at the gate, an approver may have edited its arguments: f.c
// then holds the edited ones); a rejection, an answer in the tool's place or
// no decision in time (a rejection) ends it. A wait that parks (the run
// continues as new while it waits: park.go) leaves the question pending.
func (r *run) waitStage(ctx workflow.Context, f *flight) stage {
	p := f.wait
	timeout := time.Duration(r.in.ApprovalTimeout)
	decided, parks, err := r.awaitDecision(ctx, p, max(p.ExpiresAt.Sub(r.now()), 0))
	if parks {
		pk := &parked{wait: p, depth: f.depth, counted: r.held[r.callKey(ctx, tool.Call{ID: f.c.ID, Tool: f.c.Tool, Args: f.counted})]}
		if f.kind == KindInterrupt {
			pk.round = f.round
		}
		return f.end(outcome{Status: statusParked, parked: pk})
	}
	r.dropPending(p)
	r.publish(ctx)
	switch {
	case err != nil:
		return f.end(outcome{Status: TraceError, Error: "run cancelled while waiting for approval"})
	case !decided:
		msg := fmt.Sprintf("no decision within %s: treated as rejected", timeout)
		if len(p.ApprovedBy) > 0 {
			msg += fmt.Sprintf(" (%d of %d approvals: %s)", len(p.ApprovedBy), p.need.Count, strings.Join(p.ApprovedBy, ", "))
		}
		r.record(f.c, TraceRecord{Status: TraceExpired, Reason: msg, Rule: p.Rule})
		f.told = &told{event: NotifyExpired, decision: TraceExpired}
		return f.end(outcome{Status: TraceExpired, Error: r.notExecuted(msg)})
	case p.response != nil:
		r.record(f.c, TraceRecord{Status: TraceResponded, Approver: p.by, Reason: p.reason, Rule: p.Rule, Result: p.response, Via: p.viaText()})
		f.told = &told{event: NotifyDecided, decision: TraceResponded, by: p.by}
		return f.end(outcome{Status: TraceResponded, Result: p.response, Note: respondedNote(p)})
	case p.approval == nil:
		status := TraceRejected
		if p.cancel {
			status = TraceCancelled
		}
		r.record(f.c, TraceRecord{Status: status, Approver: p.by, Reason: p.reason, Rule: p.Rule, Via: p.viaText()})
		f.told = &told{event: NotifyDecided, decision: status, by: p.by}
		return f.end(outcome{Status: status, Error: r.notExecuted(fmt.Sprintf("%s by %s: %s", status, p.by, p.reason))})
	}
	f.c.Args = p.CallArgs // an approver's edit, if they made one
	status := TraceApproved
	if p.OriginalArgs != nil {
		status = TraceEdited
	}
	r.record(f.c, TraceRecord{Status: status, Approver: p.approval.Approver, Reason: p.approval.Note, Rule: p.Rule, OriginalArgs: p.OriginalArgs, Via: p.viaText()})
	f.told = &told{event: NotifyDecided, decision: status, by: p.approval.Approver}
	f.approval = p.approval
	if f.kind == KindInterrupt { // the tool's question answered: it runs again
		f.round++
		return stageRun
	}
	f.decided = true // the fleet ledger checks the call again
	return stageGuard
}

// awaitDecision waits until p is decided or timeout passes, and reports
// whether it was decided. Its timer is cancelled when the decision comes
// first, so a decided call leaves no timer to fire (and wake the run) later.
//
// It also parks: when the run is due to continue as new (parkDue), a wait
// not yet decided stops, and reports so.
func (r *run) awaitDecision(ctx workflow.Context, p *pending, timeout time.Duration) (decided, parks bool, err error) {
	tctx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimer(tctx, timeout)
	err = workflow.Await(ctx, func() bool { return p.decided || timer.IsReady() || r.parkDue(ctx) })
	if err == nil && !p.decided && !timer.IsReady() {
		r.parking = true
		return false, true, nil
	}
	return p.decided, false, err
}

func (r *run) dropPending(p *pending) {
	for i, q := range r.pending {
		if q == p {
			r.pending = append(r.pending[:i:i], r.pending[i+1:]...)
			return
		}
	}
}

// validateDecision says why a decision cannot apply, or which pending call it
// decides and how.
func (r *run) validateDecision(in DecisionInput, v verb) (*pending, ruling, error) {
	approve := v == verbApprove
	if in.CallID == "" {
		return nil, ruling{}, refusal(RefusedDecision, "call_id is empty")
	}
	if err := r.checkVerb(in, v); err != nil {
		return nil, ruling{}, err
	}
	if err := r.checkNamed(in, v); err != nil {
		return nil, ruling{}, err
	}
	if !r.ready && len(r.pending) > 0 { // calls a continued run took up
		return nil, ruling{}, refusal(RefusedNotWaiting, "the run is starting (loading its tools and policy): send the decision again")
	}
	for _, p := range r.pending {
		if p.CallID != in.CallID || p.decided {
			continue
		}
		d := ruling{approve: approve, verb: v, by: in.Approver, note: in.Note, reason: in.Reason, cancel: in.Cancel, via: in.Via, link: in.Link}
		if err := r.checkVia(in); err != nil {
			return nil, ruling{}, err
		}
		if r.engine != nil {
			var err error
			if d, err = r.verifyDecision(p, &in, v); err != nil {
				return nil, ruling{}, err
			}
		}
		if err := r.checkBinding(p, in); err != nil {
			return nil, ruling{}, err
		}
		if err := r.checkLink(p, d); err != nil {
			return nil, ruling{}, err
		}
		if r.engine != nil {
			if err := r.mayDecide(p, d.by, approve); err != nil {
				return nil, ruling{}, err
			}
		}
		if len(in.EditedArgs) > 0 {
			e, err := r.checkEdit(p, in.EditedArgs, d)
			if err != nil {
				return nil, ruling{}, err
			}
			d.edit = e
		} else if d.editDigest != "" {
			return nil, ruling{}, refusal(RefusedEdit, "%s's token approves edited arguments: send them as edited_args", d.by)
		}
		if len(in.Data) > 0 {
			data, err := r.checkData(p, in.Data, d)
			if err != nil {
				return nil, ruling{}, err
			}
			d.data = data
		} else if d.dataDigest != "" && v != verbRespond {
			return nil, ruling{}, refusal(RefusedDecision, "%s's token answers with data: send it as data", d.by)
		}
		if v == verbRespond {
			resp, err := r.checkResponse(p, in.Response, d)
			if err != nil {
				return nil, ruling{}, err
			}
			d.response = resp
		}
		return p, d, nil
	}
	return nil, ruling{}, r.notWaiting(in.CallID)
}

// checkBinding makes sure a decision names the arguments and the question
// its approver saw.
func (r *run) checkBinding(p *pending, in DecisionInput) error {
	if in.ArgsDigest == "" {
		return refusal(RefusedDecision, "args_digest is required: a decision for call %s (%s) must name the args_digest of the arguments its approver saw (the state query lists it with each interrupt)",
			p.CallID, p.Tool)
	}
	if in.ArgsDigest != "" && in.ArgsDigest != p.ArgsDigest {
		return refusal(RefusedDigestMismatch, "args_digest %q does not match call %s (%s %s): the decision was made for other arguments",
			clip(in.ArgsDigest, 64), p.CallID, p.Tool, clip(string(p.CallArgs), 200))
	}
	if kind := in.Kind; kind != p.Kind && !(kind == "" && p.Kind == KindGate) {
		if p.Kind == KindInterrupt {
			return refusal(RefusedDecision, "call %s is held by %s's own check (%s): a decision for it must say \"kind\":\"interrupt\", so an approval meant for the gate cannot answer it",
				p.CallID, p.Tool, clip(p.Reason, 200))
		}
		return refusal(RefusedDecision, "call %s waits at the gate, not on an interrupt: kind %q does not fit", p.CallID, clip(string(kind), 32))
	}
	return nil
}

// notWaiting says why a call id names no call waiting for a decision.
func (r *run) notWaiting(id string) error {
	var n int
	if _, err := fmt.Sscanf(id, "c-%d", &n); err != nil || n < 1 || fmt.Sprintf("c-%d", n) != id {
		return refusal(RefusedUnknownCall, "call %q is not a call id of this run (they are c-1, c-2, …)", clip(id, MaxNameBytes))
	}
	switch {
	case n <= r.Calls:
		return refusal(RefusedNotWaiting, "call %s is not waiting for a decision (already decided, not at the gate yet, or it never needed one)", id)
	case r.Calls == 0:
		return refusal(RefusedUnknownCall, "call %s has not been proposed yet: this run has proposed no call so far", id)
	default:
		return refusal(RefusedUnknownCall, "call %s has not been proposed yet: this run's calls so far are c-1 … c-%d", id, r.Calls)
	}
}

// decide applies an approval (approve) or a rejection to a pending call. One
// rejection decides it; approvals decide it once a quorum of them is in.
// Under a policy, the decision's use is first claimed
// on the server (spent.go), and the decision checked again: the run may
// have moved on meanwhile.
func (r *run) decide(ctx workflow.Context, v verb, in DecisionInput) (DecisionResult, error) {
	approve := v == verbApprove
	p, d, err := r.validateDecision(in, v)
	if err != nil {
		return DecisionResult{}, err
	}
	if r.engine != nil {
		if err := r.claimDecision(ctx, d); err != nil {
			return DecisionResult{}, err
		}
		if p, d, err = r.validateDecision(in, v); err != nil {
			return DecisionResult{}, err
		}
	}
	r.spend(d.token, d.claims)
	approver := clip(strings.TrimSpace(d.by), MaxNameBytes)
	if approver == "" {
		approver = "(unnamed)"
	}
	res := DecisionResult{CallID: p.CallID, Tool: p.Tool, Approver: approver}
	if d.via != "" {
		p.via = append(p.via, approver+": "+d.via)
	}
	if v == verbRespond {
		p.decided, p.by, p.response = true, approver, d.response
		p.reason = clip(strings.TrimSpace(d.note), MaxTextBytes)
		res.Decision = TraceResponded
		return res, nil
	}
	if !approve {
		p.decided, p.by, p.cancel = true, approver, d.cancel
		p.reason = clip(strings.TrimSpace(d.reason), MaxTextBytes)
		if p.reason == "" {
			p.reason = "no reason given"
		}
		res.Decision = TraceRejected
		if d.cancel {
			res.Decision = TraceCancelled
		}
		return res, nil
	}
	if d.edit != nil {
		p.applyEdit(d.edit, approver, r.engine != nil)
	}
	if d.data != nil {
		p.data = d.data
	}
	p.ApprovedBy = append(p.ApprovedBy, approver)
	p.notes = append(p.notes, clip(d.note, MaxTextBytes))
	if d.token != "" {
		p.tokens = append(p.tokens, d.token)
	}
	res.Decision = TraceApproved
	res.ApprovedBy, res.Needed, res.ArgsDigest = slices.Clone(p.ApprovedBy), p.need.Count, p.ArgsDigest
	if len(p.ApprovedBy) < p.need.Count {
		res.Decision = DecisionCounted
		return res, nil
	}
	p.decided, p.by = true, strings.Join(p.ApprovedBy, ", ")
	p.approval = &tool.Approval{Approver: p.by, Note: joinNotes(p.ApprovedBy, p.notes), Kind: p.Kind, Data: p.data, Proof: slices.Clone(p.tokens)}
	return res, nil
}

// joinNotes is one approval's note, or each approver's note by name.
func joinNotes(by, notes []string) string {
	if len(notes) == 1 {
		return notes[0]
	}
	var parts []string
	for i, n := range notes {
		if n != "" {
			parts = append(parts, by[i]+": "+n)
		}
	}
	return clip(strings.Join(parts, "; "), MaxTextBytes)
}

// decisionError is a refused decision: its failure type (Refused*) and why.
type decisionError struct{ kind, msg string }

func (e *decisionError) Error() string { return e.msg }

func refusal(kind, format string, args ...any) error {
	return &decisionError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// asFailure is how an update answers a refusal: an application error whose
// type says which refusal it is (the client package tells them apart by it).
func asFailure(err error) error {
	var de *decisionError
	if errors.As(err, &de) {
		return temporal.NewApplicationError(de.msg, de.kind)
	}
	return err
}

// decodeDecision decodes an approve or reject payload strictly (r.decode).
func (r *run) decodeDecision(raw []byte) (DecisionInput, error) {
	var in DecisionInput
	if err := r.decode(raw, &in); err != nil {
		return DecisionInput{}, refusal(RefusedDecision, "decision payload refused (want {\"call_id\",\"args_digest\",\"approver\",\"note\"|\"reason\",\"kind\"}): %s", clip(err.Error(), 300))
	}
	return in, nil
}

// decode decodes a payload from outside strictly: no unknown field, no key
// given twice, nothing after the object, no key spelt in another case than
// its field ("CALL_ID"), which encoding/json would take.
func (r *run) decode(raw []byte, v any) error {
	return tool.DecodeExact(raw, v)
}

// ReservedApprovers start the approver names the run writes itself: a rule
// that decided ("rule:small-refunds"), a grant that answered ("grant:carol")
// and always_approve ("policy:always_approve"). No decision may name itself
// so (in any case), nor with a name that looks like one (names.LooksLike:
// "ｒule:x", "гrant:bob").
var ReservedApprovers = []string{"rule:", "grant:", "policy:"}

// checkNamed refuses an approver whose name is not one that reads as it is
// written, or that the run writes itself (checkApprover), and a link secret
// sent without via.
func (r *run) checkNamed(in DecisionInput, v verb) error {
	if err := r.checkApprover(in, v); err != nil {
		return err
	}
	if in.Link != "" && in.Via == "" {
		return refusal(RefusedDecision, "link refused: a link's secret goes with a decision by link (via)")
	}
	if len(in.Link) > MaxNameBytes {
		return refusal(RefusedDecision, "link refused: %d bytes, at most %d", len(in.Link), MaxNameBytes)
	}
	return nil
}

// ViaWebhook is the channel of a decision made on the confirm page a
// webhook's link opened (a run with no policy; under one, the approver signs).
const ViaWebhook = "webhook"

// viaText names the decisions made by a click on a notification, and how.
func (p *pending) viaText() string { return strings.Join(p.via, ", ") }

// checkVia refuses a channel a run does not know.
func (r *run) checkVia(in DecisionInput) error {
	switch {
	case in.Via == "":
		return nil
	case in.Via != policy.ViaSlack && in.Via != policy.ViaEmail && in.Via != ViaWebhook:
		return refusal(RefusedDecision, "via %q refused: want slack, email or webhook", clip(in.Via, 32))
	}
	return nil
}
