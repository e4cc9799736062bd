package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// A record is a claim that carries what it records: a marker workflow
// (MarkerWorkflow, on ClaimQueue) whose id names the thing recorded and
// whose memo field RecordField holds it as JSON. Only workers write the
// authority namespace, so a record there is a worker's word: a link a
// delivery really sent, say.

// RecordField is the memo field a record's JSON is kept in.
const RecordField = "toolgate"

// MaxRecordBytes bounds a record's JSON.
const MaxRecordBytes = 4 << 10

// Record writes v, as JSON, as the record wid in namespace ns, for
// claimant (as Claim: the same claimant again is answered alike, any other
// is refused with ErrUsed).
func Record(ctx context.Context, c client.Client, ns, wid, claimant string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("authority: encoding record %s: %w", wid, err)
	}
	if len(data) > MaxRecordBytes {
		return fmt.Errorf("authority: record %s is %d bytes, at most %d", wid, len(data), MaxRecordBytes)
	}
	memo := &commonpb.Memo{Fields: map[string]*commonpb.Payload{RecordField: {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: data}}}
	return startMarker(ctx, c, ns, wid, claimant, memo)
}

// ErrNoRecord: no record of that id in the namespace.
var ErrNoRecord = errors.New("no record")

// Lookup reads the record wid of namespace ns (""; c's own) into v:
// ErrNoRecord when there is none, or it carries no record.
func Lookup(ctx context.Context, c client.Client, ns, wid string, v any) error {
	var (
		d   *workflowservice.DescribeWorkflowExecutionResponse
		err error
	)
	where := "in namespace " + ns
	if ns == "" {
		d, err = c.DescribeWorkflowExecution(ctx, wid, "")
		where = "in the client's namespace"
	} else {
		d, err = c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: ns, Execution: &commonpb.WorkflowExecution{WorkflowId: wid}})
	}
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%w: %s %s", ErrNoRecord, wid, where)
	case err != nil:
		return fmt.Errorf("authority: reading record %s %s: %w", wid, where, err)
	}
	info := d.GetWorkflowExecutionInfo()
	p := info.GetMemo().GetFields()[RecordField]
	if info.GetType().GetName() != MarkerWorkflow || p == nil || len(p.GetData()) > MaxRecordBytes {
		return fmt.Errorf("%w: %s %s is no record", ErrNoRecord, wid, where)
	}
	if err := json.Unmarshal(p.GetData(), v); err != nil {
		return fmt.Errorf("authority: decoding record %s: %w", wid, err)
	}
	return nil
}

// connKey is the context key of a Conn (WithConn).
type connKey struct{}

// WithConn is ctx carrying conn: the worker gives it to the activities that
// record in the authority namespace (a delivery's links) without taking it
// as an argument.
func WithConn(ctx context.Context, conn *Conn) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

// ConnFrom is the Conn ctx carries (WithConn), or nil.
func ConnFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}
