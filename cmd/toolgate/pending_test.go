package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

func waitingOn(run, callID, toolName string) tgclient.PendingCall {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return tgclient.PendingCall{RunID: run, Interrupt: workflows.Interrupt{
		CallID: callID, Tool: toolName, CallArgs: json.RawMessage(`{}`), ArgsDigest: "d-" + callID,
		Kind: workflows.KindGate, RequestedAt: at, ExpiresAt: at.Add(time.Hour)}}
}

// A run whose state query failed does not hide the others: `pending` lists
// them, names the failed run, and exits 0; --json keeps its array on stdout
// and puts the failed runs on stderr.
func TestPendingNamesTheRunsItCouldNotAsk(t *testing.T) {
	res := tgclient.PendingPage{
		Calls:  []tgclient.PendingCall{waitingOn("run-a", "c-3", "close_ticket"), waitingOn("run-c", "c-1", "refund")},
		Failed: []tgclient.RunFailure{{RunID: "run-wedged", Error: "[TMPRL1103] Complete result exceeds size limit"}},
	}
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	require.NoError(t, c.printPending(res, nil, false))
	assert.Contains(t, stdout.String(), "run-a")
	assert.Contains(t, stdout.String(), "run-c")
	assert.NotContains(t, stdout.String(), "run-wedged")
	assert.Equal(t, "run run-wedged not listed: its state query failed: [TMPRL1103] Complete result exceeds size limit\n", stderr.String())

	stdout.Reset()
	stderr.Reset()
	require.NoError(t, c.printPending(res, nil, true))
	var items []struct {
		Run        string `json:"run"`
		CallID     string `json:"call_id"`
		Tool       string `json:"tool"`
		ArgsDigest string `json:"args_digest"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &items), "stdout is the array it always was: %s", stdout.String())
	require.Len(t, items, 2)
	assert.Equal(t, "run-a", items[0].Run)
	assert.Equal(t, "d-c-3", items[0].ArgsDigest)
	assert.Equal(t, "refund", items[1].Tool)
	var failed struct {
		Failed []tgclient.RunFailure `json:"failed"`
	}
	require.NoError(t, json.Unmarshal(stderr.Bytes(), &failed), stderr.String())
	assert.Equal(t, res.Failed, failed.Failed)
}

// When nothing could be asked, pending fails, prints no table that could
// read as "nothing is waiting", and still names each run.
func TestPendingFailsWhenNothingCouldBeAsked(t *testing.T) {
	res := tgclient.PendingPage{Failed: []tgclient.RunFailure{{RunID: "run-a", Error: "x"}, {RunID: "run-b", Error: "y"}}}
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	require.Error(t, c.printPending(res, errors.New("none of the 2 runs found could be queried"), false))
	assert.Empty(t, stdout.String())
	assert.Equal(t, 2, strings.Count(stderr.String(), "not listed"), stderr.String())

	stdout.Reset()
	require.NoError(t, c.printPending(tgclient.PendingPage{Calls: []tgclient.PendingCall{}}, nil, true))
	assert.Equal(t, "[]\n", stdout.String())
}
