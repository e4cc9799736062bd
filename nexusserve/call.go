package nexusserve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// This file is the workflow behind a call operation: it proposes the call to
// the session run, waits until the call has ended, and answers its outcome.
// Cancelled (the caller cancelled its operation), it withdraws the call if
// the call still waits for a human; a call that began to run is not undone,
// and its outcome is still the answer.
//
// How it waits (versioned "call-told"): from version 1 it names itself the
// call's waiter (workflows.Proposal.Notify), and a run that takes it
// (rules version 15, same namespace) signals it when the call ends: the
// workflow holds nothing open and adds no event while it waits, then looks
// at the call once (a local activity). It also looks every Recheck (a run
// terminated by an admin tells no one). A run that does not signal (older
// rules, another namespace) is watched as before: Await activities of
// AwaitWindow that query the run.

// Activity names of the call workflow.
const (
	ActivityPropose  = "ToolgateNexusPropose"
	ActivityAwait    = "ToolgateNexusAwait"
	ActivityWithdraw = "ToolgateNexusWithdraw"
	// ActivityLook reads how a call stands once (a local activity).
	ActivityLook = "ToolgateNexusLook"
)

// RecheckEvery is how long a call the run will tell of waits between two
// looks of its own: a run that ends without telling (terminated) is
// noticed within it, and a call that waits a week looks once.
const RecheckEvery = 96 * time.Hour

// toldVersion is the GetVersion change of the call workflow's waiting.
const toldVersion = "call-told"

// RefusedType is the failure type of a call the run or toolgate refused (an
// unknown tool, a bad start, a closed run): not retried.
const RefusedType = "ToolgateRefused"

// AwaitWindow is how long one Await activity watches a call before it
// reports it unfinished and the workflow starts another: a call that waits
// for days adds a few events an AwaitWindow, not an activity that runs for
// days.
const AwaitWindow = 30 * time.Minute

// CallRequest is the input of the call workflow: the call, checked, and the
// run it goes to.
type CallRequest struct {
	Run      string              `json:"run"` // the session run's workflow id
	Proposal workflows.Proposal  `json:"proposal"`
	Start    *workflows.RunInput `json:"start,omitempty"`
	// NeedsSignedStart: no start was given and the worker has a policy, so
	// the call goes only to a run that is running.
	NeedsSignedStart bool `json:"needs_signed_start,omitempty"`
	// Recheck is how long the workflow waits for the run's word between
	// two looks of its own (RecheckEvery if zero; Options.Recheck).
	Recheck time.Duration `json:"recheck,omitempty"`
}

// workflowID is the call workflow's id.
func (r CallRequest) workflowID() string { return CallWorkflowID(r.Run, r.Proposal) }

// CallWorkflowID is the workflow id of the call workflow of proposal p to
// run (a workflow id: RunID of the caller's name): one per run, key, tool
// and arguments (their canonical digest), so two operations of one call
// attach to one workflow — and one call — while an operation with the key
// of another call gets a workflow of its own, whose proposal the run
// refuses ("a key names one call") instead of dropping its arguments.
func CallWorkflowID(run string, p workflows.Proposal) string {
	args, err := tool.Digest(p.Tool, p.Args)
	if err != nil { // not JSON: the run refuses the call, saying why
		sum := sha256.Sum256(p.Args)
		args = hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256([]byte(run + "\x00" + p.Key + "\x00" + p.Tool + "\x00" + args))
	return workflows.NotifyPrefix + run + "-" + hex.EncodeToString(sum[:12])
}

// CallRef names a proposed call: its run, id and key.
type CallRef struct {
	Run    string `json:"run"`
	CallID string `json:"call_id"`
	Key    string `json:"key"`
	Reason string `json:"reason,omitempty"` // a withdrawal's
}

// Withdrawal is what the withdraw activity answers: the call withdrawn
// (ended cancelled), or why it was not (it was decided or runs).
type Withdrawal struct {
	Withdrawn bool                 `json:"withdrawn"`
	Call      workflows.CallStatus `json:"call"`
	Why       string               `json:"why,omitempty"`
}

var (
	// proposing: a proposal is tried until the run takes or refuses it (a
	// run with MaxOpenCalls calls open answers busy until one ends, which
	// may take as long as a human does).
	proposing = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
	quick = workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
	watch = workflow.ActivityOptions{
		StartToCloseTimeout: AwaitWindow + time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
	looking = workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, NonRetryableErrorTypes: []string{RefusedType}},
	}
)

