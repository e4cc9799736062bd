package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// This file is how workers learn the pauses without asking the ledger's
// workflow anything: the ledger keeps its pauses in its memo (PausesMemo),
// written at the start of each of its runs and whenever a pause or unpause
// is taken, and a worker reads that memo from the server (ReadPauses) —
// one describe, no workflow task, no history. A worker checks a tool's
// pause where its call is about to run (the permit it signs, the activity
// it runs), so a pause stops every new execution of the tool whatever path
// the call took.

// PauseFreshness is how old a worker's knowledge of the pauses may be
// when a call is about to run: a pause reaches every worker's next call
// within it (and client.Pause returns only once it has).
const PauseFreshness = time.Second

// PausesMemo is the memo field that holds the ledger's pauses (PauseMemo).
const PausesMemo = "toolgate-pauses"

// pauseMemoChange versions the memo: ledgers that started before it keep
// none until their next run.
const pauseMemoChange = "ledger-pause-memo"

// PauseMemo is what the memo holds: the tools paused.
type PauseMemo struct {
	Pauses []Pause `json:"pauses"`
}

// publishPauses writes the pauses to the ledger's memo (from the memo's
// version on).
func (l *ledger) publishPauses(ctx workflow.Context) {
	if !l.memo || l.book.role == countsGuard { // a guard's ledger keeps no pause
		return
	}
	pauses := slices.Clone(l.st.Pauses)
	if pauses == nil {
		pauses = []Pause{}
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{PausesMemo: PauseMemo{Pauses: pauses}}); err != nil {
		workflow.GetLogger(ctx).Error("toolgate ledger: publishing the pauses to the memo", "error", err)
	}
}

// ErrNoPauseMemo: the ledger's current run keeps no memo of its pauses (it
// started before ledgers did).
var ErrNoPauseMemo = errors.New("the fleet ledger keeps no memo of its pauses")

// ReadPauses reads the pauses of the fleet ledger of taskQueue from its
// memo, in namespace ns ("": c's own), decoding with dc (nil: the default
// data converter). A ledger never started has none.
func ReadPauses(ctx context.Context, c client.Client, ns, taskQueue string, dc converter.DataConverter) ([]Pause, error) {
	var (
		d   *workflowservice.DescribeWorkflowExecutionResponse
		err error
	)
	if ns == "" {
		d, err = c.DescribeWorkflowExecution(ctx, ID(taskQueue), "")
	} else {
		d, err = c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: ns, Execution: &commonpb.WorkflowExecution{WorkflowId: ID(taskQueue)}})
	}
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the fleet ledger of task queue %s: %w", taskQueue, err)
	}
	info := d.GetWorkflowExecutionInfo()
	// As a reservation checks the ledger that answers it (caller.checkRun):
	// a workflow of that id someone started on a queue of their own is not
	// the ledger, and its memo says nothing.
	if name, tq := info.GetType().GetName(), info.GetTaskQueue(); name != WorkflowName || tq != taskQueue {
		return nil, fmt.Errorf("the workflow %s is a %q on task queue %q, not the fleet ledger (%s) of task queue %s", ID(taskQueue), name, tq, WorkflowName, taskQueue)
	}
	p := info.GetMemo().GetFields()[PausesMemo]
	if p == nil {
		return nil, ErrNoPauseMemo
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var m PauseMemo
	if err := dc.FromPayload(p, &m); err != nil {
		return nil, fmt.Errorf("decoding the pauses of the fleet ledger of task queue %s: %w", taskQueue, err)
	}
	return m.Pauses, nil
}

// PausedBy is the pause of pauses that stops a call of tool (destructive
// or not): the tool's own, else — a destructive tool — the pause of every
// destructive tool.
func PausedBy(pauses []Pause, tool string, destructive bool) (Pause, bool) {
	b := book{st: &State{Pauses: pauses}}
	return b.pausedBy(Reservation{Tool: tool, Destructive: destructive})
}

// PausedReason says why pause p stops a call of tool, as runs are told.
func PausedReason(p Pause, tool string) string { return pausedReason(p, tool) }
