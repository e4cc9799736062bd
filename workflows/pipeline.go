package workflows

import (
	"bytes"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// This file is a call's path: the stages every call the planner proposes
// passes, in this order, each naming the next. Nothing that can produce a
// result (memo, run, fallback) is reached before the gate has let the call by.
//
//	check     the tool is registered; its arguments are a JSON object its schema takes (gate.go)
//	gate      the run's rules: allow, deny, or ask a human (gate.go)
//	guard     the fleet ledger counts the call, or refuses it; again once a human decided (guards.go)
//	decide    a rule, a grant or a human meets what the rules ask (gate.go)
//	ask       a human is asked: the gate's question, or the tool's own (approvals.go)
//	wait      the human decides, or no one does in time, or the wait parks (approvals.go)
//	memo      a repeated read is answered from the memo (memo.go)
//	run       the tool's activity, with its bounded retry (executor.go)
//	fallback  a tool that used up its attempts is answered by its fallback (executor.go)
//
// What holds across stages is done at their boundaries, here and in
// spans.go, never inside a stage: a stage's span begins and ends; a human is
// notified when a wait begins and when it ends; the fleet ledger hears how a
// call it counts ended; and the call's last trace record is written.

// stage is one stage of a call's path.
type stage int

const (
	stageCheck stage = iota
	stageGate
	stageGuard
	stageDecide
	stageAsk
	stageWait
	stageMemo
	stageRun
	stageFallback
	stageEnd // the call ended: its flight holds the outcome
)

// execute takes a call the planner proposed (or a fallback, at depth) along
// its path from the first stage.
func (r *run) execute(ctx workflow.Context, c tool.Call, depth int) outcome {
	return r.flow(ctx, &flight{c: c, depth: depth, round: 1}, stageCheck)
}

// resume takes up a call whose wait the previous run parked (park.go), at
// the wait, as it stood: the same question, the approvals so far.
func (r *run) resume(ctx workflow.Context, pc ParkedCall, p *pending) outcome {
	f := &flight{c: tool.Call{ID: p.CallID, Tool: p.Tool, Args: p.CallArgs}, spec: r.specs[p.Tool],
		depth: pc.Depth, round: max(pc.Round, 1), kind: p.Kind, wait: p, note: pc.Note, outer: pc.FallbackOf}
	f.proposed = reservedCall(p).Args
	f.counted = f.proposed
	f.verdict.Rule = p.Rule
	// The fleet ledger hears how the call ends, unless it is one whose
	// tool's question parked in a run of rules version 16, which left it
	// counted until its guard's window ended.
	f.owes = pc.Round == 0 || r.version >= versionResumeSettles
	if pc.Counted { // so its trace says when the ledger releases it
		r.held[r.callKey(ctx, tool.Call{ID: f.c.ID, Tool: f.c.Tool, Args: f.counted})] = true
	}
	return r.flow(ctx, f, stageWait)
}

// flow takes f from stage at to the end of its path, doing at each boundary
// what holds across stages.
func (r *run) flow(ctx workflow.Context, f *flight, at stage) outcome {
	for at != stageEnd {
		r.beginSpan(ctx, f, at)
		next := r.pass(ctx, f, at)
		r.tell(ctx, f)
		if next == stageMemo && f.note == "" && !bytes.Equal(f.proposed, f.c.Args) {
			f.note = editNote(f.approval, f.c.Args, f.proposed) // it passed the gate, edited
		}
		if next == stageEnd || next == stageFallback {
			r.conclude(ctx, f)
		}
		r.endSpan(ctx, f, next)
		at = next
	}
	return f.ended()
}

// pass takes f through stage at, and says which stage comes next.
func (r *run) pass(ctx workflow.Context, f *flight, at stage) stage {
	switch at {
	case stageCheck:
		return r.checkStage(ctx, f)
	case stageGate:
		return r.gateStage(ctx, f)
	case stageGuard:
		return r.guardStage(ctx, f)
	case stageDecide:
		return r.decideStage(ctx, f)
	case stageAsk:
		return r.askStage(ctx, f)
	case stageWait:
		return r.waitStage(ctx, f)
	case stageMemo:
		return r.memoStage(ctx, f)
	case stageRun:
		return r.runStage(ctx, f)
	case stageFallback:
		return r.fallbackStage(ctx, f)
	}
	panic(fmt.Sprintf("no stage %d", at))
}

// conclude tells the fleet ledger how a call it counts ended (it ran, or it
// did not), and then writes the call's last record.
func (r *run) conclude(ctx workflow.Context, f *flight) {
	if f.owes && f.out.parked == nil && r.guarded(f.c.Tool, f.spec) {
		r.settleCall(ctx, tool.Call{ID: f.c.ID, Tool: f.c.Tool, Args: f.counted}, f.spec, f.ran)
	}
	f.owes = false
	if f.last != nil {
		r.record(f.c, *f.last)
		f.last = nil
	}
}

// tell notifies what became of a wait that ended, or that a wait began.
func (r *run) tell(ctx workflow.Context, f *flight) {
	if t := f.told; t != nil {
		f.told = nil
		r.notifyCall(ctx, t.event, f.wait, t.decision, t.by)
	}
}
