package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file lets a run that waits for a human continue as new (rules
// version 5): whatever arrives while a call waits — refused signals of any
// size among it — grows the history, and a run that never continued as new
// while waiting would be ended by the server at its history limit. When a
// continue-as-new is due and calls wait, each waiting call parks: it stops
// waiting where it stands, and the next run of the chain takes it up at the
// same point, with the same question (requested_at, expires_at), the same
// approvals so far, and the same call id.

// parkState is a run's parking: the run continues as new while calls wait;
// every wait parks, and parked holds them until the carry is made. resumed
// are the waits the previous run parked, taken up; firstLength is the
// history's length when this run started.
type parkState struct {
	parking     bool
	parked      []*parked
	resumed     []*pending
	firstLength int
}

// Bounds that keep the parked calls of a step within the carry.
const (
	// MaxStepArgsBytes bounds the arguments of one step's calls in all (each
	// within MaxArgsBytes); the calls past it are answered with an error,
	// not run.
	MaxStepArgsBytes = 256 << 10
	// MaxWaitingBytes bounds the arguments, edited arguments and answers of
	// the calls waiting at once; an edit or an answer past it is refused.
	MaxWaitingBytes = 512 << 10
	// minParkEvents is how much a run's history must have grown since it
	// started before its own history_limit parks its waiting calls (Temporal's
	// suggestion parks them at once), so a low limit cannot loop.
	minParkEvents = 100
)

// ParkedCall is a call that waited for a human when its run continued as
// new: the next run takes up the wait and goes on from there.
type ParkedCall struct {
	Wait ParkedWait `json:"wait"`
	// Depth is the call's depth in a chain of fallbacks (0: proposed by the planner).
	Depth int `json:"depth,omitempty"`
	// Round is the round of the tool's activity that asked (the wait is the
	// tool's own interrupt); 0: the call waits at the gate.
	Round int `json:"round,omitempty"`
	// Note is what the planner is told with the outcome: an approver edited
	// the call it proposed.
	Note string `json:"note,omitempty"`
	// FallbackOf lists the calls this call is the fallback of, innermost first.
	FallbackOf []FallbackFrame `json:"fallback_of,omitempty"`
	// Counted: a guard of the fleet ledger counts the call (its trace says
	// "reserved"), so the run that takes it up says when the ledger
	// releases it.
	Counted bool `json:"counted,omitempty"`
}

// ParkedWait is a waiting call's question and the decisions on it so far.
type ParkedWait struct {
	Interrupt
	Need         policy.Approvers `json:"need"`
	ProposedNeed policy.Approvers `json:"proposed_need"`
	Notes        []string         `json:"notes,omitempty"`
	Data         json.RawMessage  `json:"data,omitempty"`
	Decided      bool             `json:"decided,omitempty"`
	By           string           `json:"decided_by,omitempty"`
	Approval     *tool.Approval   `json:"approval,omitempty"`
	Rejection    string           `json:"rejection,omitempty"`
	// Via and Links (rules version 9): the decisions made by link so far,
	// and the links the run's deliveries sent for this wait.
	Via   []string    `json:"via,omitempty"`
	Links []LinkProof `json:"links,omitempty"`
	// Tokens (rules version 11): the signed approvals so far, which the
	// permit's worker verifies against its own policy.
	Tokens []string `json:"tokens,omitempty"`
}

// FallbackFrame is a call that failed and is answered by the fallback in
// the frame above it.
type FallbackFrame struct {
	Call       tool.Call `json:"call"`
	Attempts   int32     `json:"attempts"`
	Error      string    `json:"error"`
	FallbackID string    `json:"fallback_id"`
	Fallback   string    `json:"fallback"`
}

// parked is a parked call as the run holds it until it continues as new.
type parked struct {
	wait    *pending // still in r.pending: a decision that arrives before the switch is carried
	depth   int
	round   int
	note    string
	frames  []FallbackFrame
	counted bool
}

// parkDue reports whether the waiting calls should park: the run continues
// as new while calls wait (Temporal suggests it, or the history reached the
// run's history_limit having grown by minParkEvents since the run started).
// Once one call has parked, every other wait parks too.
func (r *run) parkDue(ctx workflow.Context) bool {
	if r.parking {
		return true
	}
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	n := r.historyLength(ctx)
	return r.in.HistoryLimit > 0 && n >= r.in.HistoryLimit && n >= r.firstLength+minParkEvents
}

// statusParked is the status of a parked call's outcome; it never reaches
// the trace, the transcript or the planner.
const statusParked = "parked"

// carryParked keeps the step's parked calls for the carry, and writes the
// outcomes of the step's other calls into the transcript. Their waits are
// written into the carry as they stand when it is made (parkedCarry), after
// the signals that came with the switch are applied: a decision among them
// is carried too.
func (r *run) carryParked(calls []tool.Call, outs []outcome) {
	r.parked = nil
	for i, c := range calls {
		if pk := outs[i].parked; pk != nil {
			r.parked = append(r.parked, pk)
			continue
		}
		r.addTranscript(plan.Entry{Role: plan.RoleTool, CallID: c.ID, Tool: c.Tool,
			Status: outs[i].Status, Result: outs[i].Result, Error: outs[i].Error, Note: outs[i].Note})
	}
	r.CarriedBlockedOn = r.blockedOn
}

// parkedCarry is the parked calls as the carry holds them, their waits as
// they stand now.
func (r *run) parkedCarry() []ParkedCall {
	var out []ParkedCall
	for _, pk := range r.parked {
		out = append(out, pk.carried())
	}
	return out
}

func (pk *parked) carried() ParkedCall {
	p := pk.wait
	return ParkedCall{Wait: ParkedWait{Interrupt: p.Interrupt, Need: p.need, ProposedNeed: p.proposed, Notes: p.notes, Data: p.data,
		Decided: p.decided, By: p.by, Approval: p.approval, Rejection: p.reason, Via: p.via, Links: p.links, Tokens: p.tokens},
		Depth: pk.depth, Round: pk.round, Note: pk.note, FallbackOf: pk.frames, Counted: pk.counted}
}

// restoreParked takes up the waits the previous run parked (in r.pending,
// so queries and decisions see them from the first workflow task).
func (r *run) restoreParked() []*pending {
	var ps []*pending
	for _, pc := range r.Parked {
		w := pc.Wait
		p := &pending{Interrupt: w.Interrupt, need: w.Need, proposed: w.ProposedNeed, notes: w.Notes, data: w.Data,
			decided: w.Decided, by: w.By, approval: w.Approval, reason: w.Rejection, via: w.Via, links: w.Links, tokens: w.Tokens}
		r.pending = append(r.pending, p)
		ps = append(ps, p)
	}
	r.blockedOn = r.CarriedBlockedOn
	return ps
}

// resumeStep finishes the step the previous run parked: each parked call
// waits again, from where it stood, and goes on as it would have.
func (r *run) resumeStep(ctx workflow.Context) (calls []tool.Call, outs []outcome) {
	parkedCalls, waits := r.Parked, r.resumed
	r.Parked, r.CarriedBlockedOn, r.resumed = nil, nil, nil
	outs = make([]outcome, len(parkedCalls))
	calls = make([]tool.Call, len(parkedCalls))
	wg := workflow.NewWaitGroup(ctx)
	for i, pc := range parkedCalls {
		calls[i] = tool.Call{ID: pc.Wait.CallID, Tool: pc.Wait.Tool, Args: pc.Wait.CallArgs}
		if n := len(pc.FallbackOf); n > 0 { // the call the planner proposed: the outermost
			calls[i] = pc.FallbackOf[n-1].Call
		}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			outs[i] = r.resume(ctx, pc, waits[i])
		})
	}
	wg.Wait(ctx)
	return calls, outs
}