// Call is the call workflow (CallWorkflow).
func Call(ctx workflow.Context, req CallRequest) (CallOutput, error) {
	told := workflow.GetVersion(ctx, toldVersion, workflow.DefaultVersion, 1) >= 1
	if told {
		req.Proposal.Notify = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	// The proposal is made whatever comes meanwhile (it is quick, and
	// keyed): a cancel that arrives now finds the call id to withdraw.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	dctx = workflow.WithActivityOptions(dctx, proposing)
	var st workflows.CallStatus
	if err := workflow.ExecuteActivity(dctx, ActivityPropose, req).Get(dctx, &st); err != nil {
		return CallOutput{}, err
	}
	ref := CallRef{Run: req.Run, CallID: st.CallID, Key: req.Proposal.Key}
	attached := st.Attached
	w := watcher{ref: ref, recheck: req.Recheck}
	if told && st.Notifies {
		w.told = workflow.GetSignalChannel(ctx, workflows.SignalCallEnded)
	}
	st, err := w.wait(ctx, st)
	switch {
	case err == nil:
	case ctx.Err() != nil && (errors.Is(err, errCancelled) || temporal.IsCanceledError(err)):
		return w.withdraw(ctx)
	default:
		return CallOutput{}, err
	}
	st.Attached = attached
	return output(req.Run, st), nil
}

// errCancelled: the workflow was cancelled while it waited.
var errCancelled = errors.New("the caller cancelled its operation")

// watcher waits for a call to end: told by the run when told is set,
// else by Await activities.
type watcher struct {
	ref     CallRef
	told    workflow.ReceiveChannel
	recheck time.Duration
}

// wait returns once the call st stands for has ended, or errCancelled (or
// an activity's cancellation) once ctx is cancelled.
func (w watcher) wait(ctx workflow.Context, st workflows.CallStatus) (workflows.CallStatus, error) {
	if w.told == nil {
		wctx := workflow.WithActivityOptions(ctx, watch)
		for !st.Done {
			if ctx.Err() != nil {
				return st, errCancelled
			}
			if err := workflow.ExecuteActivity(wctx, ActivityAwait, w.ref).Get(wctx, &st); err != nil {
				return st, err
			}
		}
		return st, nil
	}
	lctx := workflow.WithLocalActivityOptions(ctx, looking)
	recheck := w.recheck
	switch {
	case recheck <= 0:
		recheck = RecheckEvery
	case recheck < time.Second: // an input's: a loop of looks is no wait
		recheck = time.Second
	}
	var timer workflow.Future
	for !st.Done {
		if ctx.Err() != nil {
			return st, errCancelled
		}
		if timer == nil {
			timer = workflow.NewTimer(ctx, recheck)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(w.told, func(c workflow.ReceiveChannel, _ bool) {
			var callID string
			for c.ReceiveAsync(&callID) { // many signals, one look
			}
		})
		sel.AddFuture(timer, func(workflow.Future) { timer = nil }) // a look of its own, and a new timer
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		if ctx.Err() != nil {
			return st, errCancelled
		}
		if err := workflow.ExecuteLocalActivity(lctx, ActivityLook, w.ref).Get(lctx, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// withdraw takes the call back after the caller cancelled its operation: the
// workflow ends cancelled. A call decided or running meanwhile goes on, and
// its outcome is the answer.
func (w watcher) withdraw(ctx workflow.Context) (CallOutput, error) {
	ref := w.ref
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	ref.Reason = "the caller cancelled its Nexus operation"
	var wd Withdrawal
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, quick), ActivityWithdraw, ref).Get(dctx, &wd); err != nil {
		return CallOutput{}, err
	}
	if wd.Withdrawn {
		if w.told != nil { // the run tells of the withdrawal too: nothing to look at
			var callID string
			for w.told.ReceiveAsync(&callID) {
			}
		}
		return CallOutput{}, temporal.NewCanceledError(fmt.Sprintf("call %s (%s) of run %s withdrawn: %s", wd.Call.CallID, wd.Call.Tool, ref.Run, wd.Call.Error))
	}
	workflow.GetLogger(ctx).Info("a cancelled call was not withdrawn; waiting for its outcome", "run", ref.Run, "call", ref.CallID, "why", wd.Why)
	st, err := w.wait(dctx, wd.Call)
	if err != nil {
		return CallOutput{}, err
	}
	return output(ref.Run, st), nil
}

// output is the operation's answer for a call that has ended.
func output(run string, st workflows.CallStatus) CallOutput {
	return CallOutput{Run: run, CallID: st.CallID, Tool: st.Tool, ArgsDigest: st.ArgsDigest, Status: st.Status,
		Result: st.Result, ResultDropped: st.ResultDropped, Error: st.Error, Note: st.Note, Attached: st.Attached}
}
