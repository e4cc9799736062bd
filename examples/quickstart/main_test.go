package main

import (
	"bytes"
	"context"
	"io"
	"os"
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

// The program as a newcomer runs it: its output alone on stdout, the SDK's
// own logs (quiet at the default -log-level, warn) off it; a log level it
// does not know is refused, saying which it takes.
func TestTheProgramsOutputIsNotBuriedInLogs(t *testing.T) {
	srv, _ := testenv.StartServer(t, testenv.ServerOptions{DataDir: t.TempDir(), Timeout: time.Minute})
	t.Setenv("TEMPORAL_ADDRESS", srv.Address())
	t.Setenv("TEMPORAL_NAMESPACE", srv.Namespace())
	// The process's stdout, as the terminal gets it: what the program
	// prints, and whatever else writes there (the SDK's default logger does).
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	var errs bytes.Buffer
	code := run(nil, w, &errs)
	os.Stdout = stdout
	require.NoError(t, w.Close())
	out := <-read
	require.Zero(t, code, "stderr: %s", errs.String())
	require.Contains(t, out, "completed: ORD-1 is cancelled")
	require.NotContains(t, out, "DEBUG", "the SDK's logs are not on stdout")
	require.NotContains(t, errs.String(), "level=DEBUG")
	require.NotContains(t, errs.String(), "level=INFO")

	var none bytes.Buffer
	errs.Reset()
	require.Equal(t, 2, run([]string{"-log-level", "loud"}, &none, &errs))
	require.Contains(t, errs.String(), `-log-level "loud": want debug, info, warn or error`)
}