// reservedCall is the call as the gate reserved it: with the arguments
// proposed, before any approver's edit.
func reservedCall(p *pending) tool.Call {
	args := p.CallArgs
	if p.OriginalArgs != nil {
		args = p.OriginalArgs
	}
	return tool.Call{ID: p.CallID, Tool: p.Tool, Args: args}
}

// fallbackError says that a call failed and its fallback answered it.
func fallbackError(toolName string, attempts int32, errText, fallback, fallbackID string) string {
	return fmt.Sprintf("%s failed after %d attempts (%s); answered by fallback %s (%s)", toolName, attempts, errText, fallback, fallbackID)
}

// editNote tells the planner that an approver edited the call it proposed.
func editNote(approval *tool.Approval, args, proposed json.RawMessage) string {
	return fmt.Sprintf("an approver (%s) edited this call's arguments before approving it: it ran with %s instead of the proposed %s; do not propose the original again",
		approval.Approver, clip(string(args), MaxArgsBytes/2), clip(string(proposed), MaxArgsBytes/2))
}

// waitingBytes is what the waiting calls hold of arguments, edits, answers
// and signed approvals.
func (r *run) waitingBytes() int {
	n := 0
	for _, p := range r.pending {
		n += len(p.CallArgs) + len(p.OriginalArgs) + len(p.data)
		for _, t := range p.tokens {
			n += len(t)
		}
	}
	return n
}
