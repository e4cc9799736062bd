package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"

	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/internal/text"
)

// Bounds on what a tool declares and on what its activity reports, so that
// no tool — a Go tool's author's mistake or an MCP server's hostility — can
// push a run's recorded specs or a call's result past Temporal's payload
// limit (2 MiB by default) and wedge the runs on a worker.
const (
	// MaxDescriptionBytes bounds a spec's description. Spec.Validate refuses more.
	MaxDescriptionBytes = 8 << 10
	// MaxSchemaBytes bounds a spec's argument schema (its JSON as declared).
	// Spec.Validate refuses more.
	MaxSchemaBytes = 64 << 10
	// MaxResultBytes bounds a call's result as its activity returns it: the
	// worker replaces a larger one with the marker of ClipResult. It equals
	// the run's own bound on a kept result (workflows.MaxValueBytes): nothing
	// beyond it is ever kept by a run.
	MaxResultBytes = 16 << 10
	// MaxErrorBytes bounds a failure as a tool's activity reports it (its
	// message, its details and its causes in all); see BoundError. A run
	// keeps at most 1 KiB of it.
	MaxErrorBytes = 4 << 10
)

// Truncated is what is kept instead of a JSON value over its bound: its size,
// its SHA-256 and its first bytes, as {"truncated":{"bytes","sha256","head"}}.
type Truncated struct {
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
	Head   string `json:"head"`
}

// truncatedHeadBytes bounds the head a Truncated marker keeps.
const truncatedHeadBytes = 512

// ClipResult keeps v if it has at most n bytes, and otherwise a marker
// {"truncated":{"bytes","sha256","head"}} that is valid JSON (at most about
// 700 bytes whatever v is). The marker's bytes depend on v alone: runs keep
// these markers in their histories, and replaying them depends on that.
func ClipResult(v json.RawMessage, n int) json.RawMessage {
	if len(v) <= n {
		return v
	}
	sum := sha256.Sum256(v)
	head := strings.ToValidUTF8(text.Cut(string(v), truncatedHeadBytes), "")
	b, _ := json.Marshal(map[string]Truncated{"truncated": {Bytes: len(v), SHA256: hex.EncodeToString(sum[:]), Head: head}})
	return b
}

// BoundError returns err as a tool's activity may report it. An error whose
// failure (its message, its details and every cause, as Temporal's failure
// converter encodes them) holds at most MaxErrorBytes is returned unchanged.
// A larger one is replaced by an ApplicationError with the same type,
// retryability, retry delay and category, its message and its ErrorDetails'
// message each cut to half of MaxErrorBytes (ending "…[truncated: N bytes in
// all]"), and no causes: a failure of megabytes would wedge the run like a result of
// megabytes. An error that is not an ApplicationError gets the type
// Temporal's SDK would give it (its Go type's name) and stays retryable.
func BoundError(err error) error {
	if err == nil || errorBytes(err) <= MaxErrorBytes {
		return err
	}
	msg, typ := err.Error(), goTypeName(err)
	opts := temporal.ApplicationErrorOptions{}
	if ae, ok := err.(*temporal.ApplicationError); ok {
		msg, typ = ae.Message(), ae.Type()
		opts.NonRetryable, opts.NextRetryDelay, opts.Category = ae.NonRetryable(), ae.NextRetryDelay(), ae.Category()
		var d ErrorDetails
		if ae.HasDetails() && ae.Details(&d) == nil {
			d.Message = text.Clip(d.Message, MaxErrorBytes/2)
			opts.Details = []any{d}
		}
	}
	return temporal.NewApplicationErrorWithOptions(text.Clip(msg, MaxErrorBytes/2), typ, opts)
}

// errorBytes is the size of err as the failure Temporal records for it.
func errorBytes(err error) int {
	return proto.Size(temporal.GetDefaultFailureConverter().ErrorToFailure(err))
}

// goTypeName is the name Temporal's SDK gives an error that is not an
// ApplicationError as its failure type: its type's name, pointers removed.
func goTypeName(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// Bounded wraps a tool's activity so that what it reports is bounded: a
// result over MaxResultBytes is replaced by the marker of ClipResult (the
// call is still a success: a destructive call that did its work and answered
// at length is done), and a failure over MaxErrorBytes is cut (BoundError).
// The worker registers every tool's activity through it.
func Bounded(run ActivityFunc) ActivityFunc {
	return func(ctx context.Context, req Request) (Response, error) {
		resp, err := run(ctx, req)
		if err != nil {
			return resp, BoundError(err)
		}
		resp.Result = ClipResult(resp.Result, MaxResultBytes)
		return resp, nil
	}
}
