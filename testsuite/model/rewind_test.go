package model

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/activities/desk"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// A run rewound to before its refund, where the model now proposes a
// different refund under the same call id (c-1): that refund pays once, under
// a key of its own, and the old payment is not returned as its result.
func TestRewoundCallWithOtherArgumentsIsAnotherCall(t *testing.T) {
	var asked atomic.Int32
	f := newFake(t, func(r ChatRequest) (Reply, error) {
		if len(r.ToolMessages()) > 0 {
			return Reply{Text: "refunded"}, nil
		}
		amount := 500
		if asked.Add(1) > 1 { // asked again after the rewind: another refund
			amount = 700
		}
		return Reply{Calls: []Call{{Name: "refund", Arguments: fmt.Sprintf(`{"booking_id":"BK-1","amount_cents":%d,"reason":"duplicate charge"}`, amount)}}}, nil
	})
	e := startEnv(t, f)
	ctx := testContext(t)
	tg := tgclient.New(e.Client)
	const id = "model-rewind"
	_, err := tg.Start(ctx, id, workflows.RunInput{Goal: "refund BK-1", Planner: plan.Config{Kind: plan.KindOpenAI, Model: ModelName}})
	require.NoError(t, err)
	approve := func(amount string) {
		t.Helper()
		require.Eventually(t, func() bool {
			st, err := tg.State(ctx, id)
			return err == nil && len(st.Interrupts) == 1 && json.Valid(st.Interrupts[0].CallArgs) &&
				string(st.Interrupts[0].CallArgs) == `{"amount_cents":`+amount+`,"booking_id":"BK-1","reason":"duplicate charge"}`
		}, 30*time.Second, 50*time.Millisecond, "c-1 waiting for a refund of %s", amount)
		outs, err := tg.Approve(ctx, id, tgclient.As("alice"), "c-1")
		require.NoError(t, err)
		require.Zero(t, tgclient.Refused(outs), "%+v", outs)
	}
	result := func() workflows.RunResult {
		t.Helper()
		res, err := tg.Result(ctx, id)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCompleted, res.Status, "%+v", res)
		return res
	}
	paid := func(res workflows.RunResult) desk.RefundResult {
		t.Helper()
		var out desk.RefundResult
		for _, rec := range res.Trace {
			if rec.CallID == "c-1" && rec.Status == workflows.TraceOK {
				require.NoError(t, json.Unmarshal(rec.Result, &out))
			}
		}
		return out
	}
	approve("500")
	first := paid(result())
	require.Equal(t, int64(500), first.AmountCents)

	p, err := tg.RewindPreview(ctx, id, "c-1")
	require.NoError(t, err)
	require.Len(t, p.Kept, 1, "the preview names the refund that stays paid")
	_, err = tg.Rewind(ctx, id, "c-1", p.Digest, tgclient.Operator{Name: "olga"})
	require.NoError(t, err)
	approve("700")
	second := paid(result())
	require.Equal(t, int64(700), second.AmountCents, "c-1 after the rewind is the new refund")
	require.NotEqual(t, first.PaymentID, second.PaymentID, "the old payment is not returned as the new call's result")
	require.False(t, second.Duplicate)

	pays, err := e.Desk.Payments(ctx, "BK-1")
	require.NoError(t, err)
	require.Len(t, pays, 2, "one payment per refund: %+v", pays)
	require.NotEqual(t, pays[0].IdempotencyKey, pays[1].IdempotencyKey)
}
