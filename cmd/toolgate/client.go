package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// start is `toolgate run`: start an AgentRun (and with --wait, follow it).
func (c *cli) start(ctx context.Context, args []string) error {
	fs := c.flags("run")
	cn := c.connFlags(fs)
	tq := taskQueueFlag(fs)
	id := fs.String("id", "", "workflow id of the run (required)")
	planFile := fs.String("plan", "", "file holding a RunInput as JSON")
	goal := fs.String("goal", "", "the goal, for a planner that reads it (support, openai)")
	planner := fs.String("planner", plan.KindSupport, "planner for --goal: support or openai")
	approval := fs.String("approval", "", "approval policy: human (default), deny or always_approve")
	wait := fs.Bool("wait", false, "follow the run until it ends")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *id == "" || (*planFile == "") == (*goal == "") {
		return errors.New("run needs --id and exactly one of --plan FILE or --goal TEXT")
	}
	in, err := runInput(*planFile, *goal, *planner)
	if err != nil {
		return err
	}
	if *approval != "" {
		in.Approval = *approval
	}
	cl, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer cl.Close()
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: *id, TaskQueue: *tq,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, workflows.WorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("a run with id %s is already running: pick another --id, or look at it with `toolgate status %s`", *id, *id)
		}
		return fmt.Errorf("starting run %s: %w", *id, err)
	}
	fmt.Fprintf(c.stdout, "started %s (run %s) on task queue %s\n", wr.GetID(), wr.GetRunID(), *tq)
	if !*wait {
		return nil
	}
	res, err := c.follow(ctx, cl, cn, *id, nil)
	if err != nil {
		return err
	}
	return resultError(res)
}

// runInput reads --plan, or builds the input for --goal.
func runInput(planFile, goal, planner string) (workflows.RunInput, error) {
	if goal != "" {
		return workflows.RunInput{Goal: goal, Planner: plan.Config{Kind: planner}}, nil
	}
	raw, err := os.ReadFile(planFile)
	if err != nil {
		return workflows.RunInput{}, fmt.Errorf("reading the plan: %w", err)
	}
	in, err := workflows.ParseRunInput(raw)
	if err != nil {
		return workflows.RunInput{}, fmt.Errorf("%s is not a RunInput: %w", planFile, err)
	}
	if in.Carry != nil {
		return workflows.RunInput{}, fmt.Errorf("%s sets carry, which only a run itself may set", planFile)
	}
	if err := in.Planner.Validate(); err != nil {
		return workflows.RunInput{}, fmt.Errorf("%s: %w", planFile, err)
	}
	return in, nil
}

// resultError maps a run's end to the exit code: 0 completed, 2 blocked, 1 failed.
func resultError(res workflows.RunResult) error {
	switch res.Status {
	case workflows.StatusCompleted:
		return nil
	case workflows.StatusBlocked:
		return &exitError{code: 2, err: fmt.Errorf("run blocked on %s %s (%s)", res.BlockedOn.Tool, res.BlockedOn.CallArgs, res.BlockedOn.CallID)}
	default:
		return &exitError{code: 1, err: fmt.Errorf("run %s: %s", res.Status, res.Error)}
	}
}

// snapshot is what the client commands show of a run: its state and trace,
// from queries while it runs, from its result once it has ended.
type snapshot struct {
	state  workflows.State
	trace  []workflows.TraceRecord
	result *workflows.RunResult
}

// look reads a run's state and trace.
func (c *cli) look(ctx context.Context, cl client.Client, id string) (snapshot, error) {
	desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return snapshot{}, fmt.Errorf("no run with id %s in this namespace", id)
		}
		return snapshot{}, fmt.Errorf("describing run %s: %w", id, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var res workflows.RunResult
		if err := cl.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			st := workflows.State{Status: workflows.StatusFailed, Error: err.Error(), Next: []string{}, Interrupts: []workflows.Interrupt{}}
			return snapshot{state: st, result: &workflows.RunResult{Status: workflows.StatusFailed, Error: err.Error()}}, nil
		}
		st := workflows.State{Status: res.Status, Answer: res.Answer, Error: res.Error, BlockedOn: res.BlockedOn, Next: []string{}, Interrupts: []workflows.Interrupt{}}
		return snapshot{state: st, trace: res.Trace, result: &res}, nil
	}
	var s snapshot
	if err := query(ctx, cl, id, workflows.QueryState, &s.state); err != nil {
		return snapshot{}, err
	}
	if err := query(ctx, cl, id, workflows.QueryTrace, &s.trace); err != nil {
		return snapshot{}, err
	}
	return s, nil
}

