package workflows

import (
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// This file tells a call's waiters that it ended (rules version 15): a
// proposal may name a workflow that waits for its call (Proposal.Notify,
// the Nexus door's call workflow), and the run signals it SignalCallEnded
// when the call ends, so the waiter holds no activity open and looks at the
// call only when told. The signal carries nothing the waiter must believe:
// the waiter reads the call's outcome from the run (QueryCall), so a
// signal anyone sent costs it one look and no more.

// SignalCallEnded is the signal a run sends a call's waiter when the call
// ends; its payload is the call's id.
const SignalCallEnded = "toolgate-call-ended"

// NotifyPrefix starts the workflow id of every waiter a run signals
// (Proposal.Notify): a proposal cannot have the run signal any other
// workflow of its namespace.
const NotifyPrefix = "toolgate-call-"

// MaxNotify bounds the waiters a run signals for one call: a proposal
// attaching to a call that has as many is answered without Notifies, and
// its waiter looks for itself.
const MaxNotify = 8

// maxNotifyBytes bounds a waiter's workflow id.
const maxNotifyBytes = 255

// checkNotify refuses a waiter the run would not signal.
func checkNotify(id string) error {
	switch {
	case id == "":
		return nil
	case len(id) > maxNotifyBytes:
		return refusal(RefusedInput, "proposal refused: notify has %d bytes, at most %d", len(id), maxNotifyBytes)
	case !strings.HasPrefix(id, NotifyPrefix):
		return refusal(RefusedInput, "proposal refused: notify %q is not the id of a call's waiter (it starts with %q)", clip(id, 64), NotifyPrefix)
	}
	return nil
}

// watchCall adds the proposal's waiter to the call's, and reports whether
// the run will signal it when the call ends.
func (r *run) watchCall(rec *ExternalCall, waiter string) bool {
	if waiter == "" || rec.Done {
		return false
	}
	if slices.Contains(rec.Notify, waiter) {
		return true
	}
	if len(rec.Notify) >= MaxNotify {
		return false
	}
	rec.Notify = append(rec.Notify, waiter)
	return true
}

// tellWaiters signals each waiter of a call that has ended. A waiter that
// is gone fails its signal, which changes nothing for the run.
func (r *run) tellWaiters(ctx workflow.Context, rec *ExternalCall) {
	for _, id := range rec.Notify {
		workflow.SignalExternalWorkflow(ctx, id, "", SignalCallEnded, rec.CallID)
	}
	rec.Notify = nil
}
