package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// ActivityFunc is the activity a tool runs as: one per registered tool, its
// activity type the tool's name.
type ActivityFunc func(ctx context.Context, req Request) (Response, error)

// Tool is a spec and the activity that implements it: what a worker registers.
type Tool struct {
	Spec Spec
	Run  ActivityFunc

	// err is what went wrong deriving the argument schema in New; Validate
	// reports it.
	err error
}

// Validate reports what is wrong with the tool, if anything: its spec
// (Spec.Validate), a schema New could not derive from the argument type, and
// a schema that does not compile (CompileSchema: not JSON, not a schema, or a
// $ref outside the document). Every error names the tool.
func (t Tool) Validate() error {
	if err := t.Spec.Validate(); err != nil {
		return err
	}
	if t.err != nil {
		return fmt.Errorf("tool %s: %w", t.Spec.Name, t.err)
	}
	if len(bytes.TrimSpace(t.Spec.Schema)) > 0 {
		if _, err := CompileSchema(t.Spec.Schema); err != nil {
			return fmt.Errorf("tool %s: %w", t.Spec.Name, err)
		}
	}
	return nil
}

// ErrorDetails travel with a tool's failure across the activity boundary.
type ErrorDetails struct {
	// Attempt is the attempt that failed (1 for the first).
	Attempt int32 `json:"attempt"`
	// Message is the tool's own message (for an interrupt, the reviewer's text).
	Message string `json:"message"`
}

// New adapts a typed function into a Tool. The function's arguments are
// decoded from the call's JSON (unknown fields refused: a typo must not pass
// silently as a default); its result is encoded to JSON. The function can read
// the call id, idempotency key and approval with InfoFrom.
//
// The tool's contract is stated once, by A: when spec.Schema is empty, New
// derives the argument schema from A (see SchemaFor; descriptions come from
// `jsonschema:"..."` field tags), then applies refine, in order, for what a Go
// type cannot say (bounds, enums, defaults). An explicit spec.Schema is used
// as given (refine is then not applied). A schema that cannot be derived is
// reported by Tool.Validate, so a worker refuses to register it.
func New[A, R any](spec Spec, fn func(ctx context.Context, args A) (R, error), refine ...Refine) Tool {
	var derr error
	if len(bytes.TrimSpace(spec.Schema)) == 0 {
		spec.Schema, derr = SchemaFor[A](refine...)
	}
	return Tool{Spec: spec, err: derr, Run: func(ctx context.Context, req Request) (Response, error) {
		attempt := int32(1)
		if activity.IsActivity(ctx) {
			attempt = activity.GetInfo(ctx).Attempt
		}
		var args A
		raw := req.Args
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return Response{}, Failure(InvalidArgs("%s: %v", spec.Name, err), attempt)
		}
		ctx = WithInfo(ctx, Info{CallID: req.CallID, IdempotencyKey: req.IdempotencyKey, Approval: req.Approval, Attempt: attempt})
		res, err := fn(ctx, args)
		if err != nil {
			return Response{}, Failure(err, attempt)
		}
		out, err := json.Marshal(res)
		if err != nil {
			return Response{}, Failure(Permanent(fmt.Errorf("%s: encoding result: %w", spec.Name, err)), attempt)
		}
		return Response{Result: out, Attempt: attempt}, nil
	}}
}

// Failure turns a tool's error into the ApplicationError that crosses the
// activity boundary: its type says how the workflow treats it (ErrorType), its
// details carry the attempt and the tool's message. An error that already is
// an ApplicationError keeps its own type.
func Failure(err error, attempt int32) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	typ := ErrorType(err)
	msg := err.Error()
	var ie *InterruptError
	if errors.As(err, &ie) {
		msg = ie.Message
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ, temporal.ApplicationErrorOptions{
		NonRetryable: typ != TypeToolError,
		Cause:        err,
		Details:      []any{ErrorDetails{Attempt: attempt, Message: msg}},
	})
}