// querier is the part of client.Client that query uses.
type querier interface {
	QueryWorkflow(ctx context.Context, workflowID string, runID string, queryType string, args ...any) (converter.EncodedValue, error)
}

func query(ctx context.Context, cl querier, id, name string, out any) error {
	if err := queryRaw(ctx, cl, id, name, out); err != nil {
		return fmt.Errorf("querying %s of run %s (is a toolgate worker running on its task queue?): %w", name, id, err)
	}
	return nil
}

// queryRaw is query without the advice in its error.
func queryRaw(ctx context.Context, cl querier, id, name string, out any) error {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := cl.QueryWorkflow(qctx, id, "", name)
	if err != nil {
		return err
	}
	if err := v.Get(out); err != nil {
		return fmt.Errorf("decoding its %s: %w", name, err)
	}
	return nil
}

// status is `toolgate status ID`.
func (c *cli) status(ctx context.Context, args []string) error {
	return c.show(ctx, "status", args, c.renderStatus)
}

func (c *cli) renderStatus(s snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.state)
	}
	printState(c.stdout, s.state)
	return nil
}

// next is `toolgate next ID`: the nodes waiting to run.
func (c *cli) next(ctx context.Context, args []string) error {
	return c.show(ctx, "next", args, c.renderNext)
}

func (c *cli) renderNext(s snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.state.Next)
	}
	for _, n := range s.state.Next {
		fmt.Fprintln(c.stdout, oneLine(n))
	}
	return nil
}

// trace is `toolgate trace ID`.
func (c *cli) trace(ctx context.Context, args []string) error {
	return c.show(ctx, "trace", args, c.renderTrace)
}

func (c *cli) renderTrace(s snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.trace)
	}
	printTrace(c.stdout, s.trace)
	return nil
}

func (c *cli) show(ctx context.Context, name string, args []string, render func(snapshot, bool) error) error {
	fs := c.flags(name)
	cn := c.connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s needs exactly one run id", name)
	}
	cl, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := c.look(ctx, cl, pos[0])
	if err != nil {
		return err
	}
	return render(s, *asJSON)
}

func (c *cli) json(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// approve is `toolgate approve ID CALL_ID...`.
func (c *cli) approve(ctx context.Context, args []string) error {
	return c.decide(ctx, "approve", args)
}

// reject is `toolgate reject ID CALL_ID... --reason TEXT`.
func (c *cli) reject(ctx context.Context, args []string) error { return c.decide(ctx, "reject", args) }

// decide sends one update per call id, each bound to the arguments the
// operator is shown (the interrupt's args_digest), and reports each answer.
func (c *cli) decide(ctx context.Context, name string, args []string) error {
	fs := c.flags(name)
	cn := c.connFlags(fs)
	as := fs.String("as", envOr("USER", "operator"), "who decides (kept in the trace)")
	note := fs.String("note", "", "a note kept with the approval")
	reason := fs.String("reason", "", "why (required for reject; the planner receives it)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return fmt.Errorf("%s needs a run id and at least one call id", name)
	}
	if name == "reject" && strings.TrimSpace(*reason) == "" {
		return errors.New("reject needs --reason: the planner is told why")
	}
	cl, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer cl.Close()
	id := pos[0]
	s, err := c.look(ctx, cl, id)
	if err != nil {
		return err
	}
	var failed int
	for _, callID := range pos[1:] {
		in := workflows.DecisionInput{CallID: callID, Approver: *as, Note: *note, Reason: *reason}
		for _, it := range s.state.Interrupts {
			if it.CallID == callID {
				in.ArgsDigest, in.Kind = it.ArgsDigest, it.Kind
				fmt.Fprintf(c.stdout, "%s %s: %s %s\n", name, oneLine(callID), oneLine(it.Tool), oneLineBytes(it.CallArgs))
			}
		}
		res, err := sendDecision(ctx, cl, id, name, in)
		if err != nil {
			failed++
			fmt.Fprintf(c.stderr, "%s %s refused: %s\n", name, oneLine(callID), multiLine(err.Error()))
			continue
		}
		printDecision(c.stdout, res)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d decisions refused", failed, len(pos)-1)
	}
	return nil
}

// sendDecision sends an approve or reject update and waits for its answer.
func sendDecision(ctx context.Context, cl client.Client, id, name string, in workflows.DecisionInput) (workflows.DecisionResult, error) {
	h, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{in},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return workflows.DecisionResult{}, err
	}
	var res workflows.DecisionResult
	return res, h.Get(ctx, &res)
}

