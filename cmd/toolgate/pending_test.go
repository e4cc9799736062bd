package main

import (
	"bytes"
	"encoding/base64"
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
	require.NoError(t, c.printPending(res, nil, false, ""))
	assert.Contains(t, stdout.String(), "run-a")
	assert.Contains(t, stdout.String(), "run-c")
	assert.NotContains(t, stdout.String(), "run-wedged")
	assert.Equal(t, "run run-wedged not listed: its state query failed: [TMPRL1103] Complete result exceeds size limit\n", stderr.String())

	stdout.Reset()
	stderr.Reset()
	require.NoError(t, c.printPending(res, nil, true, ""))
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
	require.Error(t, c.printPending(res, errors.New("none of the 2 runs found could be queried"), false, ""))
	assert.Empty(t, stdout.String())
	assert.Equal(t, 2, strings.Count(stderr.String(), "not listed"), stderr.String())

	stdout.Reset()
	require.NoError(t, c.printPending(tgclient.PendingPage{Calls: []tgclient.PendingCall{}}, nil, true, ""))
	assert.Equal(t, "[]\n", stdout.String())
}

// When more runs wait than a page holds, pending says how to list the next
// page: the same command with --page TOKEN (stdout), and with --json the
// token as one line {"next_page":…} on stderr, stdout staying the array.
func TestPendingSaysHowToGetTheNextPage(t *testing.T) {
	next := []byte(`{"LastStartTime":"2026-01-02T03:04:05Z","LastRunID":"r-1"}`)
	args := []string{"--address", "10.0.0.1:7233", "--page-size", "2", "--page", "OLD", "--task-queue", "desk eu"}
	again := pendingAgain(args, next)
	tok := base64.RawURLEncoding.EncodeToString(next)
	assert.Equal(t, "toolgate pending --address 10.0.0.1:7233 --page-size 2 --task-queue 'desk eu' --page "+tok, again)
	assert.Empty(t, pendingAgain(args, nil), "the last page")

	res := tgclient.PendingPage{Calls: []tgclient.PendingCall{waitingOn("run-a", "c-3", "close_ticket")}, NextPageToken: next}
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	require.NoError(t, c.printPending(res, nil, false, again))
	assert.Contains(t, stdout.String(), "run-a")
	assert.Contains(t, stdout.String(), "more runs wait: the next page is\n  "+again+"\n")

	stdout.Reset()
	require.NoError(t, c.printPending(res, nil, true, again))
	var items []tgclient.PendingCall
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &items), "stdout stays the array of this page's calls: %s", stdout.String())
	assert.Len(t, items, 1)
	var line struct {
		NextPage string `json:"next_page"`
	}
	require.NoError(t, json.Unmarshal(stderr.Bytes(), &line), stderr.String())
	assert.Equal(t, tok, line.NextPage)
}
