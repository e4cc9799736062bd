package timeline

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/workflows"
)

// ForkState reads what a fork at src.At starts from: the source chain's run
// that proposed the call, its input (settings only) and its state at the
// start of the call's step. The source must be an AgentRun on the fork's
// own task queue; the worker's fork activity calls it, so a fork's state is
// read from the server and never taken from the client.
func ForkState(ctx context.Context, c client.Client, src workflows.ForkSource, opts Options) (workflows.ForkState, error) {
	t, err := Read(ctx, c, src.WorkflowID, opts)
	if err != nil {
		return workflows.ForkState{}, err
	}
	if err := t.Check(); err != nil {
		return workflows.ForkState{}, err
	}
	step, call, err := t.Find(src.At)
	if err != nil {
		return workflows.ForkState{}, err
	}
	if call.Fallback {
		return workflows.ForkState{}, fmt.Errorf("%s is a fallback call: fork at the call it fell back from, in step %d", src.At, step.Step)
	}
	for _, r := range t.chain {
		if r.id != step.RunID {
			continue
		}
		if r.queue != src.TaskQueue {
			return workflows.ForkState{}, fmt.Errorf("run %s of %s runs on task queue %q, not the fork's %q", r.id, src.WorkflowID, r.queue, src.TaskQueue)
		}
		// Replay that run again, keeping the state at the start of the step.
		o := &workflows.Observer{AtStep: step.Step}
		if err := observe(src.WorkflowID, r, o, opts); err != nil {
			return workflows.ForkState{}, err
		}
		if o.State == nil || o.Step == nil {
			return workflows.ForkState{}, fmt.Errorf("the replay of run %s did not reach the start of %s's step %d", r.id, src.At, step.Step)
		}
		in := o.Input
		in.Carry, in.RequestToken, in.Fork = nil, "", nil
		return workflows.ForkState{RunID: r.id, Step: step.Step, Input: in, State: *o.State, Proposals: o.Step}, nil
	}
	return workflows.ForkState{}, fmt.Errorf("no run of %s holds step %d", src.WorkflowID, step.Step)
}
