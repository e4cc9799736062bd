package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file is a rewind as the run sees it (rules version 7). A rewind is a
// Temporal reset of the run to the end of the workflow task in which a
// call's planner step began, with the signals and updates after that point
// left out: every approval given after it is gone, every destructive call
// after it comes back to the gate, and a call id proposed again with other
// arguments has another idempotency key (tool.ArgsKey). toolgate rewind then
// tells the new run who rewound it and from which preview (SignalRewound),
// which the run records — under a policy only from an operator's token.

// RewindNote is what toolgate rewind tells the new run (SignalRewound), and
// what QueryCheckRewind checks before the reset.
type RewindNote struct {
	// CallID is the call rewound to, Tool its tool, Step its planner step.
	CallID string `json:"call_id"`
	Tool   string `json:"tool,omitempty"`
	Step   int    `json:"step"`
	// BaseRunID is the run of the chain that was reset, and Event the
	// workflow task's end it was reset to.
	BaseRunID string `json:"base_run_id"`
	Event     int64  `json:"event"`
	// Preview is the digest of the preview the rewind was made from.
	Preview string `json:"preview"`
	// By names who rewound the run (no policy: as they say).
	By string `json:"by,omitempty"`
	// Token is the operator's signed rewind (signed.ActionRewind), under a
	// policy.
	Token string `json:"token,omitempty"`
}

// MaxTokenBytes bounds a token in a rewind note.
const MaxTokenBytes = 4096

// checkRewind checks a note: its fields, and under a policy the operator's
// token (bound to this run, the call, the base run and the preview). It
// returns who rewound the run.
func (r *run) checkRewind(n RewindNote) (string, signed.Claims, error) {
	var none signed.Claims
	switch {
	case !isCallID(n.CallID):
		return "", none, refusal(RefusedInput, "rewind note refused: call_id %q: want a call id such as \"c-3\"", clip(n.CallID, MaxNameBytes))
	case n.BaseRunID == "" || len(n.BaseRunID) > MaxNameBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: base_run_id must name the run that was reset")
	case len(n.Preview) != 64:
		return "", none, refusal(RefusedInput, "rewind note refused: preview must be the preview's digest (64 hex digits)")
	case len(n.Token) > MaxTokenBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: the token has %d bytes, at most %d", len(n.Token), MaxTokenBytes)
	case len(n.By) > MaxNameBytes || len(n.Tool) > MaxNameBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: by and tool are at most %d bytes", MaxNameBytes)
	}
	if r.engine == nil {
		if n.Token != "" {
			return "", none, refusal(RefusedInput, "rewind note refused: this worker has no policy (--policy) to verify its token against")
		}
		return n.By, none, nil
	}
	c, err := r.verifyToken(n.Token)
	if err == nil {
		err = r.checkTarget(c, signed.ActionRewind)
	}
	if err == nil {
		if e := r.engine.Policy().Operator(c.Approver); e != nil {
			err = refusal(RefusedUnauthorized, "%s", e.Error())
		}
	}
	if err == nil && (c.CallID != n.CallID || c.Source != n.BaseRunID || c.Preview != n.Preview) {
		err = refusal(RefusedUnauthorized, "%s's token signs a rewind of run %s to %s from preview %s, not this one (run %s to %s from preview %s)",
			c.Approver, clip(c.Source, MaxNameBytes), clip(c.CallID, MaxNameBytes), clipDigest(c.Preview), n.BaseRunID, n.CallID, clipDigest(n.Preview))
	}
	if err != nil {
		return "", c, err
	}
	return c.Approver, c, nil
}

func clipDigest(d string) string {
	if len(d) > 16 {
		return clip(d[:16], 16)
	}
	return clip(d, 16)
}

// rewound records a rewind note the run takes: who rewound it, to which
// call, from which preview. A note it refuses is kept in state.refused.
func (r *run) rewound(n RewindNote) error {
	info := workflow.GetInfo(r.root)
	if info.OriginalRunID == "" || info.OriginalRunID == info.WorkflowExecution.RunID {
		return errors.New("rewind note refused: this run was not reset (it is its chain's run " + info.WorkflowExecution.RunID + " as it started)")
	}
	for _, rec := range r.Trace { // the same note twice (a retried rewind) is recorded once
		if rec.Status == TraceRewound && rec.CallID == n.CallID && rec.Reason == rewindReason(n) {
			return nil
		}
	}
	by, c, err := r.checkRewind(n)
	if err != nil {
		return err
	}
	r.spend(n.Token, c)
	r.record(tool.Call{ID: n.CallID, Tool: n.Tool}, TraceRecord{Status: TraceRewound, Approver: by, Reason: rewindReason(n)})
	r.publish(r.root)
	return nil
}

func rewindReason(n RewindNote) string {
	return fmt.Sprintf("rewound to just before %s's step (step %d): run %s reset to event %d; preview %s", n.CallID, n.Step, n.BaseRunID, n.Event, n.Preview)
}
