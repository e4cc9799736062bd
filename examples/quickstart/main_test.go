package main

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// The quickstart, as a newcomer runs it, against the embedded server: the
// run pauses at the gate, the example approves through the client, and the
// run completes with the order cancelled once.
func TestQuickstart(t *testing.T) {
	_, tc := testenv.StartServer(t, testenv.ServerOptions{DataDir: t.TempDir(), Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	orders := &sync.Map{}
	orders.Store("ORD-1", "paid")
	var out bytes.Buffer
	res, err := Run(ctx, tc, orders, &out)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "ORD-1 is cancelled", res.Answer)
	require.Contains(t, out.String(), `c-2 waits for a human: cancel_order {"order_id":"ORD-1"}`)
	require.Contains(t, out.String(), "approved c-2 (cancel_order) by quickstart")
	var statuses []string
	for _, r := range res.Trace {
		statuses = append(statuses, r.CallID+" "+r.Status)
	}
	require.Equal(t, []string{"c-1 ok", "c-2 blocked", "c-2 approved", "c-2 ok"}, statuses)
	status, _ := orders.Load("ORD-1")
	require.Equal(t, "cancelled", status)
}
