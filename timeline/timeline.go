// Package timeline reads a run chain's histories from the server and tells
// what the run did, step by step — each call, its status and approver, and
// the point a rewind resets to — by replaying each history with AgentRun's
// own code (workflows.Observe). It is what `toolgate steps`, a rewind's
// preview and a fork's starting state are made from: the client package uses
// it for the first two, the worker's fork activity for the third.
package timeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// Bounds on what Read reads.
const (
	// MaxRuns bounds the runs of a chain Read walks back through.
	MaxRuns = 200
	// MaxEvents bounds one run's history.
	MaxEvents = 200_000
)

// Timeline is a run chain as Read found it.
type Timeline struct {
	WorkflowID string `json:"workflow_id"`
	// Runs are the chain's runs, oldest first; the last is the current run.
	Runs []Run `json:"runs"`
	// Steps are the chain's planner steps, in order.
	Steps []Step `json:"steps"`
	// LastEvent is the last event of the current run's history when it was
	// read: a preview made from this timeline is of the run as it stood then.
	LastEvent int64 `json:"last_event"`

	chain []chainRun
	obs   []*workflows.Observer
	dc    converter.DataConverter // decodes the chain's update results (nil: the default)
}

// Run is one run of a chain.
type Run struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	// Version is the run's rules version (workflows: GetVersion of its
	// rules); rewinds need 7 or later.
	Version int    `json:"version"`
	Planner string `json:"planner"`
	Events  int64  `json:"events"`
}

// Step is one planner step of the chain.
type Step struct {
	Step  int    `json:"step"`
	Turn  int    `json:"turn"`
	RunID string `json:"run_id"`
	// ResetEvent is the event a rewind to this step resets RunID to: the
	// end of the workflow task the step began in. Steps that began in the
	// same workflow task share it; a rewind redoes all of them.
	ResetEvent int64  `json:"reset_event"`
	Calls      []Call `json:"calls"`
}

