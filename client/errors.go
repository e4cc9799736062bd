package client

import (
	"errors"

	"github.com/toolgate/toolgate/workflows"
)

// Refusals a caller can tell apart with errors.Is.
var (
	// ErrUnknownRun: no run with that workflow id in the namespace.
	ErrUnknownRun = errors.New("unknown run")
	// ErrRunClosed: the run exists but has closed (completed, failed, was
	// cancelled or terminated, timed out, continued as new): it takes no
	// more decisions, messages or calls. Not ErrUnknownRun.
	ErrRunClosed = errors.New("run closed")
	// ErrUnknownCall: the run has no such call (or has not proposed it yet).
	ErrUnknownCall = errors.New("unknown call")
	// ErrAlreadyDecided: the call is not waiting for a decision (decided, or never needed one).
	ErrAlreadyDecided = errors.New("already decided")
	// ErrDigestMismatch: the decision was made for other arguments than the call's.
	ErrDigestMismatch = errors.New("args_digest mismatch")
	// ErrRefusedInput: the run, or the decision, refused its input (a field
	// it does not have, a value out of range, a missing args_digest …).
	ErrRefusedInput = errors.New("refused input")
	// ErrUnauthorized: the worker's policy refused who decided — unsigned, an
	// unknown approver, a bad signature, expired, the wrong role,
	// self-approval, a second approval by the same approver.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrEditRefused: edited arguments the tool's schema or a rule refuses.
	ErrEditRefused = errors.New("edit refused")
	// ErrBusy: the run cannot take the proposal now (too many calls open, or
	// it is continuing as new); propose it again later.
	ErrBusy = errors.New("busy")
	// ErrStale: the run moved on since the preview a rewind was made from.
	ErrStale = errors.New("stale preview")
	// ErrUnreadable: the run's result, state or trace reached the client,
	// which cannot decode it — a run whose worker encrypts payloads with a
	// key the client's data converter lacks, a result that is not a
	// RunResult.
	ErrUnreadable = errors.New("unreadable")
	// ErrRunEnded: the run ended before what was waited for happened
	// (AwaitDecision: before any of its calls waited for a human; the error
	// is an *EndedError, with how the run ended).
	ErrRunEnded = errors.New("run ended")
	// ErrRetired: the run holds a rules version the workers that took its
	// workflow task do not run (workflows.RetiredMessage, which the error
	// says): a worker of an older build runs it (docs/versions.md).
	ErrRetired = errors.New("retired rules version")
)

// Error is a refusal: which of the Err* values it is (errors.Is), and why.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string        { return e.Msg }
func (e *Error) Is(target error) bool { return target == e.Kind }

func refused(kind error, msg string) error { return &Error{Kind: kind, Msg: msg} }

// kindOf maps the failure types AgentRun refuses with to the Err* values.
func kindOf(failureType string) error {
	switch failureType {
	case workflows.RefusedUnknownCall:
		return ErrUnknownCall
	case workflows.RefusedNotWaiting:
		return ErrAlreadyDecided
	case workflows.RefusedDigestMismatch:
		return ErrDigestMismatch
	case workflows.RefusedDecision, workflows.RefusedInput:
		return ErrRefusedInput
	case workflows.RefusedUnauthorized:
		return ErrUnauthorized
	case workflows.RefusedEdit:
		return ErrEditRefused
	case workflows.RefusedBusy:
		return ErrBusy
	}
	return nil
}
