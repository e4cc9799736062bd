package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// newAlice makes alice's key pair in a temporary directory and returns her
// key file and public key (its policy form).
func newAlice(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _, err := runKeys(t, "new", "alice", "--dir", dir)
	require.NoError(t, err)
	m := regexp.MustCompile(`key: "(ed25519:[A-Za-z0-9_-]+)"`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return filepath.Join(dir, "alice.key"), m[1]
}

// signStart runs `toolgate nexus sign-start ARGS...` and decodes what it
// printed as a run would: strictly, and its token checked against pub.
func signStart(t *testing.T, pub string, args ...string) (string, workflows.RunInput, signed.Claims) {
	t.Helper()
	out, errOut, err := runCLI(append([]string{"nexus", "sign-start"}, args...)...)
	require.NoError(t, err, errOut)
	require.True(t, strings.HasSuffix(out, "\n") && strings.Count(out, "\n") == 1, "want one line of JSON, got %q", out)
	line := strings.TrimSuffix(out, "\n")
	in, err := workflows.ParseRunInput([]byte(line))
	require.NoError(t, err, "the output is a RunInput: %s", line)
	key, err := signed.ParsePublicKey(pub)
	require.NoError(t, err)
	c, err := signed.Verify(in.RequestToken, key)
	require.NoError(t, err, "the token is signed with alice's key")
	require.NoError(t, c.CheckTime(time.Now(), 0))
	digest, err := workflows.InputDigest([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, digest, c.InputDigest, "the token signs exactly the input printed")
	assert.Equal(t, workflows.GoalDigest(in.Goal), c.GoalDigest)
	assert.Equal(t, signed.ActionStart, c.Action)
	assert.Equal(t, "alice", c.Approver)
	return line, in, c
}

// sign-start prints a session run's input (planner external) signed by the
// approver for the workflow id nexus-NAME; with --plan, the file's input,
// signed the same way; --valid-for sets the token's lifetime.
func TestNexusSignStart(t *testing.T) {
	key, pub := newAlice(t)

	_, in, c := signStart(t, pub, "--run", "desk-1", "--as", "alice", "--key", key)
	assert.Equal(t, nexusserve.RunID("desk-1"), c.WorkflowID)
	assert.Equal(t, "nexus-desk-1", c.WorkflowID)
	assert.Equal(t, plan.KindExternal, in.Planner.Kind)
	assert.Equal(t, "Nexus session desk-1", in.Goal)
	assert.Equal(t, workflows.Duration(nexusserve.DefaultIdleTimeout), in.IdleTimeout)
	assert.Equal(t, int64(10*60), c.Expiry-c.IssuedAt, "valid for 10 minutes by default")

	_, in, c = signStart(t, pub, "--run", "desk.2", "--as", "alice", "--key", key, "--goal", "triage the desk", "--idle-timeout", "15m", "--valid-for", "1h")
	assert.Equal(t, "nexus-desk.2", c.WorkflowID)
	assert.Equal(t, "triage the desk", in.Goal)
	assert.Equal(t, workflows.Duration(15*time.Minute), in.IdleTimeout)
	assert.Equal(t, int64(3600), c.Expiry-c.IssuedAt)

	planFile := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(planFile, []byte(`{"goal":"search","planner":{"kind":"scripted","answer":"found it",
		"turns":[[{"tool":"search_tickets","args":{"query":"login"}}]]},"approval":"deny"}`), 0o600))
	line, in, c := signStart(t, pub, "--plan", planFile, "--run", "plan-1", "--as", "alice", "--key", key, "--valid-for", "90s")
	assert.Equal(t, "nexus-plan-1", c.WorkflowID)
	assert.Equal(t, plan.KindScripted, in.Planner.Kind)
	assert.Equal(t, "deny", in.Approval)
	assert.Equal(t, int64(90), c.Expiry-c.IssuedAt)
	// What the run operation takes: {"id": NAME, "input": the line}.
	var req nexusserve.RunRequest
	require.NoError(t, json.Unmarshal([]byte(`{"id":"plan-1","input":`+line+`}`), &req))
	assert.Equal(t, in.RequestToken, req.Input.RequestToken)
}

// sign-start refuses what would make no token a run takes, before reading
// the key, and prints nothing on stdout.
func TestNexusSignStartRefuses(t *testing.T) {
	key, _ := newAlice(t)
	dir := t.TempDir()
	fork := filepath.Join(dir, "fork.json")
	require.NoError(t, os.WriteFile(fork, []byte(`{"fork":{"source":"ticket-42","at":"c-3"}}`), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"goal":"x","planner":{"kind":"external"},"idle":"1h"}`), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--as", "alice", "--key", key}, "needs --run NAME, --as APPROVER and --key FILE"},
		{[]string{"--run", "desk-1", "--key", key}, "needs --run NAME, --as APPROVER and --key FILE"},
		{[]string{"--run", "desk-1", "--as", "alice"}, "needs --run NAME, --as APPROVER and --key FILE"},
		{[]string{"--run", "../x", "--as", "alice", "--key", key}, `--run: run name "../x": want 1 to 64 letters`},
		{[]string{"--run", strings.Repeat("a", 65), "--as", "alice", "--key", key}, "want 1 to 64 letters"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--valid-for", "2h"}, "--valid-for 2h0m0s: want more than 0 and at most 1h0m0s"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--valid-for", "0s"}, "--valid-for 0s: want more than 0"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--idle-timeout", "0s"}, "--idle-timeout 0s: want a positive duration"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--plan", bad, "--goal", "g"}, "--plan FILE is the whole input"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--plan", bad, "--idle-timeout", "1h"}, "--plan FILE is the whole input"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--plan", bad}, `unknown field "idle"`},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--plan", fork}, "planner.kind is empty"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", filepath.Join(dir, "nope.key")}, "nope.key"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "desk-2"}, "takes no arguments"},
		{[]string{"--run", "desk-1", "--as", "alice", "--key", key, "--goal", strings.Repeat("g", workflows.MaxGoalBytes+1)}, "goal is"},
	} {
		out, _, err := runCLI(append([]string{"nexus", "sign-start"}, c.args...)...)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.want, "%v", c.args)
		}
		assert.Empty(t, out, "%v printed on stdout", c.args)
	}
}

// `toolgate nexus` and `nexus endpoint create` refuse what they cannot do
// before connecting anywhere.
func TestNexusCommandsRefuse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nexus"}, "usage: toolgate nexus endpoint create NAME"},
		{[]string{"nexus", "endpoint"}, "usage: toolgate nexus endpoint create NAME"},
		{[]string{"nexus", "endpoint", "delete", "x"}, "usage: toolgate nexus endpoint create NAME"},
		{[]string{"nexus", "bogus"}, `unknown nexus command "bogus"`},
		{[]string{"nexus", "endpoint", "create"}, "usage: toolgate nexus endpoint create NAME"},
		{[]string{"nexus", "endpoint", "create", "a", "b"}, "usage: toolgate nexus endpoint create NAME"},
		{[]string{"nexus", "endpoint", "create", "tool_gate"}, `endpoint name: nexus endpoint name "tool_gate": want a letter`},
		{[]string{"nexus", "endpoint", "create", "toolgate-"}, "ending with a letter or digit"},
		{[]string{"nexus", "endpoint", "create", "toolgate", "--task-queue", ""}, "--task-queue is empty"},
		{[]string{"nexus", "endpoint", "create", "toolgate", "--bogus"}, "toolgate help nexus endpoint create"},
	} {
		_, _, err := runCLI(c.args...)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.want, "%v", c.args)
		}
	}
	out, _, err := runCLI("nexus", "endpoint", "--help")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "toolgate nexus endpoint create: "), out)
	out, _, err = runCLI("help", "nexus")
	require.NoError(t, err)
	assert.Contains(t, out, "nexus endpoint create route a Nexus endpoint to")
	assert.Contains(t, out, "nexus sign-start")
}

// dev refuses a bad --nexus-endpoint, naming the flag, before it starts a
// server; worker refuses its --nexus flags misused before it connects.
func TestNexusServeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--data", t.TempDir(), "--nexus-endpoint", "tool_gate"}, `--nexus-endpoint: nexus endpoint name "tool_gate": want a letter`},
		{[]string{"dev", "--data", t.TempDir(), "--nexus-endpoint", "-x"}, `--nexus-endpoint: nexus endpoint name "-x"`},
		{[]string{"dev", "--data", t.TempDir(), "--nexus-endpoint", "toolgate", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--nexus-endpoint does not go with --tls-cert"},
		{[]string{"worker", "--data", t.TempDir(), "--nexus-task-queue", "q"}, "--nexus-task-queue goes with --nexus"},
		{[]string{"worker", "--data", t.TempDir(), "--nexus", "--nexus-task-queue", ""}, "--nexus-task-queue is empty"},
		{[]string{"worker", "--data", t.TempDir(), "--nexus", "--nexus-task-queue", workflows.TaskQueue}, "is the runs' task queue"},
		{[]string{"worker", "--data", t.TempDir(), "--nexus", "--task-queue", "q", "--nexus-task-queue", "q"}, "is the runs' task queue"},
	} {
		start := time.Now()
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.want, "%v", c.args)
		}
		assert.Empty(t, stdout.String(), "%v", c.args)
		assert.Less(t, time.Since(start), 5*time.Second, "%v: refused before starting anything", c.args)
	}
}
