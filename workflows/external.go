package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// This file is the external planner (plan.KindExternal): the run's calls are
// proposed from outside, one at a time, through the propose update — by an
// MCP client through toolgate's MCP server, say. Each proposal is a call
// like any other: numbered, gate → memo → run → fallback, in the trace and
// the transcript. Calls run side by side, so a call that waits for a human
// holds back only itself; the update answers once its call has finished, or
// waits for a human, and the call query tells how it stands after that.

// externalState is the external planner's calls: root is the run's own
// context, which its calls run in; ext the calls it remembers (carried as
// Carry.External); openCalls those not finished; proposals the proposals
// this run took; roots the call each fallback answers for.
type externalState struct {
	root      workflow.Context
	ext       []*ExternalCall
	openCalls int
	proposals int
	roots     map[string]string
}

// Names of the external planner's update and query.
const (
	// UpdatePropose takes a Proposal and answers a CallStatus.
	UpdatePropose = "propose"
	// QueryCall takes a call id and answers its CallStatus.
	QueryCall = "call"
)

// RefusedBusy is the failure type of a proposal refused for now: the run has
// MaxOpenCalls calls open, or is continuing as new. Propose it again later.
const RefusedBusy = "Busy"

// Bounds of the external planner.
const (
	// MaxOpenCalls bounds the calls of a run that are proposed and not yet
	// finished (running, or waiting for a human).
	MaxOpenCalls = 32
	// MaxKeyBytes bounds an idempotency key.
	MaxKeyBytes = 200
	// MaxExternalKept is how many finished calls a run remembers (so a
	// proposal with the same key is answered with the call's outcome), and
	// ExternalResultBytes how many bytes of their results in all; an older
	// result is forgotten (result_dropped), and then an older call.
	MaxExternalKept     = 256
	ExternalResultBytes = 256 << 10
	// maxProposals is how many proposals one run takes before it continues
	// as new (Temporal refuses updates past 2,000 per run by default).
	maxProposals = 1000
)

// Proposal is the payload of the propose update: a call the external planner
// proposes.
type Proposal struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Key is the caller's idempotency key. A proposal whose key names a call
	// the run remembers attaches to that call — which must be of the same
	// tool and arguments, or the proposal is refused — and is answered with
	// its outcome; the call never runs twice. Without a key, a proposal of
	// the same tool and arguments as an unfinished call attaches to it.
	Key string `json:"key,omitempty"`
	// Notify is the workflow id of a workflow of the run's namespace that
	// waits for the call (the Nexus door's call workflow, NotifyPrefix…):
	// from rules version 15 the run signals it SignalCallEnded when the
	// call ends, so the waiter polls nothing (CallStatus.Notifies).
	Notify string `json:"notify,omitempty"`
}

