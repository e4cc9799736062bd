// Package client is toolgate's Go API for the programs around a worker: start
// runs, read what they do and what they wait for, and decide their waiting
// calls. The toolgate CLI is built on it.
//
//	c := client.New(temporalClient)
//	run, err := c.Start(ctx, "ticket-42", workflows.RunInput{Goal: "…", Planner: …})
//	st, err := c.AwaitDecision(ctx, "ticket-42")    // once a call waits: its interrupt, with args_digest
//	outs, err := c.Approve(ctx, "ticket-42", client.As("alice"), st.Interrupts[0].CallID) // bound to that digest
//	res, err := c.Result(ctx, "ticket-42")
//
// Refusals are typed: errors.Is(err, ErrUnknownRun), ErrRunClosed,
// ErrUnknownCall, ErrAlreadyDecided, ErrDigestMismatch or ErrRefusedInput
// (and ErrRunEnded from AwaitDecision).
package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Client is a toolgate client over a Temporal client (which it closes only
// when Dial made it).
type Client struct {
	tc        sdkclient.Client
	owned     bool // Dial made tc: Close closes it
	taskQueue string
	// resultCheck is how often Result asks whether the run has closed
	// while its long poll has not answered (resultCheckInterval).
	resultCheck time.Duration
	// decisionPoll is AwaitDecision's first wait between two looks.
	decisionPoll time.Duration
	// queryTimeout bounds the queries of one run while listing (WithQueryTimeout).
	queryTimeout time.Duration
	// dc and fc decode histories (Steps, rewinds); namespace is where
	// resets go.
	dc        converter.DataConverter
	fc        converter.FailureConverter
	namespace string
	// authority reads the fleet ledger (Guards): given (WithAuthority) or
	// made over tc's connection for authorityNS at first use.
	authMu      sync.Mutex
	authority   sdkclient.Client
	authorityNS string
}

// Option configures a Client.
type Option func(*Client)

// WithTaskQueue sets the task queue runs are started on, and whose runs
// Pending lists (default workflows.TaskQueue).
func WithTaskQueue(q string) Option { return func(c *Client) { c.taskQueue = q } }

// WithDataConverter sets the data converter the run's payloads are written
// with (connect's encryption codec, say), which Steps and Rewind decode
// histories with. Dial sets the connection's.
func WithDataConverter(dc converter.DataConverter) Option { return func(c *Client) { c.dc = dc } }

// WithFailureConverter sets the failure converter the run's failures are
// written with (connect's encryption encrypts their messages too). Dial sets
// the connection's.
func WithFailureConverter(fc converter.FailureConverter) Option { return func(c *Client) { c.fc = fc } }

// WithConnection takes the data and failure converters and the namespace
// of the connection tc was dialled with (connect.Dial).
func WithConnection(conn *connect.Conn) Option {
	return func(c *Client) {
		c.dc, c.fc, c.namespace = conn.Options.DataConverter, conn.Options.FailureConverter, conn.Options.Namespace
		c.authorityNS = conn.AuthorityNamespace
	}
}

// WithAuthority sets the client of the authority namespace the fleet
// ledger is read from (Guards); default: one over tc's connection, for the
// connection's authority namespace (WithConnection), else the namespace +
// authority.Suffix. A person needs only read access to it.
func WithAuthority(ac sdkclient.Client) Option { return func(c *Client) { c.authority = ac } }

// WithNamespace names tc's namespace (default "default"), which a rewind's
// reset names. Dial sets the connection's.
func WithNamespace(ns string) Option { return func(c *Client) { c.namespace = ns } }

// New returns a Client over tc.
func New(tc sdkclient.Client, opts ...Option) *Client {
	c := &Client{tc: tc, taskQueue: workflows.TaskQueue, resultCheck: resultCheckInterval, decisionPoll: decisionPoll,
		queryTimeout: DefaultQueryTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Dial connects to Temporal with s (package connect: the profile file shared
// with the temporal CLI, TEMPORAL_* variables, and s's own address, TLS, API
// key and encryption key file) and returns a Client over that connection.
// Close it when done.
func Dial(ctx context.Context, s connect.Settings, opts ...Option) (*Client, error) {
	tc, conn, err := connect.Dial(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	c := New(tc, append([]Option{WithConnection(conn)}, opts...)...)
	c.owned = true
	return c, nil
}

// Close closes the Temporal client if Dial made it; a Client made with New
// leaves its Temporal client to its owner.
func (c *Client) Close() {
	if c.owned {
		c.tc.Close()
	}
}

// Namespace is the namespace of the runs the Client speaks to.
func (c *Client) Namespace() string { return cmp.Or(c.namespace, connect.DefaultNamespace) }

// Temporal is the Temporal client underneath.
func (c *Client) Temporal() sdkclient.Client { return c.tc }

// StartOption configures one start.
type StartOption func(*sdkclient.StartWorkflowOptions)

// WithSearchAttributes sets search attributes on the run at its start.
func WithSearchAttributes(sa temporal.SearchAttributes) StartOption {
	return func(o *sdkclient.StartWorkflowOptions) { o.TypedSearchAttributes = sa }
}

// WithTemporalOptions edits the start options Temporal gets (timeouts, id
// reuse policy, memo …); the workflow id and the task queue stay the Client's.
func WithTemporalOptions(edit func(*sdkclient.StartWorkflowOptions)) StartOption {
	return func(o *sdkclient.StartWorkflowOptions) { edit(o) }
}

// Start starts an AgentRun with workflow id id. The input is checked as the
// run would check it (workflows.ParseRunInput) before anything is sent, so a
// bad input is refused here with ErrRefusedInput; a run already running
// under id is refused too (ErrRefusedInput).
func (c *Client) Start(ctx context.Context, id string, in workflows.RunInput, opts ...StartOption) (sdkclient.WorkflowRun, error) {
	if id == "" {
		return nil, refused(ErrRefusedInput, "a run needs a workflow id")
	}
	raw, err := c.checkStart(in)
	if err != nil {
		return nil, err
	}
	so := sdkclient.StartWorkflowOptions{WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true}
	for _, o := range opts {
		o(&so)
	}
	so.ID, so.TaskQueue = id, c.taskQueue
	run, err := c.tc.ExecuteWorkflow(ctx, so, workflows.WorkflowName, json.RawMessage(raw))
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, refused(ErrRefusedInput, fmt.Sprintf("a run with id %s is already running", id))
		}
		return nil, fmt.Errorf("starting run %s: %w", id, err)
	}
	return run, nil
}

// checkStart checks a run's input as the run would, and encodes it.
func (c *Client) checkStart(in workflows.RunInput) ([]byte, error) { return CheckInput(in) }

// CheckInput checks a run's input as the run would (a carry, which only a
// run that continues as new writes, is refused too), and encodes it: a door
// that starts runs by other means than Start refuses a bad input at once.
func CheckInput(in workflows.RunInput) ([]byte, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding the input: %w", err)
	}
	if _, err := workflows.ParseRunInput(raw); err != nil {
		return nil, refused(ErrRefusedInput, err.Error())
	}
	if in.Carry != nil {
		return nil, refused(ErrRefusedInput, "carry is written only by a run that continues as new")
	}
	return raw, nil
}

// State is the run's state query: status, what it waits for (with each
// call's exact arguments and args_digest), memo, refusals.
func (c *Client) State(ctx context.Context, id string) (workflows.State, error) {
	var st workflows.State
	return st, c.retiredOr(id, c.query(ctx, id, workflows.QueryState, &st))
}

// Next names the nodes the run waits to run ("gate:close_ticket").
func (c *Client) Next(ctx context.Context, id string) ([]string, error) {
	var next []string
	return next, c.retiredOr(id, c.query(ctx, id, workflows.QueryNext, &next))
}

// Trace is the run's append-only trace.
func (c *Client) Trace(ctx context.Context, id string) ([]workflows.TraceRecord, error) {
	var tr []workflows.TraceRecord
	return tr, c.retiredOr(id, c.query(ctx, id, workflows.QueryTrace, &tr))
}

// Tool reads the spec of tool name as run id holds it (its argument schema
// among others).
func (c *Client) Tool(ctx context.Context, id, name string) (tool.Spec, error) {
	v, err := c.tc.QueryWorkflow(ctx, id, "", workflows.QueryTool, name)
	if err != nil {
		return tool.Spec{}, c.classify(ctx, id, err)
	}
	var spec tool.Spec
	if err := v.Get(&spec); err != nil {
		return spec, fmt.Errorf("decoding the spec of %s in run %s: %w", name, id, err)
	}
	return spec, nil
}

// Snapshot is a run's state and trace, from queries while it runs and from
// its result once it has ended (Result is then set).
type Snapshot struct {
	State  workflows.State
	Trace  []workflows.TraceRecord
	Result *workflows.RunResult
}

// Look reads a run's state and trace, whether it runs or has ended. A run
// whose result (or, while it runs, state or trace) this client cannot decode
// is an error of kind ErrUnreadable, never a status made up in its place.
func (c *Client) Look(ctx context.Context, id string) (Snapshot, error) {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Snapshot{}, c.classifyDescribe(id, err)
	}
	if status := desc.GetWorkflowExecutionInfo().GetStatus(); status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		res, err := c.Result(ctx, id)
		if err != nil && status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && unreadable(ctx, err) {
			return Snapshot{}, refused(ErrUnreadable, fmt.Sprintf("run %s has completed, but its result cannot be read: %v", id, err))
		}
		if err != nil {
			res = workflows.RunResult{Status: workflows.StatusFailed, Error: err.Error()}
		}
		st := workflows.State{Status: res.Status, Answer: res.Answer, Error: res.Error, BlockedOn: res.BlockedOn,
			Next: []string{}, Interrupts: []workflows.Interrupt{}}
		return Snapshot{State: st, Trace: res.Trace, Result: &res}, nil
	}
	var s Snapshot
	if s.State, err = c.State(ctx, id); err != nil {
		return Snapshot{}, err
	}
	if s.Trace, err = c.Trace(ctx, id); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// Message sends a session run its next user turn.
func (c *Client) Message(ctx context.Context, id, text string) error {
	return c.classifyTo(ctx, id, c.tc.SignalWorkflow(ctx, id, "", workflows.SignalMessage, workflows.MessageInput{Text: text}), "messages")
}

// End ends a session run after its current turn.
func (c *Client) End(ctx context.Context, id string) error {
	return c.classifyTo(ctx, id, c.tc.SignalWorkflow(ctx, id, "", workflows.SignalEnd, struct{}{}), "messages")
}

func (c *Client) query(ctx context.Context, id, name string, out any) error {
	v, err := c.tc.QueryWorkflow(ctx, id, "", name)
	if err != nil {
		return c.classify(ctx, id, err)
	}
	if err := v.Get(out); err != nil {
		return refused(ErrUnreadable, fmt.Sprintf("the %s of run %s cannot be read: %v", name, id, err))
	}
	return nil
}

// unreadable says whether err, from the result of a run that completed, is
// the client's failing to decode that result: not the run's failure, not a
// refusal, not the caller's deadline.
func unreadable(ctx context.Context, err error) bool {
	var failed *temporal.WorkflowExecutionError
	var refusal *Error
	return ctx.Err() == nil && !errors.As(err, &failed) && !errors.As(err, &refusal)
}

// classify turns Temporal's errors into the package's typed ones where one
// fits. A NotFound is told apart with DescribeWorkflowExecution: no run of
// that id (ErrUnknownRun), or a run that has closed (ErrRunClosed).
func (c *Client) classify(ctx context.Context, id string, err error) error {
	return c.classifyTo(ctx, id, err, "")
}

// classifyTo is classify, for a request that sends the run something: takes
// names what a closed run takes no more of ("decisions").
func (c *Client) classifyTo(ctx context.Context, id string, err error, takes string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return c.notFound(ctx, id, err, takes)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if kind := kindOf(appErr.Type()); kind != nil {
			return refused(kind, appErr.Message())
		}
	}
	return err
}

