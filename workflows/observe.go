package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// This file lets a replay of a run's history tell what the run did step by
// step — the steps of `toolgate steps`, the points a rewind resets to, and
// the state a fork starts from — with the workflow's own code, so nothing
// about a run is re-derived by a second implementation that could disagree
// with it. An Observer only records; the run it watches decides exactly as
// it did (replay checks that its commands match the history).

// Observer watches one replay of a run (Observe).
type Observer struct {
	// AtStep names a planner step (1 for the first): the replay keeps the
	// run's state as it stood at that step's start (State), and the step's
	// proposals (Step). Find the step first with a replay without it: the
	// state is copied once, at that step, not at every step.
	AtStep int

	// Input is the run's input as it started, defaults applied.
	Input RunInput
	// Version is the run's rules version.
	Version int
	// Planner is the run's planner kind.
	Planner string
	// Steps are the planner steps the run began, in order.
	Steps []ObservedStep
	// State is the run's state (as it would carry it) at the start of step
	// AtStep; nil until the replay reached it.
	State *Carry
	// Step is step AtStep as the planner proposed it: its proposals, in order.
	Step []tool.Proposal
	// Trace is the run's trace as the replay left it.
	Trace []TraceRecord
	// Calls is the number of calls the run numbered.
	Calls int
	// Tools are the run's tools as its config declared them.
	Tools []tool.Spec

	run *run
}

// ObservedStep is one planner step of a run, as a replay saw it begin.
type ObservedStep struct {
	// Step is the run chain's step number (1 for the first).
	Step int `json:"step"`
	Turn int `json:"turn"`
	// Event is the WorkflowTaskStarted event of the workflow task the step
	// began in: resetting the run to the task's end (Event+1) runs that
	// task again from its start, so the step is planned anew.
	Event int64 `json:"event"`
	// Calls are the calls the step numbered: its proposals, then any
	// fallback calls they led to, in the order they were numbered.
	Calls []tool.Call `json:"calls"`
	// Proposed is how many of Calls the planner proposed (the rest are
	// fallbacks).
	Proposed int `json:"proposed"`
}

// Observe returns AgentRun with o watching: register it under WorkflowName
// in a worker.WorkflowReplayer and replay one run's history; o then holds
// what the run did. It must not run on a worker.
func Observe(o *Observer) func(workflow.Context, RunInput) (RunResult, error) {
	return func(ctx workflow.Context, in RunInput) (RunResult, error) {
		return agentRun(ctx, in, o)
	}
}

// started notes the run's input and rules version.
func (o *Observer) started(r *run) {
	o.run, o.Input, o.Version, o.Planner = r, r.in, int(r.version), r.in.Planner.Kind
}

// observeStep notes that a planner step begins, and keeps the state it
// begins from if it is step AtStep.
func (r *run) observeStep(ctx workflow.Context) {
	o := r.obs
	if o == nil {
		return
	}
	o.Steps = append(o.Steps, ObservedStep{Step: r.Steps + 1, Turn: r.Turn, Event: int64(workflow.GetInfo(ctx).GetCurrentHistoryLength())})
	if o.AtStep == r.Steps+1 && o.State == nil {
		// A copy that later steps cannot change: the run appends to the
		// slices this one shares.
		b, err := json.Marshal(r.carryOver(r.in))
		var copied Carry
		if err == nil && json.Unmarshal(b, &copied) == nil {
			o.State = &copied
		}
	}
}

// observeCall notes a call the run numbered, in the step begun last.
func (r *run) observeCall(c tool.Call) {
	if o := r.obs; o != nil && len(o.Steps) > 0 {
		s := &o.Steps[len(o.Steps)-1]
		s.Calls = append(s.Calls, c)
	}
}

// observeAccept notes the calls a step proposed; step AtStep's are the
// ones a fork of it proposes again.
func (r *run) observeAccept(calls []tool.Call) {
	o := r.obs
	if o == nil || len(o.Steps) == 0 {
		return
	}
	s := &o.Steps[len(o.Steps)-1]
	s.Proposed = len(calls)
	if s.Step == o.AtStep && o.Step == nil {
		for _, p := range calls {
			o.Step = append(o.Step, tool.Proposal{Tool: p.Tool, Args: append(json.RawMessage{}, p.Args...)})
		}
	}
}

// Finish takes what the replay left: the trace. Call it after the replay
// returned.
func (o *Observer) Finish() {
	if o.run != nil {
		o.Trace = append([]TraceRecord(nil), o.run.Trace...)
		o.Calls = o.run.Calls
		o.Tools = o.run.Config.Tools
		o.Input, o.Planner = o.run.in, o.run.in.Planner.Kind // a fork's, once it took its source's
	}
}

// StepOf returns the observed step that numbered call id.
func (o *Observer) StepOf(id string) (ObservedStep, error) {
	for _, s := range o.Steps {
		for _, c := range s.Calls {
			if c.ID == id {
				return s, nil
			}
		}
	}
	return ObservedStep{}, fmt.Errorf("no step of this run numbered call %s", clip(id, MaxNameBytes))
}
