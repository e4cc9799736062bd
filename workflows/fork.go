package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file is a fork (rules version 7): a new run, under a new workflow id,
// that starts as another run stood just before one of its calls was
// proposed — its transcript, its memo of reads, its call counter — and
// proposes that call's step again, the call's arguments optionally
// replaced. The client names the source and the call; the worker reads the
// source's history from the server and replays it (ForkActivity), so what a
// fork starts from never comes from the client. No approval, grant or token
// of the source is carried into a fork, and its idempotency keys are its own
// (they name its workflow id).

// forkState is what a fork and a rewind leave in a run: forkStep holds the
// proposals a fork starts with; noted says whose rewind note the run took
// (one: the note of the reset that made it; rewind.go).
type forkState struct {
	forkStep []tool.Proposal
	noted    string
}

// MaxForkers bounds the operators a fork chain records as its forkers
// (Carry.ForkedBy): a fork of a fork past it is refused.
const MaxForkers = 16

// Fork is what a client asks a fork for (RunInput.Fork).
type Fork struct {
	// Source is the workflow id of the run forked; the worker finds the
	// run of its chain that proposed At.
	Source string `json:"source"`
	// At is the call ("c-3") whose step the fork proposes again.
	At string `json:"at"`
	// Args, if set, replace At's arguments in the fork.
	Args json.RawMessage `json:"args,omitempty"`
}

// ForkSource is ForkActivity's input: the fork's request and the task queue
// the fork runs on (the source must be an AgentRun on the same one).
type ForkSource struct {
	WorkflowID string `json:"workflow_id"`
	At         string `json:"at"`
	TaskQueue  string `json:"task_queue"`
}

// ForkState is what ForkActivity read from the source run's history.
type ForkState struct {
	// RunID is the run of the source's chain that proposed At, and Step the
	// planner step that did.
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
	// Input is the source's input: its goal, planner and settings (with no
	// carry, token or fork).
	Input RunInput `json:"input"`
	// State is the source's state at the start of At's step.
	State Carry `json:"state"`
	// Proposals are At's step as its planner proposed it.
	Proposals []tool.Proposal `json:"proposals"`
}

// checkFork refuses a fork input that sets anything but fork and
// request_token: a fork's settings are its source's.
func (in RunInput) checkFork() error {
	f := in.Fork
	switch {
	case strings.TrimSpace(f.Source) == "":
		return errors.New("fork.source: missing: name the workflow id of the run to fork")
	case len(f.Source) > MaxNameBytes:
		return fmt.Errorf("fork.source: %d bytes, at most %d", len(f.Source), MaxNameBytes)
	case !isCallID(f.At):
		return fmt.Errorf("fork.at: %q: want a call id such as \"c-3\"", clip(f.At, MaxNameBytes))
	case len(f.Args) > MaxArgsBytes:
		return fmt.Errorf("fork.args: %d bytes, at most %d", len(f.Args), MaxArgsBytes)
	}
	if len(f.Args) > 0 {
		canon, err := tool.Canonical(f.Args)
		if err != nil || canon[0] != '{' {
			return fmt.Errorf("fork.args: want a JSON object of the call's arguments: %s", clip(string(f.Args), 80))
		}
	}
	rest := in
	rest.Fork, rest.RequestToken = nil, ""
	rest.invalid, rest.inputDigest = nil, ""
	if !reflect.DeepEqual(rest, RunInput{}) {
		return errors.New("fork refused: a fork's input holds only fork (and request_token): its goal, planner, settings and state are its source run's, " +
			"read by the worker from the server; leave every other field out")
	}
	return nil
}

func isCallID(id string) bool {
	n, ok := strings.CutPrefix(id, "c-")
	v, err := strconv.Atoi(n)
	return ok && err == nil && v > 0 && strconv.Itoa(v) == n
}

