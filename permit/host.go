package permit

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/tool"
)

// This file is for a worker that hosts tools for toolgate on a task queue of
// its own (a tools file declares them: package remotetools). Anyone who may
// schedule an activity on that queue can send its tools a request, so each
// tool checks the permit the gate's worker signed for the call before it has
// any effect: Guard wraps a tool's activity function so that it does.
//
//	v, err := permit.HostVerifier("/path/to/DATA/worker.pub")
//	…
//	w.RegisterActivityWithOptions(permit.Guard(v, refund), activity.RegisterOptions{Name: "refund"})
//
// The permit's destructive flag is the gate's worker's declaration (signed
// with it); a destructive call's permit is claimed once on the activity's
// Temporal server (TemporalClaimer, on ClaimQueue).

// RetryType is the ApplicationError type of a permit check that could not
// finish (its claim could not be recorded yet): retried, as any failure.
const RetryType = Refused + "Retry"

// finalErrors are the errors of Verify and Check that refuse a request for
// good: another attempt of the same request is refused the same way.
var finalErrors = []error{ErrMissing, ErrMalformed, ErrUnknownKey, ErrBadSignature, ErrMismatch, ErrUsed}

// Failure is err, of Verifier.Check, as a tool activity's failure: a permit
// refused (ErrMissing, ErrMalformed, ErrUnknownKey, ErrBadSignature,
// ErrMismatch, ErrUsed) is a non-retryable ApplicationError of type Refused
// whose message says why; anything else (a claim the server could not record
// yet) a retryable one of type RetryType. nil stays nil.
func Failure(err error) error {
	if err == nil {
		return nil
	}
	for _, final := range finalErrors {
		if errors.Is(err, final) {
			return temporal.NewNonRetryableApplicationError("refused: "+err.Error(), Refused, nil)
		}
	}
	return temporal.NewApplicationError(err.Error(), RetryType)
}

// Guard returns fn checking its request's permit with v first: a request
// without a valid one fails with Failure's error and fn never sees it. v must
// not be nil, and hold the gate's worker public keys (HostVerifier,
// NewHostVerifier).
func Guard[R any](v *Verifier, fn func(ctx context.Context, req tool.Request) (R, error)) func(ctx context.Context, req tool.Request) (R, error) {
	if v == nil || len(v.Keys) == 0 {
		panic("permit.Guard: a Verifier with the keys of the gate's workers is needed (permit.HostVerifier)")
	}
	if fn == nil {
		panic("permit.Guard: nil activity function")
	}
	return func(ctx context.Context, req tool.Request) (R, error) {
		if _, err := v.Check(ctx, req); err != nil {
			var zero R
			return zero, Failure(err)
		}
		return fn(ctx, req)
	}
}

// NewHostVerifier is the Verifier of a worker hosting tools for toolgate: it
// trusts keys (the gate's worker public keys), takes each permit's
// destructive flag as the gate's worker signed it, and claims destructive
// permits on the activity's Temporal server, in its namespace, on ClaimQueue.
func NewHostVerifier(keys Keys) *Verifier {
	return &Verifier{Keys: keys, Claims: TemporalClaimer{}}
}

// HostVerifier is NewHostVerifier of the worker public keys in the file at
// path (ReadPublicKeys): the gate's data directory's WorkerPublicKeyFile,
// DATA/worker.pub.
func HostVerifier(path string) (*Verifier, error) {
	keys, err := ReadPublicKeys(path)
	if err != nil {
		return nil, fmt.Errorf("permit: %w", err)
	}
	return NewHostVerifier(keys), nil
}