// Call is one call, as the run's trace left it.
type Call struct {
	ID          string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	Destructive bool            `json:"destructive,omitempty"`
	// Fallback: the call is a fallback of an earlier call of its step.
	Fallback bool `json:"fallback,omitempty"`
	// Status is the call's last trace status ("" if the trace no longer
	// holds it, or it has none yet).
	Status string `json:"status,omitempty"`
	// Decision is the call's last decision (approved, edited, rejected,
	// cancelled, responded) and Approver who made it, if anyone did.
	Decision string          `json:"decision,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Ran: the tool's activity ran (the call succeeded, or failed after
	// running).
	Ran bool `json:"ran,omitempty"`
}

// Options says how to read histories.
type Options struct {
	// DataConverter decodes the histories' payloads (the one runs are
	// written with, e.g. connect's encryption codec); nil: the default.
	DataConverter converter.DataConverter
	// FailureConverter decodes their failures (connect's encryption
	// encrypts their messages too); nil: the default.
	FailureConverter converter.FailureConverter
}

// chainRun is a run as read, before it is replayed.
type chainRun struct {
	id      string
	status  enumspb.WorkflowExecutionStatus
	events  []*historypb.HistoryEvent
	queue   string
	wfType  string
	started *historypb.WorkflowExecutionStartedEventAttributes
}

// read walks a chain back from its current run to its first, through the
// runs each continued from (as a continue-as-new, a reset keeps the chain).
func read(ctx context.Context, c client.Client, workflowID string) ([]chainRun, error) {
	var runs []chainRun
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("describing run %s: %w", workflowID, err)
	}
	for {
		if len(runs) >= MaxRuns {
			return nil, fmt.Errorf("run %s has more than %d runs in its chain: too long to read", workflowID, MaxRuns)
		}
		info := d.GetWorkflowExecutionInfo()
		r := chainRun{id: info.GetExecution().GetRunId(), status: info.GetStatus(), queue: info.GetTaskQueue(), wfType: info.GetType().GetName()}
		if r.events, err = history(ctx, c, workflowID, r.id); err != nil {
			return nil, err
		}
		if len(r.events) == 0 || r.events[0].GetWorkflowExecutionStartedEventAttributes() == nil {
			return nil, fmt.Errorf("run %s of %s: its history does not start with the run's start", r.id, workflowID)
		}
		r.started = r.events[0].GetWorkflowExecutionStartedEventAttributes()
		runs = append(runs, r)
		prev := r.started.GetContinuedExecutionRunId()
		if prev == "" {
			break
		}
		if d, err = c.DescribeWorkflowExecution(ctx, workflowID, prev); err != nil {
			return nil, fmt.Errorf("describing run %s of %s: %w", prev, workflowID, err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			break // a retry or cron successor: the chain starts here
		}
	}
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs, nil
}

// history reads one run's whole history, bounded.
func history(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("reading the history of run %s of %s: %w", runID, workflowID, err)
		}
		if len(events) >= MaxEvents {
			return nil, fmt.Errorf("run %s of %s has more than %d events: too long to read", runID, workflowID, MaxEvents)
		}
		events = append(events, ev)
	}
	return events, nil
}

// replayable cuts a history after its last completed workflow task: what
// follows has not been seen by the workflow yet, and a history cut while a
// task is in flight does not replay.
func replayable(events []*historypb.HistoryEvent) []*historypb.HistoryEvent {
	if n := len(events); n > 0 && isClose(events[n-1].GetEventType()) {
		return events
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			continue
		}
		// Keep the task's commands and messages: the replay matches them.
		id, j := events[i].GetEventId(), i+1
		for ; j < len(events); j++ {
			t := events[j].GetEventType()
			if taskOf(events[j]) != id && t != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED && t != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED {
				break
			}
		}
		return events[:j]
	}
	return nil
}

// taskOf is the workflow task whose command made ev (its attributes'
// workflow_task_completed_event_id), or 0.
func taskOf(ev *historypb.HistoryEvent) int64 {
	m := ev.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("attributes"))
	if f == nil || f.Message() == nil {
		return 0
	}
	inner := m.Get(f).Message()
	fd := inner.Descriptor().Fields().ByName("workflow_task_completed_event_id")
	if fd == nil {
		return 0
	}
	return inner.Get(fd).Int()
}

func isClose(t enumspb.EventType) bool {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

// observe replays one run with an observer.
func observe(workflowID string, r chainRun, o *workflows.Observer, opts Options) error {
	events := replayable(r.events)
	if len(events) == 0 {
		return nil // no workflow task has completed: nothing happened yet
	}
	rp, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: opts.DataConverter, FailureConverter: opts.FailureConverter})
	if err != nil {
		return err
	}
	rp.RegisterWorkflowWithOptions(workflows.Observe(o), workflow.RegisterOptions{Name: workflows.WorkflowName})
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4})))
	var ro worker.ReplayWorkflowHistoryOptions
	ro.OriginalExecution.ID, ro.OriginalExecution.RunID = workflowID, r.id
	err = rp.ReplayWorkflowHistoryWithOptions(logger, &historypb.History{Events: events}, ro)
	o.Finish()
	if err != nil {
		return fmt.Errorf("replaying run %s of %s with this worker's code: %w", r.id, workflowID, err)
	}
	return nil
}

// Read reads workflowID's chain and replays each of its runs.
func Read(ctx context.Context, c client.Client, workflowID string, opts Options) (*Timeline, error) {
	runs, err := read(ctx, c, workflowID)
	if err != nil {
		return nil, err
	}
	t := &Timeline{WorkflowID: workflowID, chain: runs, dc: opts.DataConverter}
	for _, r := range runs {
		if r.wfType != workflows.WorkflowName {
			return nil, fmt.Errorf("run %s of %s is a %q, not an %s", r.id, workflowID, r.wfType, workflows.WorkflowName)
		}
		o := &workflows.Observer{}
		if err := observe(workflowID, r, o, opts); err != nil {
			return nil, err
		}
		t.obs = append(t.obs, o)
		t.Runs = append(t.Runs, Run{RunID: r.id, Status: runStatus(r.status), Version: o.Version, Planner: o.Planner, Events: int64(len(r.events))})
	}
	t.LastEvent = t.Runs[len(t.Runs)-1].Events
	t.Steps = steps(t.Runs, t.obs)
	return t, nil
}

func runStatus(s enumspb.WorkflowExecutionStatus) string {
	name, ok := enumspb.WorkflowExecutionStatus_name[int32(s)]
	if !ok {
		return s.String()
	}
	return name[len("WORKFLOW_EXECUTION_STATUS_"):]
}

// steps puts the observed steps of every run together, each call with its
// last trace record across the chain.
func steps(runs []Run, obs []*workflows.Observer) []Step {
	last := map[string]workflows.TraceRecord{}
	decided, decision := map[string]string{}, map[string]string{}
	ran := map[string]bool{}
	destructive := map[string]bool{}
	for _, o := range obs {
		for _, rec := range o.Trace {
			if workflows.Notice(rec.Status) {
				continue // who was told, not what became of the call
			}
			last[rec.CallID] = rec
			switch rec.Status {
			case workflows.TraceApproved, workflows.TraceEdited, workflows.TraceRejected, workflows.TraceCancelled, workflows.TraceResponded:
				decided[rec.CallID], decision[rec.CallID] = rec.Approver, rec.Status
			case workflows.TraceOK, workflows.TraceInterrupted:
				ran[rec.CallID] = true
			case workflows.TraceError, workflows.TraceFallback:
				if rec.Attempts > 0 {
					ran[rec.CallID] = true
				}
			}
		}
		for _, s := range o.Tools {
			destructive[s.Name] = s.Destructive
		}
	}
	var out []Step
	seen := map[string]bool{}
	for i, o := range obs {
		for _, s := range o.Steps {
			step := Step{Step: s.Step, Turn: s.Turn, RunID: runs[i].RunID, ResetEvent: s.Event + 1}
			for j, c := range s.Calls {
				if seen[c.ID] {
					continue
				}
				seen[c.ID] = true
				rec := last[c.ID]
				args := c.Args
				if len(rec.Args) > 0 {
					args = rec.Args // canonical (or an approver's edit)
				}
				step.Calls = append(step.Calls, Call{ID: c.ID, Tool: c.Tool, Args: args, Destructive: destructive[c.Tool], Fallback: j >= s.Proposed,
					Status: rec.Status, Decision: decision[c.ID], Approver: decided[c.ID], Result: rec.Result, Error: rec.Error, Ran: ran[c.ID]})
			}
			if len(step.Calls) > 0 { // a step that answered proposed nothing to rewind to
				out = append(out, step)
			}
		}
	}
	return out
}

// Find returns the step that numbered call id.
func (t *Timeline) Find(id string) (Step, Call, error) {
	for _, s := range t.Steps {
		for _, c := range s.Calls {
			if c.ID == id {
				return s, c, nil
			}
		}
	}
	return Step{}, Call{}, fmt.Errorf("run %s has no call %s in the steps its history holds", t.WorkflowID, id)
}

// Check refuses a chain that cannot be rewound or forked: one whose
// planner is not the workflow's own, or whose runs started under rules
// older than version 7.
func (t *Timeline) Check() error {
	for _, r := range t.Runs {
		if r.Planner == plan.KindExternal {
			return fmt.Errorf("run %s is planned by an external client (planner %q): its steps are that client's proposals, which a rewind or fork cannot ask for again; "+
				"rewind and fork take runs whose planner runs in the workflow (scripted, support, openai)", t.WorkflowID, plan.KindExternal)
		}
		if r.Version < 7 {
			return fmt.Errorf("run %s of %s started under rules version %d: its idempotency keys do not name a call's arguments, "+
				"so a rewound call proposed again with other arguments could be answered with the old call's result; rewind and fork need version 7 or later",
				r.RunID, t.WorkflowID, r.Version)
		}
	}
	return nil
}
