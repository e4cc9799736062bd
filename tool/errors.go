package tool

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Failure types of a tool's errors as they cross the activity boundary
// (temporal.ApplicationError.Type()). A Go error type does not survive the
// boundary; these names do.
const (
	// TypeInterrupt: the tool refused to commit and asks for a human. Never retried.
	TypeInterrupt = "ToolInterrupt"
	// TypeInvalidArgs: the arguments are malformed or break the schema. Never retried.
	TypeInvalidArgs = "InvalidArguments"
	// TypeToolFailure: the tool says retrying cannot help. Never retried.
	TypeToolFailure = "ToolFailure"
	// TypeUnknownTool: no tool of that name is registered.
	TypeUnknownTool = "UnknownTool"
	// TypeToolError: any other tool error; retried within the tool's bounded policy.
	TypeToolError = "ToolError"
)

// ConfirmationRequired is raised by the gate for a destructive call that has
// no approval. It carries the exact call arguments on CallArgs (JSON
// call_args) — not Args, a name the seed warns is reserved elsewhere.
type ConfirmationRequired struct {
	CallID   string          `json:"call_id"`
	Tool     string          `json:"tool"`
	CallArgs json.RawMessage `json:"call_args"`
}

func (e *ConfirmationRequired) Error() string {
	return fmt.Sprintf("%s %s needs confirmation (call %s)", e.Tool, e.CallArgs, e.CallID)
}

// InterruptError is returned by a tool (or a guard inside it) that refuses to
// commit and asks for a human instead. It must be returned before anything is
// written. Message is shown to the reviewer.
type InterruptError struct {
	Message string
}

func (e *InterruptError) Error() string { return "interrupt: " + e.Message }

// Interrupt returns an InterruptError with the reviewer's message.
func Interrupt(message string) error { return &InterruptError{Message: message} }

// InvalidArgsError reports arguments the tool cannot accept. It is never retried
// and never falls back; the planner receives it as the call's error.
type InvalidArgsError struct {
	Reason string
}

func (e *InvalidArgsError) Error() string { return "invalid arguments: " + e.Reason }

// InvalidArgs returns an InvalidArgsError.
func InvalidArgs(format string, a ...any) error {
	return &InvalidArgsError{Reason: fmt.Sprintf(format, a...)}
}

// permanentError marks a tool error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: it is reported at once, and the
// tool's fallback is not taken (fallbacks are for exhausted transient failures).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// ErrorType classifies an error a tool returned into one of the Err* types.
func ErrorType(err error) string {
	var ie *InterruptError
	var ae *InvalidArgsError
	var pe *permanentError
	switch {
	case errors.As(err, &ie):
		return TypeInterrupt
	case errors.As(err, &ae):
		return TypeInvalidArgs
	case errors.As(err, &pe):
		return TypeToolFailure
	default:
		return TypeToolError
	}
}
