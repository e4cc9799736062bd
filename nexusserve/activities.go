package nexusserve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/workflows"
)

// Runs is what the call workflow's activities need of package client.
type Runs interface {
	Propose(ctx context.Context, id string, start *workflows.RunInput, p workflows.Proposal, opts ...client.StartOption) (workflows.CallStatus, error)
	Call(ctx context.Context, id, callID string) (workflows.CallStatus, error)
	Withdraw(ctx context.Context, id, callID, key, reason string) (workflows.CallStatus, error)
}

// activities are the call workflow's: each speaks to the session run
// through Runs.
type activities struct {
	runs Runs
	// window is how long await watches a call (AwaitWindow); poll is the
	// longest pause between two looks.
	window, poll time.Duration
	// namespace is the runs' (Runs'): a run signals a call's waiter only
	// in its own namespace.
	namespace string
}

// propose proposes the call (starting the session run with its start input
// if it is not running) and answers how the call stands.
func (a *activities) propose(ctx context.Context, req CallRequest) (workflows.CallStatus, error) {
	if req.Proposal.Notify != "" && a.namespace != activity.GetInfo(ctx).Namespace {
		req.Proposal.Notify = "" // the run cannot signal into another namespace: the call workflow looks instead
	}
	st, err := a.runs.Propose(ctx, req.Run, req.Start, req.Proposal)
	if req.NeedsSignedStart && (errors.Is(err, client.ErrUnknownRun) || errors.Is(err, client.ErrRunClosed)) {
		name := strings.TrimPrefix(req.Run, RunPrefix)
		return st, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s is not running (%v), and the worker has an approval policy, so it starts only with a signed start: "+
			"give the call's start, a RunInput signed by its requester (`toolgate nexus sign-start --run %s --as NAME --key NAME.key`)", req.Run, err, name), RefusedType, nil)
	}
	return st, classify(err)
}

// await watches the call until it has ended, or the window has passed
// (then it answers how it stands, unfinished), heartbeating each look.
func (a *activities) await(ctx context.Context, ref CallRef) (workflows.CallStatus, error) {
	deadline := time.Now().Add(a.window)
	d := 200 * time.Millisecond
	var last error
	for {
		st, err := a.runs.Call(ctx, ref.Run, ref.CallID)
		switch {
		case err == nil && st.Done:
			return st, nil
		case err == nil:
			activity.RecordHeartbeat(ctx, st.Status)
			if time.Now().After(deadline) {
				return st, nil
			}
		case refusal(err):
			return st, classify(err)
		default:
			last = err // a query that failed: look again
			activity.RecordHeartbeat(ctx, "unreadable")
			if time.Now().After(deadline) {
				return st, err
			}
		}
		if !pause.For(ctx, d) {
			if last != nil {
				return st, errors.Join(ctx.Err(), last)
			}
			return st, ctx.Err()
		}
		d = min(2*d, a.poll)
	}
}

// look answers how the call stands, once (the call workflow's local
// activity, when the run has told it the call ended, or its recheck).
func (a *activities) look(ctx context.Context, ref CallRef) (workflows.CallStatus, error) {
	st, err := a.runs.Call(ctx, ref.Run, ref.CallID)
	return st, classify(err)
}

// withdraw takes the call back; a call decided or running is not, and the
// answer says why.
func (a *activities) withdraw(ctx context.Context, ref CallRef) (Withdrawal, error) {
	st, err := a.runs.Withdraw(ctx, ref.Run, ref.CallID, ref.Key, ref.Reason)
	if errors.Is(err, client.ErrAlreadyDecided) {
		st, cerr := a.runs.Call(ctx, ref.Run, ref.CallID)
		return Withdrawal{Call: st, Why: err.Error()}, classify(cerr)
	}
	if err != nil {
		return Withdrawal{}, classify(err)
	}
	return Withdrawal{Withdrawn: true, Call: st}, nil
}

// refusal reports whether err is an answer that asking again will not
// change: the run or toolgate refused, or the run is gone.
func refusal(err error) bool {
	for _, kind := range []error{client.ErrRefusedInput, client.ErrUnauthorized, client.ErrUnknownRun, client.ErrRunClosed,
		client.ErrUnknownCall, client.ErrAlreadyDecided, client.ErrDigestMismatch, client.ErrEditRefused, client.ErrUnreadable} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// classify makes a refusal non-retryable (RefusedType, its message the
// caller's); every other error (busy, a connection that failed) is retried.
func classify(err error) error {
	if err == nil || !refusal(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), RefusedType, nil)
}
