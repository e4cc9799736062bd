package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// This file is a planner step's calls: numbered, executed together (each
// along the stages of pipeline.go), and fed back to the planner.

// accept numbers a step's proposals (c-1, c-2, … over the whole session) and
// records them in the transcript. Proposals beyond MaxCallsPerStep are numbered
// and answered with an error, not run.
func (r *run) accept(proposals []tool.Proposal) []tool.Call {
	calls := make([]tool.Call, len(proposals))
	for i, p := range proposals {
		calls[i] = r.newCall(p.Tool, p.Args)
	}
	r.addTranscript(plan.Entry{Role: plan.RoleAssistant, Calls: calls})
	r.observeAccept(calls)
	return calls
}

func (r *run) newCall(toolName string, args []byte) tool.Call {
	r.Calls++
	c := tool.Call{ID: fmt.Sprintf("c-%d", r.Calls), Tool: toolName, Args: args}
	r.observeCall(c)
	return c
}

// executeAll executes a step's calls concurrently — each with its own gate
// decision, so a pending approval holds back only its own call — and returns
// the outcomes in proposal order.
func (r *run) executeAll(ctx workflow.Context, calls []tool.Call) []outcome {
	outs := make([]outcome, len(calls))
	wg := workflow.NewWaitGroup(ctx)
	argsBytes := 0
	for i, c := range calls {
		if len(c.Args) <= MaxArgsBytes { // a larger call is refused on its own
			argsBytes += len(c.Args)
		}
		msg := ""
		switch {
		case i >= MaxCallsPerStep:
			msg = fmt.Sprintf("not run: a step may propose at most %d calls", MaxCallsPerStep)
		case argsBytes > MaxStepArgsBytes:
			msg = fmt.Sprintf("not run: a step's calls may carry at most %d bytes of arguments in all", MaxStepArgsBytes)
		}
		if msg != "" {
			r.record(c, TraceRecord{Status: TraceError, Error: msg})
			outs[i] = outcome{Status: TraceError, Error: msg}
			continue
		}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			outs[i] = r.execute(ctx, c, 0)
		})
	}
	wg.Wait(ctx)
	return outs
}

// endStep feeds a step's outcomes back to the planner, and ends the run if
// the step says so: it stopped at a call the deny policy blocks, or calls
// wait and the run continues as new (their step goes on in the next run).
func (r *run) endStep(ctx workflow.Context, calls []tool.Call, outs []outcome) (RunResult, error, bool) {
	if r.parking {
		r.carryParked(calls, outs)
		return RunResult{}, r.continueAsNew(ctx), true
	}
	for i, c := range calls {
		r.addTranscript(plan.Entry{Role: plan.RoleTool, CallID: c.ID, Tool: c.Tool,
			Status: outs[i].Status, Result: outs[i].Result, Error: outs[i].Error, Note: outs[i].Note})
	}
	if r.blockedOn != nil {
		res, err := r.finish(ctx, StatusBlocked)
		return res, err, true
	}
	return RunResult{}, nil, false
}