// classifyDescribe is classify for DescribeWorkflowExecution's own error:
// its NotFound is a run that does not exist.
func (c *Client) classifyDescribe(id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return unknownRun(id)
	}
	return c.classifyTo(context.Background(), id, err, "")
}

// unknownRun is the refusal for a workflow id the namespace does not have.
func unknownRun(id string) error {
	return refused(ErrUnknownRun, fmt.Sprintf("no run with id %s in this namespace", id))
}

// notFound says what a NotFound for run id means: the server answers one for
// a run that does not exist and for a run that has closed alike, so it asks
// which.
func (c *Client) notFound(ctx context.Context, id string, err error, takes string) error {
	desc, derr := c.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(derr, &nf):
		return unknownRun(id)
	case derr != nil:
		return fmt.Errorf("run %s: %w (and describing it to tell why failed: %v)", id, err, derr)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("run %s: %w", id, err)
	}
	return closedRun(id, info.GetStatus(), info.GetCloseTime().AsTime(), takes)
}

// ended says whether a run's state status is one it ends with.
func ended(status string) bool {
	return status == workflows.StatusCompleted || status == workflows.StatusFailed || status == workflows.StatusBlocked
}

// closedNow is ErrRunClosed if run id has closed, and nil if it has not (or
// describing it fails: the request goes on, and says what is wrong).
func (c *Client) closedNow(ctx context.Context, id, takes string) error {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && st != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return closedRun(id, st, info.GetCloseTime().AsTime(), takes)
	}
	return nil
}

