package audit_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/audit"
)

// guardEntries are the report's entries of the fleet ledger, as
// "call result" (the result cut at its first colon).
func guardEntries(rep audit.Report) (out []string, problems []string) {
	for _, e := range rep.Entries {
		if e.Kind != audit.KindGuard {
			continue
		}
		res, _, _ := strings.Cut(e.Result, ":")
		out = append(out, e.CallID+" "+res)
		if !e.Verified {
			problems = append(problems, e.Problem)
		}
	}
	return out, problems
}

// A run under guards: the audit lists each answer of the fleet ledger the
// history holds — reservations at the gate and at the decision, commits,
// the guard's refusal and the pause's.
func TestGuardEntries(t *testing.T) {
	rep := fixture(t, "guarded_v10.json", nil)
	got, problems := guardEntries(rep)
	assert.Empty(t, problems)
	assert.Equal(t, []string{
		"c-1 reserved at gate", "c-1 committed",
		"c-2 reserved at gate", "c-2 reserved at decided", "c-2 committed",
		"c-3 reserved at gate", "c-3 committed",
		"c-4 denied", "c-5 paused",
	}, got)
	for _, e := range rep.Entries {
		if e.Kind == audit.KindGuard && e.CallID == "c-4" {
			assert.Equal(t, "guard:refund-budget", e.Rule)
		}
	}
}

// A refusal the trace names with no answer of the ledger behind it (the
// ledger's marker taken out of the history) is a problem the audit names.
func TestGuardRefusalWithoutTheLedgersAnswer(t *testing.T) {
	file := edit(t, "guarded_v10.json", func(h *historypb.History) {
		var kept []*historypb.HistoryEvent
		for _, ev := range h.Events {
			m := ev.GetMarkerRecordedEventAttributes()
			if r := m.GetDetails()["result"]; r != nil && len(r.GetPayloads()) > 0 && bytes.Contains(r.GetPayloads()[0].GetData(), []byte(`"call":"c-4"`)) {
				continue
			}
			kept = append(kept, ev)
		}
		require.Len(t, kept, len(h.Events)-1)
		h.Events = kept
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	_, problems := guardEntries(rep)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "the trace says the fleet ledger refused c-4 refund, but the history holds no answer of the ledger that refuses it")
}
