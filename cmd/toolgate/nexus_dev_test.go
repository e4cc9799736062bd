package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/workflows"
)

// nexusCLIEndpoint is the endpoint TestDevServesNexus has dev create.
const nexusCLIEndpoint = "toolgate"

// nexusCLICaller is another team's workflow: it calls toolgate's call
// operation through endpoint with each input, as given, in turn.
func nexusCLICaller(ctx workflow.Context, endpoint string, ins []json.RawMessage) ([]nexusserve.CallOutput, error) {
	c := workflow.NewNexusClient(endpoint, nexusserve.ServiceName)
	var outs []nexusserve.CallOutput
	for _, in := range ins {
		var out nexusserve.CallOutput
		if err := c.ExecuteOperation(ctx, nexusserve.OperationCall, in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: 30 * time.Second}).Get(ctx, &out); err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// nexusCLIRunner calls toolgate's run operation with req, as given.
func nexusCLIRunner(ctx workflow.Context, req json.RawMessage) (workflows.RunResult, error) {
	c := workflow.NewNexusClient(nexusCLIEndpoint, nexusserve.ServiceName)
	var res workflows.RunResult
	err := c.ExecuteOperation(ctx, nexusserve.OperationRun, req, workflow.NexusOperationOptions{ScheduleToCloseTimeout: 30 * time.Second}).Get(ctx, &res)
	return res, err
}

// `toolgate dev --policy FILE --nexus-endpoint toolgate` serves toolgate as
// a Nexus service: it prints the endpoint's line before "ready", a caller's
// workflow on the server calls through it, a call without a start is refused
// (the policy wants a signed one), and the start `nexus sign-start` prints
// starts the session run as requested by its signer; the run operation takes
// a --plan signed the same way. `nexus endpoint create` finds the endpoint
// there, and refuses to move it.
func TestDevServesNexus(t *testing.T) {
	key, pub := newAlice(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte("approvers:\n  alice: {key: \""+pub+"\", roles: [support]}\n"), 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	address, out := startDev(t, ctx, "--policy", policyFile,
		"--nexus-endpoint", nexusCLIEndpoint)
	assert.Contains(t, "\n"+out, "\nNexus endpoint toolgate -> namespace default, task queue toolgate-nexus (service toolgate: call, run)\nready ")
	assert.NotContains(t, out, "HTTP API", "the HTTP port serves Nexus alone")

	// The caller's workflows have a worker of their own here: the dev
	// server's worker token.
	token := devWorkerToken(t, out)
	tc, _, err := connect.Dial(ctx, connect.Settings{Address: address, TokenFile: token, Isolated: true}, func(o *client.Options) {
		o.Logger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	})
	require.NoError(t, err)
	defer tc.Close()
	const callerQueue = "cli-nexus-caller"
	w := sdkworker.New(tc, callerQueue, sdkworker.Options{})
	w.RegisterWorkflow(nexusCLICaller)
	w.RegisterWorkflow(nexusCLIRunner)
	require.NoError(t, w.Start())
	defer w.Stop()
	execute := func(id string, wf any, res any, args ...any) error {
		r, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: callerQueue}, wf, args...)
		require.NoError(t, err)
		return r.Get(ctx, res)
	}
	search := func(run, start string) json.RawMessage {
		in := `{"run":"` + run + `","tool":"search_tickets","args":{"query":"login"}`
		if start != "" {
			in += `,"start":` + start
		}
		return json.RawMessage(in + "}")
	}

	// No start: the policy wants a signed one, and the operation says how.
	err = execute("caller-unsigned", nexusCLICaller, nil, nexusCLIEndpoint, []json.RawMessage{search("cli-1", "")})
	require.Error(t, err)
	assert.True(t, errorSays(err, "toolgate nexus sign-start --run cli-1"), "%v", err)

	// The start sign-start prints starts the run, as requested by alice.
	start, _, _ := signStart(t, pub, "--run", "cli-1", "--as", "alice", "--key", key)
	var outs []nexusserve.CallOutput
	require.NoError(t, execute("caller-signed", nexusCLICaller, &outs, nexusCLIEndpoint, []json.RawMessage{search("cli-1", start), search("cli-1", start)}))
	require.Len(t, outs, 2)
	assert.Equal(t, []string{workflows.TraceOK, workflows.TraceCacheHit}, []string{outs[0].Status, outs[1].Status})
	assert.Equal(t, "nexus-cli-1", outs[0].Run)
	st, err := tgclient.New(tc).State(ctx, nexusserve.RunID("cli-1"))
	require.NoError(t, err)
	assert.Equal(t, "alice", st.RequestedBy)

	// The run operation, its input signed from a --plan file.
	planFile := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(planFile, []byte(`{"goal":"search","planner":{"kind":"scripted","answer":"found it",
		"turns":[[{"tool":"search_tickets","args":{"query":"login"}}]]}}`), 0o600))
	input, _, _ := signStart(t, pub, "--run", "plan-1", "--plan", planFile, "--as", "alice", "--key", key)
	var res workflows.RunResult
	require.NoError(t, execute("runner-signed", nexusCLIRunner, &res, json.RawMessage(`{"id":"plan-1","input":`+input+`}`)))
	assert.Equal(t, workflows.StatusCompleted, res.Status, "%+v", res)
	assert.Equal(t, "found it", res.Answer)

	// nexus endpoint create, against the dev server.
	// An operator's API: it needs the worker's role (--token-file).
	_, _, err = runCLI("nexus", "endpoint", "create", "toolgate-3", "--address", address, "--task-queue", "toolgate-nexus-3")
	require.Error(t, err, "a person creates a Nexus endpoint")
	assert.Contains(t, err.Error(), "NexusEndpoints is a worker's API")
	got, errOut, err := runCLI("nexus", "endpoint", "create", nexusCLIEndpoint, "--address", address, "--token-file", token)
	require.NoError(t, err, errOut)
	assert.Equal(t, "Nexus endpoint toolgate -> namespace default, task queue toolgate-nexus (service toolgate: call, run): already there, unchanged\n", got)
	assert.Contains(t, errOut, "toolgate worker --nexus --namespace default --nexus-task-queue toolgate-nexus")
	_, _, err = runCLI("nexus", "endpoint", "create", nexusCLIEndpoint, "--address", address, "--token-file", token, "--task-queue", "elsewhere")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exists and routes to namespace default, task queue toolgate-nexus; it was left as it is")
	got, _, err = runCLI("nexus", "endpoint", "create", "toolgate-2", "--address", address, "--token-file", token, "--task-queue", "toolgate-nexus-2")
	require.NoError(t, err)
	assert.Equal(t, "Nexus endpoint toolgate-2 -> namespace default, task queue toolgate-nexus-2 (service toolgate: call, run): created\n", got)

	// toolgate worker --nexus hosts the service the new endpoint routes to.
	workerCtx, stopWorker := context.WithCancel(ctx)
	wr, ww := io.Pipe()
	workerDone := make(chan error, 1)
	go func() {
		err := run(workerCtx, []string{"worker", "--address", address, "--token-file", token, "--data", t.TempDir(), "--policy", policyFile,
			"--nexus", "--nexus-task-queue", "toolgate-nexus-2"}, strings.NewReader(""), ww, io.Discard)
		ww.CloseWithError(io.EOF)
		workerDone <- err
	}()
	defer func() {
		stopWorker()
		select {
		case err := <-workerDone:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	}()
	lines := bufio.NewScanner(wr)
	out = ""
	for !strings.HasPrefix(out, "worker ready") && lines.Scan() {
		out = lines.Text()
		if strings.HasPrefix(out, "Nexus service") {
			assert.Equal(t, "Nexus service toolgate (call, run) on task queue toolgate-nexus-2, for the runs of task queue toolgate", out)
		}
	}
	require.True(t, strings.HasPrefix(out, "worker ready"), "worker: %s", out)
	go func() { _, _ = io.Copy(io.Discard, wr) }()
	start, _, _ = signStart(t, pub, "--run", "cli-2", "--as", "alice", "--key", key)
	outs = nil
	require.NoError(t, execute("caller-worker", nexusCLICaller, &outs, "toolgate-2", []json.RawMessage{search("cli-2", start)}))
	require.Len(t, outs, 1)
	assert.Equal(t, workflows.TraceOK, outs[0].Status)
	assert.Equal(t, "nexus-cli-2", outs[0].Run)
}

// errorSays reports whether err's text, or that of an error it wraps, holds want.
func errorSays(err error, want string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), want) {
			return true
		}
	}
	return false
}
