package audit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// A decision by link (rules version 9) verifies only with the secret of a
// link one of the run's deliveries reported sending for that wait: the
// fixture's does; with the deliveries' links taken out of the history, the
// same signed decision fails, saying why.
func TestDecisionByLinkNeedsALinkTheRunSent(t *testing.T) {
	rep := fixture(t, "notified_v9.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 9, rep.Version)
	assert.Equal(t, "slack", rep.Entries[0].Channel)

	file := edit(t, "notified_v9.json", func(h *historypb.History) {
		n := 0
		for _, ev := range h.Events {
			c := ev.GetActivityTaskCompletedEventAttributes()
			if c == nil || len(c.GetResult().GetPayloads()) == 0 {
				continue
			}
			p := c.GetResult().GetPayloads()[0]
			var d map[string]any
			if json.Unmarshal(p.Data, &d) != nil || d["links"] == nil {
				continue
			}
			delete(d, "links")
			p.Data, _ = json.Marshal(d)
			n++
		}
		require.NotZero(t, n, "the fixture's deliveries report links")
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	require.Len(t, rep.Failed(), 1)
	assert.Contains(t, rep.Failed()[0].Problem, "a decision by link (via slack) whose link no delivery of this run sent for call c-2's wait")
}

// A rewind note (rules version 9) covers the one reset it names: the
// fixture's reset names it; a reset whose reason does not fails the note,
// and the reset is unattributed.
func TestRewindNoteNamesItsReset(t *testing.T) {
	rep := fixture(t, "rewound_v9.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 9, rep.Version)

	file := edit(t, "rewound_v9.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
				f.Failure.Message = strings.Split(f.Failure.Message, ", reset ")[0] + ", reset 00000000000000000000000000000000"
			}
		}
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	rw := entryOf(t, rep, audit.KindRewind)
	assert.False(t, rw.Verified)
	assert.Contains(t, rw.Problem, "is not the one the note names")
	assert.ElementsMatch(t, []string{audit.KindRewind, audit.KindReset}, failedKinds(rep))

	file = edit(t, "rewound_v9.json", func(h *historypb.History) {
		editRewindNote(t, h, func(n *workflows.RewindNote) { n.Reset = strings.Repeat("1", 32) })
	})
	rep, err = audit.File(file, nil)
	require.NoError(t, err)
	assert.Contains(t, entryOf(t, rep, audit.KindRewind).Problem, "the note names reset \"11111111111111111111111111111111\"")
}

// A fork (rules version 9) keeps its source's requester — the fork
// activity's result holds it — and its forker (dave) decides nothing: an
// approval of his would not count. The fixture's fork, by dave, of an
// unsigned source, approved by alice, verifies.
func TestForkedFixtureV9(t *testing.T) {
	rep := fixture(t, "forked_v9.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 9, rep.Version)
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Matched, rep.Executions[0].Problem)

	// The same fork with the close approved by dave, who forked it (his key
	// replaced by one the test holds, and both his tokens signed with it).
	file := edit(t, "forked_v9.json", func(h *historypb.History) {
		pub, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		editConfig(t, h, func(c *workflows.WorkerConfig) {
			c.Policy.Approvers["dave"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: []string{"support", "ops"}}
		})
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) {
			c := must(signed.Peek(in.Token))
			c.Approver, in.Approver = "dave", ""
			in.Token = must(signed.Sign(priv, c))
		})
		editInput(t, h, func(in map[string]any) {
			in["request_token"] = must(signed.Sign(priv, must(signed.Peek(in["request_token"].(string)))))
		})
	})
	rep = auditFile(t, file, nil)
	assert.Empty(t, rep.Failed(), "every token verifies")
	x := onlyMismatch(t, rep)
	assert.Contains(t, x.Problem, "and has 0", "dave forked the run: his approval does not count")
}