// closedRun is the refusal for run id, which has closed with status at closedAt.
func closedRun(id string, status enumspb.WorkflowExecutionStatus, closedAt time.Time, takes string) error {
	msg := fmt.Sprintf("run %s %s (closed at %s)", id, closedHow(status), closedAt.UTC().Format(time.RFC3339))
	if takes != "" {
		msg += ": it takes no more " + takes
	}
	return refused(ErrRunClosed, msg)
}

// closedHow says how a run closed: "has completed", "was terminated" …
func closedHow(status enumspb.WorkflowExecutionStatus) string {
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "has completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "has failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "was cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "was terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return "has closed (" + status.String() + ")"
}

// retiredOr is err, or, for a query that failed otherwise than for a run
// that is not there or refused it, ErrRetired when the run's workers do not
// run its rules version (retired).
func (c *Client) retiredOr(id string, err error) error {
	var nf *serviceerror.NotFound
	var refusal *Error
	if err == nil || errors.As(err, &nf) || errors.As(err, &refusal) {
		return err
	}
	if msg, ok := c.retired(id); ok {
		return refused(ErrRetired, msg)
	}
	return err
}

// retired says whether run id's workflow task last failed because the
// worker that took it does not run the run's rules version, and that
// worker's words (workflows.RetiredMessage): a query of such a run is never
// answered, so a failed query looks for it in the run's latest events, under
// a deadline of its own (the query's may have passed).
func (c *Client) retired(id string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.tc.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace: c.Namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id}, MaximumPageSize: 50})
	if err != nil {
		return "", false
	}
	for _, ev := range resp.GetHistory().GetEvents() {
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil && f.GetFailure() != nil {
			fc := c.fc // a worker that encrypts payloads encodes the failure's message too
			if fc == nil {
				fc = temporal.GetDefaultFailureConverter()
			}
			msg := fc.FailureToError(f.GetFailure()).Error()
			return msg, workflows.IsRetired(msg)
		}
		if ev.GetWorkflowTaskCompletedEventAttributes() != nil {
			return "", false
		}
	}
	return "", false
}
