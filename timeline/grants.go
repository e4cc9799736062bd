package timeline

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

// Acts on a grant a rewind may drop (GrantAct.Act).
const (
	ActGranted = "granted"
	ActRevoked = "revoked"
)

// GrantAct is a grant made, or revoked, by a grant or revoke update the run
// took: the trace's grant record, as the update's result states it.
type GrantAct struct {
	// Act is ActGranted or ActRevoked.
	Act string `json:"act"`
	// Grant is the grant as the update left it: for a revoke, RevokedBy
	// names who revoked it.
	Grant workflows.Grant `json:"grant"`
}

// String says what the act did, in one line: "g-1 refund granted by bob
// (when args.amount_cents < 10000, 2 uses)", "g-1 refund revoked by carol
// (granted by bob)".
func (a GrantAct) String() string {
	g := a.Grant
	if a.Act == ActRevoked {
		return fmt.Sprintf("%s %s revoked by %s (granted by %s)", g.ID, g.Tool, g.RevokedBy, g.By)
	}
	var terms []string
	if g.When != "" {
		terms = append(terms, "when "+g.When)
	}
	switch {
	case g.Uses == 1:
		terms = append(terms, "1 use")
	case g.Uses > 1:
		terms = append(terms, fmt.Sprintf("%d uses", g.Uses))
	}
	if !g.Until.IsZero() {
		terms = append(terms, "until "+g.Until.UTC().Format(time.RFC3339))
	}
	s := fmt.Sprintf("%s %s granted by %s", g.ID, g.Tool, g.By)
	if len(terms) > 0 {
		s += " (" + strings.Join(terms, ", ") + ")"
	}
	return s
}

// grantsAfter are the grants and revokes the chain took after the point
// (event of run base, and every run after it), in order: a rewind to the
// point drops them, since it re-applies no update. A grant or revoke update
// the run refused is none (it left no grant record). dc decodes the
// updates' results.
func grantsAfter(runs []chainRun, base string, event int64, dc converter.DataConverter) ([]GrantAct, error) {
	out := []GrantAct{}
	after := false
	for _, r := range runs {
		dropped := map[int64]string{} // accepted after the point: event id → update name
		for _, ev := range r.events {
			if r.id == base && ev.GetEventId() >= event {
				after = true
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				// The handler applies a grant as the update is accepted.
				if name := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName(); after {
					dropped[ev.GetEventId()] = name
				}
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
				a := ev.GetWorkflowExecutionUpdateCompletedEventAttributes()
				name := dropped[a.GetAcceptedEventId()]
				if (name != workflows.UpdateGrant && name != workflows.UpdateRevoke) || a.GetOutcome().GetSuccess() == nil {
					continue
				}
				var res workflows.GrantResult
				if err := dc.FromPayloads(a.GetOutcome().GetSuccess(), &res); err != nil {
					return nil, fmt.Errorf("run %s, event %d: reading the %s update's result: %w", r.id, ev.GetEventId(), name, err)
				}
				act := ActGranted
				if name == workflows.UpdateRevoke {
					act = ActRevoked
				}
				out = append(out, GrantAct{Act: act, Grant: res.Grant})
			}
		}
		if r.id == base {
			after = true
		}
	}
	return out, nil
}
