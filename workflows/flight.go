package workflows

import (
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file is what a call carries along its path (pipeline.go): each
// stage reads what the stages before it learnt, and adds what it learns.

// flight is one call on its path: what each stage learnt of it so far.
type flight struct {
	c     tool.Call
	spec  tool.Spec
	depth int // in a chain of fallbacks: 0, proposed by the planner
	round int // of its activity: 1, and one more after each question of the tool's answered

	proposed []byte         // the arguments proposed: an approver may edit c.Args
	counted  []byte         // the arguments the fleet ledger counts
	verdict  policy.Verdict // the rules' verdict (under a policy)
	guardWhy string         // why a guard asks a human (then no grant lets the call by)
	approval *tool.Approval // what the call goes on with: the gate's, then the tool's question's

	kind     tool.DecisionKind // what a human is asked: at the gate, or the tool's own question
	question string            // why they are asked
	asked    *policy.Verdict   // who may answer (nil: the tool's approvers)
	wait     *pending          // the wait: asked, or taken up from a parked run
	decided  bool              // a human let the call by at the gate: the ledger counts it again
	told     *told             // what became of the wait, to notify

	owes     bool            // the fleet ledger must hear how the call ended
	ran      bool            // the tool ran and succeeded: the ledger commits it
	last     *TraceRecord    // the call's last record, written once the ledger heard
	note     string          // an approver's edit of this call or an outer one, told to the planner
	outer    []FallbackFrame // the calls this call is the fallback of, innermost first
	fallback *FallbackFrame  // the call failed: its fallback answers it

	span  *step // the span open on the call (spans.go)
	since int   // the trace's sequence number when it opened
	out   outcome
}

// told is what a notification of a wait says: that it began, or how it ended.
type told struct {
	event, decision, by string
}

// end ends the call with out.
func (f *flight) end(out outcome) stage {
	f.out = out
	return stageEnd
}

// endWith ends the call with out, and rec as its last trace record.
func (f *flight) endWith(out outcome, rec TraceRecord) stage {
	f.last = &rec
	return f.end(out)
}

// ended is the call's outcome as the planner takes it: with the edit an
// approver made, and the errors of the calls it is the fallback of. A call
// that parked carries them to the next run instead.
func (f *flight) ended() outcome {
	out := f.out
	if pk := out.parked; pk != nil {
		if f.note != "" {
			pk.note = f.note
		}
		pk.frames = append(pk.frames, f.outer...)
		return out
	}
	if f.note != "" {
		out.Note = f.note
	}
	for _, o := range f.outer {
		out.Error = joinErrors(fallbackError(o.Call.Tool, o.Attempts, o.Error, o.Fallback, o.FallbackID), out.Error)
	}
	return out
}