// fork reads the source's state through ForkActivity and takes it up: the
// source's settings, its state at the start of At's step, and that step's
// proposals to make first. Under a policy it first checks the request
// token: a fork is an operator's signed act.
func (r *run) fork(ctx workflow.Context) error {
	f := r.in.Fork
	by, err := r.authorizeFork(ctx)
	if err != nil {
		return err
	}
	info := workflow.GetInfo(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "fork",
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{RefusedInput}},
	})
	var st ForkState
	src := ForkSource{WorkflowID: f.Source, At: f.At, TaskQueue: info.TaskQueueName}
	if err := workflow.ExecuteActivity(actx, ForkActivity, src).Get(ctx, &st); err != nil {
		return fmt.Errorf("fork refused: reading %s at %s: %s", clip(f.Source, MaxNameBytes), f.At, errorText(err))
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(f.At, "c-"))
	i := n - st.State.Calls - 1
	if i < 0 || i >= len(st.Proposals) {
		return fmt.Errorf("fork refused: %s is not one of the calls step %d of %s proposed", f.At, st.Step, clip(f.Source, MaxNameBytes))
	}
	at := st.Proposals[i]
	if len(f.Args) > 0 {
		at.Args = f.Args
		st.Proposals[i] = at
	}

	// The source's settings, bounded as any run's.
	in := st.Input
	in.Fork, in.RequestToken, in.inputDigest, in.Carry = r.in.Fork, r.in.RequestToken, r.in.inputDigest, nil
	in = withDefaults(in)
	in.MemoBytes, in.MemoEntries = min(in.MemoBytes, MaxMemoBytes), min(in.MemoEntries, MaxMemoEntries)
	in.HistoryLimit = min(in.HistoryLimit, MaxHistoryLimit)
	if err := in.checkPolicy(); err != nil {
		return fmt.Errorf("fork refused: the source's input: %w", err)
	}
	r.in, r.policy = in, in.Approval

	// The source's state before the step, without anything a human gave it.
	c := st.State
	c.Config, c.Spent = r.Config, r.Spent
	// The source's verified requester stays the requester (the rules'
	// requested_by, and no self-approval); whoever forked it, and forked the
	// forks it came from, may decide nothing in it either.
	if by != "" && !slices.Contains(c.ForkedBy, by) {
		if len(c.ForkedBy) >= MaxForkers {
			return fmt.Errorf("fork refused: %s is a fork of forks by %d operators already, at most %d", clip(f.Source, MaxNameBytes), len(c.ForkedBy), MaxForkers)
		}
		c.ForkedBy = append(c.ForkedBy, by)
	}
	c.Trace, c.TraceSeq, c.TraceDropped = nil, 0, 0
	c.Grants, c.Parked, c.CarriedBlockedOn, c.External, c.Refused = nil, nil, nil, nil, nil
	c.AwaitingInput, c.Answer, c.Ended = false, "", false
	r.restore(c)
	r.forkStep = st.Proposals

	reason := fmt.Sprintf("forked from %s (run %s) at %s, step %d: the state before that step; no approval carried", f.Source, st.RunID, f.At, st.Step)
	if len(f.Args) > 0 {
		reason += "; " + f.At + "'s arguments replaced"
	}
	r.record(tool.Call{ID: f.At, Tool: at.Tool, Args: at.Args}, TraceRecord{Status: TraceForked, Approver: by, Reason: reason})
	if r.Config.SearchAttributes {
		if err := workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword(SearchAttrForkedFrom).ValueSet(f.Source+"/"+f.At)); err != nil {
			r.logger.Warn("upserting search attributes", "error", err.Error())
		}
	}
	return nil
}

// authorizeFork checks, under a policy, that the fork was signed by an
// operator (a request token of action fork over this input), claims the
// token, and returns who signed it.
func (r *run) authorizeFork(ctx workflow.Context) (string, error) {
	pol := r.Config.Policy
	if pol == nil {
		if r.in.RequestToken != "" {
			return "", errors.New("request_token refused: this worker has no policy (--policy) to verify it against")
		}
		return "", nil
	}
	if err := r.compilePolicy(); err != nil {
		return "", err
	}
	if r.in.RequestToken == "" {
		return "", errors.New("fork refused: under this worker's policy a fork is an operator's signed act: start it with toolgate fork … --as NAME --key FILE")
	}
	c, err := r.verifyToken(r.in.RequestToken)
	if err == nil {
		err = r.checkTarget(c, signed.ActionFork)
	}
	if err == nil {
		err = pol.Operator(c.Approver)
	}
	if err == nil && (r.in.inputDigest == "" || c.InputDigest != r.in.inputDigest) {
		err = fmt.Errorf("%s's token signs another input: its input_digest %q is not the digest of this fork's input", c.Approver, clip(c.InputDigest, 64))
	}
	if err == nil {
		err = r.claimStart(ctx, r.in.RequestToken)
	}
	if err != nil {
		return "", fmt.Errorf("fork refused: %w", err)
	}
	r.spend(r.in.RequestToken, c)
	return c.Approver, nil
}

// nextStep is the planner's next step — or, first in a fork, the step the
// fork proposes again.
func (r *run) nextStep(ctx workflow.Context) (plan.Decision, error) {
	if r.forkStep != nil {
		d := plan.Decision{Calls: r.forkStep}
		r.forkStep = nil
		return d, nil
	}
	return r.planStep(ctx)
}
