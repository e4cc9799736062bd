package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Two signings of the same decision — two `toolgate approve` of one call in
// the same second — are two tokens, each with its own random id: a run takes
// a token once, and took the second for the first.
func TestTheSameDecisionSignedTwiceIsTwoTokens(t *testing.T) {
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	who := Decider{Approver: "alice", Key: priv}
	it := workflows.Interrupt{CallID: "c-3", Tool: "close_ticket", ArgsDigest: "d", RequestedAt: time.Unix(1700000000, 0)}
	in := workflows.DecisionInput{CallID: "c-3", Approver: "alice", ArgsDigest: "d"}
	var toks []string
	var ids []string
	for range 2 {
		tok, err := signDecision("ticket-42", signed.ActionApprove, who, it, in)
		require.NoError(t, err)
		c, err := signed.Verify(tok, pub)
		require.NoError(t, err)
		toks, ids = append(toks, tok), append(ids, c.ID)
	}
	assert.NotEqual(t, toks[0], toks[1], "two signings, one token")
	assert.Len(t, ids[0], 32)
	assert.NotEqual(t, ids[0], ids[1])

	g1, g2 := claims("alice", "ticket-42", signed.ActionGrant, 0), claims("alice", "ticket-42", signed.ActionGrant, 0)
	assert.NotEqual(t, g1.ID, g2.ID, "grants, revocations, starts and rewinds get their own ids too")
}
