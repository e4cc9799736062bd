package permit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// runGuarded runs permit.Guard(v, a tool that counts its runs) as the test
// environment's activity close_ticket, hosted on a worker of its own.
func runGuarded(t *testing.T, v *permit.Verifier, req tool.Request, ran *int) (json.RawMessage, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(permit.Guard(v, func(_ context.Context, req tool.Request) (json.RawMessage, error) {
		*ran++
		return json.RawMessage(`{"closed":true}`), nil
	}), activity.RegisterOptions{Name: "close_ticket"})
	val, err := env.ExecuteActivity("close_ticket", req)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	require.NoError(t, val.Get(&out))
	return out, nil
}

// requireRefused checks err is the activity's non-retryable PermitRefused
// failure saying want.
func requireRefused(t *testing.T, err error, want string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %v", err)
	require.Equal(t, permit.Refused, appErr.Type())
	require.True(t, appErr.NonRetryable(), "a refused permit is not retried")
	require.Contains(t, appErr.Error(), want)
}

// A host of tools on another task queue (Guard over HostVerifier's keys)
// refuses a request without a permit and one signed by a key it does not
// trust, and runs the one the gate's worker signed for it.
func TestGuardChecksThePermitBeforeTheTool(t *testing.T) {
	gate, stranger := newKey(t), newKey(t)
	// The host trusts the gate's worker.pub.
	dir := t.TempDir()
	path := filepath.Join(dir, permit.WorkerPublicKeyFile)
	require.NoError(t, os.WriteFile(path, []byte("# the gate's worker key\n"+signed.FormatPublicKey(pub(gate))+"\n"), 0o644))
	v, err := permit.HostVerifier(path)
	require.NoError(t, err)
	v.Claims = permit.NewMemoryClaimer() // no server to claim on

	good, err := permit.Sign(gate, claimsFor(t))
	require.NoError(t, err)
	forged, err := permit.Sign(stranger, claimsFor(t))
	require.NoError(t, err)

	ran := 0
	_, err = runGuarded(t, v, requestFor(""), &ran)
	requireRefused(t, err, "carries no permit")
	_, err = runGuarded(t, v, requestFor(forged), &ran)
	requireRefused(t, err, "not one this worker trusts")
	other := requestFor(good)
	other.Args = json.RawMessage(`{"ticket_id":"TKT-4"}`)
	_, err = runGuarded(t, v, other, &ran)
	requireRefused(t, err, "argument digest")
	require.Zero(t, ran, "the tool ran for a refused request")

	out, err := runGuarded(t, v, requestFor(good), &ran)
	require.NoError(t, err)
	require.JSONEq(t, `{"closed":true}`, string(out))
	require.Equal(t, 1, ran)

	require.Panics(t, func() { permit.Guard[int](nil, nil) })
	_, err = permit.HostVerifier(filepath.Join(dir, "missing.pub"))
	require.Error(t, err)
}

func TestFailure(t *testing.T) {
	require.NoError(t, permit.Failure(nil))
	for _, final := range []error{permit.ErrMissing, permit.ErrMalformed, permit.ErrUnknownKey, permit.ErrBadSignature, permit.ErrMismatch, permit.ErrUsed} {
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(permit.Failure(fmt.Errorf("%w: why", final)), &appErr))
		require.Equal(t, permit.Refused, appErr.Type())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, appErr.Error(), "refused: ")
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(permit.Failure(errors.New("permit: claiming its use: unavailable")), &appErr))
	require.Equal(t, permit.RetryType, appErr.Type())
	require.False(t, appErr.NonRetryable(), "a claim the server could not record yet is retried")
}
