package timeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

// Preview is what a rewind to a call will do, said before it is done: the
// side effects after the point that stay (a rewind undoes nothing outside
// the run), the human decisions and the grants and revokes it drops, the
// reads that run again and the messages it drops. Digest names the preview,
// the run as it stood included: a rewind made with --expect DIGEST is
// refused once the run has moved on.
type Preview struct {
	WorkflowID string `json:"workflow_id"`
	// To is the call rewound to, and Step its planner step.
	To   string `json:"to"`
	Tool string `json:"tool"`
	Step int    `json:"step"`
	// BaseRunID is the run of the chain reset, ResetEvent the event it is
	// reset to; CurrentRunID and LastEvent the chain's current run and its
	// last event when the preview was made.
	BaseRunID    string `json:"base_run_id"`
	ResetEvent   int64  `json:"reset_event"`
	CurrentRunID string `json:"current_run_id"`
	LastEvent    int64  `json:"last_event"`
	// Redo are the calls of the steps after the point (To's step, and any
	// step begun in the same workflow task): they are proposed again, or
	// not, by the planner.
	Redo []string `json:"redo"`
	// Kept are the side effects after the point: destructive calls whose
	// tool ran. They are not undone.
	Kept []Call `json:"kept"`
	// Dropped are the human decisions after the point: approvals (and
	// rejections, edits, responses) the rewound run will not have. A
	// destructive call proposed again comes back to the gate.
	Dropped []Call `json:"dropped"`
	// Grants are the grants and revokes after the point, in order: a rewind
	// drops them (it re-applies no update), so a dropped grant lets no call
	// through and a dropped revoke puts its grant back in force.
	Grants []GrantAct `json:"grants"`
	// Reads are the reads after the point that ran: they run again if the
	// planner proposes them (or are answered from the memo as it stood).
	Reads []Call `json:"reads"`
	// Messages counts the user messages after the point: signals are not
	// re-applied, so they are dropped.
	Messages int `json:"messages"`
	// Digest is the hex SHA-256 of the preview's JSON without it.
	Digest string `json:"digest"`
}

// Preview says what a rewind of the chain to just before call id's step
// would do.
func (t *Timeline) Preview(id string) (Preview, error) {
	if err := t.Check(); err != nil {
		return Preview{}, err
	}
	step, call, err := t.Find(id)
	if err != nil {
		return Preview{}, err
	}
	if call.Fallback {
		return Preview{}, fmt.Errorf("%s is a fallback call: rewind to the call it fell back from, in step %d", id, step.Step)
	}
	cur := t.Runs[len(t.Runs)-1]
	p := Preview{WorkflowID: t.WorkflowID, To: id, Tool: call.Tool, Step: step.Step, BaseRunID: step.RunID, ResetEvent: step.ResetEvent,
		CurrentRunID: cur.RunID, LastEvent: t.LastEvent, Redo: []string{}, Kept: []Call{}, Dropped: []Call{}, Reads: []Call{}}
	after := false
	for _, s := range t.Steps {
		if s.RunID == step.RunID && s.ResetEvent >= step.ResetEvent {
			after = true
		}
		if !after {
			continue
		}
		for _, c := range s.Calls {
			p.Redo = append(p.Redo, c.ID)
			switch {
			case c.Destructive && c.Ran:
				p.Kept = append(p.Kept, c)
			case !c.Destructive && c.Ran:
				p.Reads = append(p.Reads, c)
			}
			if c.Approver != "" && !strings.Contains(c.Approver, ":") { // rule:… and policy:… decide again by themselves
				p.Dropped = append(p.Dropped, c)
			}
		}
	}
	dc := t.dc
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	if p.Grants, err = grantsAfter(t.chain, step.RunID, step.ResetEvent, dc); err != nil {
		return Preview{}, err
	}
	p.Messages = messagesAfter(t.chain, step.RunID, step.ResetEvent)
	p.Digest = p.digest()
	return p, nil
}

// messagesAfter counts the message signals after the point.
func messagesAfter(runs []chainRun, base string, event int64) int {
	n, after := 0, false
	for _, r := range runs {
		for _, ev := range r.events {
			if r.id == base && ev.GetEventId() > event {
				after = true
			}
			if after && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
				ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalMessage {
				n++
			}
		}
		if r.id == base {
			after = true
		}
	}
	return n
}

func (p Preview) digest() string {
	p.Digest = ""
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