// ExternalCall is a call the external planner proposed, as the run
// remembers it (carried over continue-as-new).
type ExternalCall struct {
	CallID     string `json:"call_id"`
	Key        string `json:"key,omitempty"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args_digest,omitempty"`
	// Done: the call has finished, with Status (a trace status: ok,
	// cache_hit, responded, rejected, cancelled, expired, blocked, error),
	// Result or Error, and Note (an approver edited the arguments, or a
	// human answered in the tool's place).
	Done   bool            `json:"done,omitempty"`
	Status string          `json:"status,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// ResultDropped: the result is no longer kept (ExternalResultBytes).
	ResultDropped bool   `json:"result_dropped,omitempty"`
	Error         string `json:"error,omitempty"`
	Note          string `json:"note,omitempty"`
	// Notify are the waiters the run signals when the call ends
	// (Proposal.Notify), at most MaxNotify.
	Notify []string `json:"notify,omitempty"`
}

// CallStatus is what the propose update and the call query answer: the call
// and, while it is not done, the question it waits on (nil: it runs).
type CallStatus struct {
	ExternalCall
	// Attached: the proposal attached to a call proposed before (its key,
	// or the same unfinished call), and proposed nothing new.
	Attached bool       `json:"attached,omitempty"`
	Waiting  *Interrupt `json:"waiting,omitempty"`
	// Notifies: the proposal's waiter (Proposal.Notify) will be signalled
	// SignalCallEnded when the call ends; without it, the waiter must look.
	Notifies bool `json:"notifies,omitempty"`
}

// registerExternal sets up the propose update and the call query. Every run
// has them; only an external planner's run takes proposals.
func (r *run) registerExternal(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryCall, func(callID string) (CallStatus, error) {
		rec := r.extCall(callID)
		if rec == nil {
			return CallStatus{}, fmt.Errorf("run %s remembers no call %q proposed through %s (it keeps the last %d)",
				r.workflowID, clip(callID, MaxNameBytes), UpdatePropose, MaxExternalKept)
		}
		return r.callStatus(rec, false), nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdatePropose,
		func(ctx workflow.Context, raw json.RawMessage) (CallStatus, error) {
			r.proposals++
			p, err := r.decodeProposal(raw)
			if err != nil {
				return CallStatus{}, asFailure(err)
			}
			// A proposal may arrive with the start (update-with-start): take
			// it once the run knows its tools and policy.
			if err := workflow.Await(ctx, func() bool { return r.ready }); err != nil {
				return CallStatus{}, err
			}
			rec, attached, err := r.admit(p)
			if err != nil {
				return CallStatus{}, asFailure(err)
			}
			if err := workflow.Await(ctx, func() bool { return rec.Done || r.waitingFor(rec.CallID) != nil || r.parking }); err != nil {
				return CallStatus{}, err
			}
			// The waiter is taken only now, with the answer, for a call
			// that has not ended: one told Notifies is signalled, and
			// only it.
			st := r.callStatus(rec, attached)
			st.Notifies = r.watchCall(rec, p.Notify)
			return st, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error {
			p, err := r.decodeProposal(raw)
			if err == nil {
				_, err = r.checkProposal(p)
			}
			return asFailure(err)
		}})
}

// decodeProposal decodes a propose payload strictly and checks what the
// run's state does not decide: the planner, the tool's name, the sizes.
func (r *run) decodeProposal(raw []byte) (Proposal, error) {
	var p Proposal
	if r.in.Planner.Kind != plan.KindExternal {
		return p, refusal(RefusedInput, "proposal refused: run %s's planner is %q; only a run whose planner is %q takes proposals",
			r.workflowID, clip(r.in.Planner.Kind, MaxNameBytes), plan.KindExternal)
	}
	if len(raw) > 2*MaxArgsBytes+MaxKeyBytes+MaxNameBytes+64 {
		return p, refusal(RefusedInput, "proposal refused: %d bytes; a call's arguments may have at most %d bytes", len(raw), MaxArgsBytes)
	}
	if err := r.decode(raw, &p); err != nil {
		return p, refusal(RefusedInput, "proposal refused (want {\"tool\",\"args\",\"key\"}): %s", clip(err.Error(), 300))
	}
	switch {
	case strings.TrimSpace(p.Tool) == "":
		return p, refusal(RefusedInput, "proposal refused: tool is empty")
	case len(p.Tool) > MaxNameBytes:
		return p, refusal(RefusedInput, "proposal refused: a tool's name has at most %d bytes", MaxNameBytes)
	case len(p.Key) > MaxKeyBytes:
		return p, refusal(RefusedInput, "proposal refused: the idempotency key has %d bytes, at most %d", len(p.Key), MaxKeyBytes)
	}
	if err := checkNotify(p.Notify); err != nil {
		return p, err
	}
	return p, nil
}

// checkProposal says whether the run can take p now, and the call it
// attaches to, if any (the validator's check; admit makes it again when it
// takes p).
func (r *run) checkProposal(p Proposal) (*ExternalCall, error) {
	switch {
	case r.done != "":
		return nil, refusal(RefusedInput, "proposal refused: run %s has ended (%s)", r.workflowID, r.done)
	case r.Ended:
		return nil, refusal(RefusedInput, "proposal refused: run %s was ended (the end signal); it takes no new calls", r.workflowID)
	}
	rec, err := r.attachable(p)
	if err != nil || rec != nil {
		return rec, err
	}
	switch {
	case r.parking || r.proposals >= maxProposals:
		return nil, refusal(RefusedBusy, "proposal refused for now: run %s is continuing as new; propose the call again in a moment", r.workflowID)
	case r.openCalls >= MaxOpenCalls:
		return nil, refusal(RefusedBusy, "proposal refused for now: run %s has %d calls open (running or waiting for a human), at most %d; "+
			"propose it again once one has finished", r.workflowID, r.openCalls, MaxOpenCalls)
	}
	return nil, nil
}

// attachable is the call p attaches to, if any: the call its key names (of
// the same tool and arguments, or p is refused), or, without a key, an
// unfinished call of the same tool and arguments.
func (r *run) attachable(p Proposal) (*ExternalCall, error) {
	digest, derr := tool.Digest(p.Tool, p.Args)
	for _, e := range r.ext {
		switch {
		case p.Key != "" && e.Key == p.Key:
			if e.Tool != p.Tool || (derr == nil && e.ArgsDigest != digest) {
				return nil, refusal(RefusedInput, "proposal refused: idempotency key %q names call %s (%s, args_digest %s), not this call of %s with args_digest %s; "+
					"a key names one call", clip(p.Key, 64), e.CallID, e.Tool, e.ArgsDigest, clip(p.Tool, MaxNameBytes), digest)
			}
			return e, nil
		case p.Key == "" && derr == nil && !e.Done && e.Tool == p.Tool && e.ArgsDigest == digest:
			return e, nil
		}
	}
	return nil, nil
}

// admit takes a proposal: it attaches to the call it names, or numbers a new
// call and starts it along its stages (pipeline.go).
func (r *run) admit(p Proposal) (*ExternalCall, bool, error) {
	if rec, err := r.checkProposal(p); err != nil || rec != nil {
		return rec, rec != nil, err
	}
	digest, _ := tool.Digest(p.Tool, p.Args) // "" for arguments that are not JSON: the call says why
	c := r.newCall(p.Tool, p.Args)
	rec := &ExternalCall{CallID: c.ID, Key: p.Key, Tool: p.Tool, ArgsDigest: digest}
	r.ext = append(r.ext, rec)
	r.openCalls++
	r.progress++
	r.Steps++
	r.AwaitingInput = false
	r.addTranscript(plan.Entry{Role: plan.RoleAssistant, Calls: []tool.Call{c}})
	workflow.Go(r.root, func(ctx workflow.Context) {
		r.settle(ctx, rec, r.execute(ctx, c, 0))
	})
	return rec, false, nil
}

// settle records a call's outcome — or, if it parked, keeps it for the
// carry — and forgets the oldest finished calls past the bounds.
func (r *run) settle(ctx workflow.Context, rec *ExternalCall, out outcome) {
	r.openCalls--
	if out.parked != nil {
		r.parked = append(r.parked, out.parked)
		return
	}
	rec.Done, rec.Status, rec.Error = true, out.Status, clip(out.Error, MaxTextBytes)
	rec.Result, rec.Note = clipValue(out.Result, MaxValueBytes), clip(out.Note, MaxArgsBytes+MaxTextBytes)
	r.tellWaiters(ctx, rec)
	r.addTranscript(plan.Entry{Role: plan.RoleTool, CallID: rec.CallID, Tool: rec.Tool,
		Status: out.Status, Result: out.Result, Error: out.Error, Note: out.Note})
	r.trimExternal()
	r.publish(ctx)
}

// trimExternal keeps at most MaxExternalKept finished calls, and
// ExternalResultBytes of their results, the newest first.
func (r *run) trimExternal() {
	finished, bytes, drop := 0, 0, map[*ExternalCall]bool{}
	for i := len(r.ext) - 1; i >= 0; i-- {
		e := r.ext[i]
		if !e.Done {
			continue
		}
		if finished++; finished > MaxExternalKept {
			drop[e] = true
			continue
		}
		if bytes += len(e.Result); bytes > ExternalResultBytes && e.Result != nil {
			e.Result, e.ResultDropped = nil, true
		}
	}
	if len(drop) > 0 {
		r.ext = slices.DeleteFunc(r.ext, func(e *ExternalCall) bool { return drop[e] })
	}
}

// extCall is the remembered call with id callID.
func (r *run) extCall(callID string) *ExternalCall {
	for _, e := range r.ext {
		if e.CallID == callID {
			return e
		}
	}
	return nil
}

// waitingFor is the question the call proposed as callID waits on — its own
// or its fallback's — if any.
func (r *run) waitingFor(callID string) *Interrupt {
	for _, p := range r.pending {
		if r.rootOf(p.CallID) == callID {
			return &p.Interrupt
		}
	}
	return nil
}

// link records that call fallback is the fallback of call of, so a wait of
// the fallback is the wait of the call that was proposed.
func (r *run) link(of, fallback string) {
	if r.roots == nil {
		r.roots = map[string]string{}
	}
	r.roots[fallback] = r.rootOf(of)
}

func (r *run) rootOf(callID string) string {
	if root, ok := r.roots[callID]; ok {
		return root
	}
	return callID
}

func (r *run) callStatus(rec *ExternalCall, attached bool) CallStatus {
	st := CallStatus{ExternalCall: *rec, Attached: attached}
	if !rec.Done {
		if w := r.waitingFor(rec.CallID); w != nil {
			it := *w
			st.Waiting = &it
		}
	}
	return st
}

// externalLoop is the run of an external planner: calls come through the
// propose update and run side by side; the run waits for them, continues as
// new when due (its waiting calls park), and ends once it is idle for
// idle_timeout, or ended, with no call open.
func (r *run) externalLoop(ctx workflow.Context) (RunResult, error) {
	r.resumeExternal(ctx)
	due := func() bool { return r.parkDue(ctx) || r.proposals >= maxProposals }
	for {
		if due() {
			r.parking = true // every wait parks now; running calls finish
			if err := workflow.Await(ctx, func() bool { return r.openCalls == 0 }); err != nil {
				return RunResult{}, err
			}
			return RunResult{}, r.continueAsNew(ctx)
		}
		if r.openCalls > 0 {
			if err := workflow.Await(ctx, func() bool { return r.openCalls == 0 || due() }); err != nil {
				return RunResult{}, err
			}
			continue
		}
		if r.Ended {
			return r.finish(ctx, StatusCompleted)
		}
		if !r.AwaitingInput {
			r.AwaitingInput, r.IdleSince = true, r.now()
			r.publish(ctx)
		}
		idle := r.IdleSince.Add(time.Duration(r.in.IdleTimeout)).Sub(r.now())
		if idle <= 0 {
			return r.finish(ctx, StatusCompleted)
		}
		if _, err := workflow.AwaitWithTimeout(ctx, idle, func() bool { return r.openCalls > 0 || r.Ended || due() }); err != nil {
			return RunResult{}, err
		}
		if r.openCalls > 0 {
			r.publish(ctx)
		}
	}
}

// resumeExternal takes up the calls the previous run parked, each where it
// stood, side by side.
func (r *run) resumeExternal(ctx workflow.Context) {
	parkedCalls, waits := r.Parked, r.resumed
	r.Parked, r.CarriedBlockedOn, r.resumed = nil, nil, nil
	for i, pc := range parkedCalls {
		root := pc.Wait.CallID
		for _, f := range pc.FallbackOf { // innermost first: the last is the call proposed
			root = f.Call.ID
		}
		if root != pc.Wait.CallID {
			r.link(root, pc.Wait.CallID)
		}
		rec := r.extCall(root)
		if rec == nil { // forgotten: cannot be, a parked call is never done
			rec = &ExternalCall{CallID: root, Tool: pc.Wait.Tool, ArgsDigest: pc.Wait.ArgsDigest}
			r.ext = append(r.ext, rec)
		}
		r.openCalls++
		workflow.Go(ctx, func(ctx workflow.Context) {
			r.settle(ctx, rec, r.resume(ctx, pc, waits[i]))
		})
	}
}