// pending is `toolgate pending`: every run waiting for a decision.
//
// A run whose state query fails (a wedged run, a run whose worker is gone)
// does not hide the others: their calls are listed as usual (stdout; with
// --json the same array as ever), and each run that could not be queried is
// named on stderr (with --json as one line {"failed":[{"run":…,"error":…}]}).
// The exit code is 0 then; it is 1 when listing the runs fails or when no
// run that was found could be queried.
func (c *cli) pending(ctx context.Context, args []string) error {
	fs := c.flags("pending")
	cn := c.connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	cl, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := inbox(ctx, cl)
	return c.printPending(res, err, *asJSON)
}

func (c *cli) printPending(res inboxResult, err error, asJSON bool) error {
	if len(res.Failed) > 0 {
		if asJSON {
			enc := json.NewEncoder(c.stderr)
			if err := enc.Encode(struct {
				Failed []runFailure `json:"failed"`
			}{res.Failed}); err != nil {
				return err
			}
		} else {
			for _, f := range res.Failed {
				fmt.Fprintf(c.stderr, "run %s not listed: its state query failed: %s\n", oneLine(f.Run), multiLine(f.Error))
			}
		}
	}
	if err != nil {
		return err
	}
	if asJSON {
		return c.json(res.Items)
	}
	printInbox(c.stdout, res.Items)
	return nil
}

// inboxItem is one call waiting for a decision, in some run.
type inboxItem struct {
	RunID string `json:"run"`
	workflows.Interrupt
}

// runFailure is a run whose state could not be queried.
type runFailure struct {
	Run   string `json:"run"`
	Error string `json:"error"`
}

// inboxResult is what inbox found: the waiting calls of the runs it could
// query, and the runs it could not.
type inboxResult struct {
	Items  []inboxItem
	Failed []runFailure
}

// runSource is the part of client.Client that inbox uses.
type runSource interface {
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	querier
}

// inbox lists the interrupts of every running AgentRun. With toolgate's
// search attributes it asks visibility for the waiting runs only; without
// them it asks every running AgentRun. A run whose state query fails is
// reported in Failed and the others are listed; the error is for a failed
// listing, or when every run found failed its query.
func inbox(ctx context.Context, cl runSource) (inboxResult, error) {
	q := fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running"`, workflows.WorkflowName)
	waiting := q + fmt.Sprintf(` AND %s = %q`, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)
	ids, err := listRuns(ctx, cl, waiting)
	if err != nil {
		if ids, err = listRuns(ctx, cl, q); err != nil {
			return inboxResult{}, fmt.Errorf("listing runs: %w", err)
		}
	}
	res := inboxResult{Items: []inboxItem{}}
	for _, id := range ids {
		var st workflows.State
		if err := queryRaw(ctx, cl, id, workflows.QueryState, &st); err != nil {
			res.Failed = append(res.Failed, runFailure{Run: id, Error: err.Error()})
			continue
		}
		for _, it := range st.Interrupts {
			res.Items = append(res.Items, inboxItem{RunID: id, Interrupt: it})
		}
	}
	if len(ids) > 0 && len(res.Failed) == len(ids) {
		return res, fmt.Errorf("none of the %d runs found could be queried (is a toolgate worker running on their task queue?)", len(ids))
	}
	return res, nil
}

func listRuns(ctx context.Context, cl runSource, query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}
