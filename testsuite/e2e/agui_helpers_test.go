package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/activities/desk"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// This file drives toolgate's AG-UI door: `toolgate dev --agui-address` and
// `toolgate agui --listen` as subprocesses, and an AG-UI client this project
// did not write — @ag-ui/client's HttpAgent on Node.js
// (testdata/aguiclient.cjs) — against them.

// aguiThreadRun is the workflow id of an AG-UI thread (agui.WorkflowID).
func aguiThreadRun(thread string) string { return "agui-" + thread }

var aguiURLLine = regexp.MustCompile(`AG-UI at (https?://\S+/agui)`)

// aguiDev is `toolgate dev --agui-address` on a fresh data directory (the
// embedded server, its worker with the demo desk, and the AG-UI endpoint and
// example page), with a client of its server in stack.
type aguiDev struct {
	*stack
	p    *proc
	url  string // http://127.0.0.1:PORT/agui
	base string // http://127.0.0.1:PORT
	host string // 127.0.0.1:PORT
}

// startAGUIDev starts `toolgate dev --agui-address` on a free port (flags:
// more of dev's) and waits until it is ready and dials its server.
func startAGUIDev(t *testing.T, flags ...string) *aguiDev {
	t.Helper()
	s := &stack{t: t, dataDir: t.TempDir(), sdkLog: &syncBuffer{}}
	d := &aguiDev{stack: s, host: freeAddr(t)}
	args := append([]string{"dev", "--address", "127.0.0.1:0", "--data", s.dataDir, "--agui-address", d.host}, flags...)
	d.p = startProc(t, "toolgate dev --agui-address", nil, args...)
	ready := regexp.MustCompile(`(?m)^ready (\S+)$`)
	testenv.Eventually(t, startTimeout, "toolgate dev --agui-address ready", func() error {
		if d.p.exited() {
			t.Fatalf("toolgate dev exited: %v\n%s", d.p.waitErr, d.p.out.String())
		}
		out := d.p.out.String()
		m, u := ready.FindStringSubmatch(out), aguiURLLine.FindStringSubmatch(out)
		if m == nil || u == nil {
			return fmt.Errorf("no ready and AG-UI lines yet")
		}
		s.external, d.url = m[1], u[1]
		return nil
	})
	if want := "http://" + d.host + "/agui"; d.url != want {
		t.Fatalf("toolgate dev says AG-UI at %s, want %s", d.url, want)
	}
	d.base = strings.TrimSuffix(d.url, "/agui")
	s.dialExternal()
	return d
}

// dialExternal dials the stack's external server (s.external).
func (s *stack) dialExternal() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.external, Namespace: devserver.DefaultNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(s.sdkLog, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		t.Fatalf("dialing %s: %v", s.external, err)
	}
	t.Cleanup(c.Close)
	s.client, s.tg = c, tgclient.New(c)
}

// aguiServe is one `toolgate agui --listen` process.
type aguiServe struct {
	p      *proc
	url    string
	listen string
}

// startAGUIServe starts `toolgate agui --listen listen` (listen "": a free
// port) on s's server and waits until it serves.
func (s *stack) startAGUIServe(name, listen string, flags ...string) *aguiServe {
	t := s.t
	t.Helper()
	if listen == "" {
		listen = freeAddr(t)
	}
	args := append([]string{"agui", "--listen", listen, "--address", s.address(), "--namespace", devserver.DefaultNamespace}, flags...)
	a := &aguiServe{p: startProc(t, name, nil, args...), listen: listen}
	testenv.Eventually(t, startTimeout, name+" serving AG-UI", func() error {
		if a.p.exited() {
			t.Fatalf("%s exited: %v\n%s", name, a.p.waitErr, a.p.out.String())
		}
		if m := aguiURLLine.FindStringSubmatch(a.p.out.String()); m != nil {
			a.url = m[1]
			return nil
		}
		return errNotYet
	})
	return a
}

// ---------------------------------------------------------------------------
// The Node client (testdata/aguiclient.cjs)

// aguiScript is what aguiclient.cjs runs.
type aguiScript struct {
	URL      string            `json:"url"`
	ThreadID string            `json:"threadId"`
	Messages []json.RawMessage `json:"messages,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Steps    []aguiStepIn      `json:"steps"`
}

// aguiStepIn is one runAgent: a user message and/or a resume. An interrupt
// id "#N" is the N-th interrupt (from 0) of the latest interrupt outcome.
type aguiStepIn struct {
	Message *string      `json:"message,omitempty"`
	Resume  []aguiResume `json:"resume,omitempty"`
}

type aguiResume struct {
	InterruptID string         `json:"interruptId"`
	Status      string         `json:"status"`
	Payload     map[string]any `json:"payload,omitempty"`
}

func say(text string) aguiStepIn { return aguiStepIn{Message: &text} }

func resumeWith(entries ...aguiResume) aguiStepIn { return aguiStepIn{Resume: entries} }

func approveIt(id string) aguiResume {
	return aguiResume{InterruptID: id, Status: "resolved", Payload: map[string]any{"approved": true}}
}

func rejectIt(id, reason string) aguiResume {
	return aguiResume{InterruptID: id, Status: "resolved", Payload: map[string]any{"approved": false, "reason": reason}}
}

func cancelIt(id string) aguiResume { return aguiResume{InterruptID: id, Status: "cancelled"} }

// aguiStep is what aguiclient.cjs prints for one step.
type aguiStep struct {
	Events            []aguiEvent       `json:"events"`
	Outcome           *aguiOutcome      `json:"outcome"`
	Error             string            `json:"error"`
	Messages          []json.RawMessage `json:"messages"`
	PendingInterrupts []aguiInterrupt   `json:"pendingInterrupts"`
}

// aguiEvent holds the fields of the AG-UI events the tests read.
type aguiEvent struct {
	Type            string          `json:"type"`
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ToolCallID      string          `json:"toolCallId"`
	ToolCallName    string          `json:"toolCallName"`
	ParentMessageID string          `json:"parentMessageId"`
	Delta           string          `json:"delta"`
	MessageID       string          `json:"messageId"`
	Content         string          `json:"content"`
	Role            string          `json:"role"`
	Message         string          `json:"message"`
	Code            string          `json:"code"`
	Outcome         *aguiOutcome    `json:"outcome"`
	Snapshot        json.RawMessage `json:"snapshot"`
}

type aguiOutcome struct {
	Type       string          `json:"type"`
	Interrupts []aguiInterrupt `json:"interrupts"`
	Message    string          `json:"message"` // the RUN_ERROR's (type "error")
	Code       string          `json:"code"`
}

type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	ToolCallID     string          `json:"toolCallId"`
	Message        string          `json:"message"`
	ExpiresAt      string          `json:"expiresAt"`
	ResponseSchema json.RawMessage `json:"responseSchema"`
	Metadata       struct {
		ArgsDigest string          `json:"args_digest"`
		Tool       string          `json:"tool"`
		Kind       string          `json:"kind"`
		CallArgs   json.RawMessage `json:"call_args"`
	} `json:"metadata"`
}

// types lists the step's event types in order.
func (s aguiStep) types() []string {
	out := make([]string, len(s.Events))
	for i, e := range s.Events {
		out[i] = e.Type
	}
	return out
}

// of returns the step's events of one type.
func (s aguiStep) of(typ string) []aguiEvent {
	var out []aguiEvent
	for _, e := range s.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// started lists the tool calls the step started: "c-1 search_tickets {…}",
// with the arguments its TOOL_CALL_ARGS carried.
func (s aguiStep) started() []string {
	var out []string
	for _, st := range s.of("TOOL_CALL_START") {
		var args strings.Builder
		for _, a := range s.of("TOOL_CALL_ARGS") {
			if a.ToolCallID == st.ToolCallID {
				args.WriteString(a.Delta)
			}
		}
		out = append(out, st.ToolCallID+" "+st.ToolCallName+" "+args.String())
	}
	return out
}

// results maps the call ids of the step's TOOL_CALL_RESULTs to their content.
func (s aguiStep) results() map[string]string {
	out := map[string]string{}
	for _, r := range s.of("TOOL_CALL_RESULT") {
		out[r.ToolCallID] += r.Content
	}
	return out
}

// text is the step's assistant text (every TEXT_MESSAGE_CONTENT).
func (s aguiStep) text() string {
	var b strings.Builder
	for _, c := range s.of("TEXT_MESSAGE_CONTENT") {
		b.WriteString(c.Delta)
	}
	return b.String()
}

func (s aguiStep) String() string {
	b, _ := json.Marshal(struct {
		Types   []string     `json:"types"`
		Outcome *aguiOutcome `json:"outcome"`
		Error   string       `json:"error,omitempty"`
	}{s.types(), s.Outcome, s.Error})
	return string(b)
}

// needAGUIClient skips the test (or fails it, under TOOLGATE_REQUIRE_AGUI=1)
// before anything starts when @ag-ui/client or node is missing.
func needAGUIClient(t *testing.T) {
	t.Helper()
	testenv.AGUIClient(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
}

// runAGUINode runs aguiclient.cjs with script and returns its steps. A step
// the client could not verify is reported in its Error, which the caller
// checks (mustPass).
func runAGUINode(t *testing.T, sc aguiScript) []aguiStep {
	t.Helper()
	dir := testenv.AGUIClient(t)
	script, err := filepath.Abs(filepath.Join("testdata", "aguiclient.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = childEnv(testenv.AGUIClientEnv + "=" + dir)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var steps []aguiStep
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if line == "" {
			continue
		}
		var st aguiStep
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("aguiclient.cjs printed %q: %v (exit: %v)\nstderr:\n%s", line, err, runErr, stderr.String())
		}
		steps = append(steps, st)
	}
	if len(steps) != len(sc.Steps) {
		t.Fatalf("aguiclient.cjs ran %d of %d steps (exit: %v)\nstdout:\n%s\nstderr:\n%s", len(steps), len(sc.Steps), runErr, stdout.String(), stderr.String())
	}
	if runErr != nil {
		t.Logf("aguiclient.cjs: %v; stderr:\n%s", runErr, stderr.String())
	}
	return steps
}

// mustPass fails unless the step passed the client's verification and
// finished with an outcome of type want ("success", "interrupt").
func mustPass(t *testing.T, what string, st aguiStep, want string) {
	t.Helper()
	if st.Error != "" {
		t.Fatalf("%s: the AG-UI client failed: %s\n%s", what, st.Error, st)
	}
	if st.Outcome == nil || st.Outcome.Type != want {
		t.Fatalf("%s: outcome %s, want %s\n%s", what, mustJSON(t, st.Outcome), want, st)
	}
	if ty := st.types(); len(ty) < 2 || ty[0] != "RUN_STARTED" || ty[len(ty)-1] != "RUN_FINISHED" {
		t.Fatalf("%s: events %v: want RUN_STARTED first and RUN_FINISHED last", what, ty)
	}
	// STATE_SNAPSHOT and MESSAGES_SNAPSHOT come before the RUN_FINISHED.
	ty := st.types()
	if n := len(ty); n < 4 || !containsAll(ty[:n-1], "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT") {
		t.Fatalf("%s: events %v: want STATE_SNAPSHOT and MESSAGES_SNAPSHOT before RUN_FINISHED", what, ty)
	}
}

// mustRefuse fails unless the step ended in RUN_ERROR whose message holds
// want (the client itself must not have failed).
func mustRefuse(t *testing.T, what string, st aguiStep, want string) {
	t.Helper()
	if st.Error != "" {
		t.Fatalf("%s: the AG-UI client failed: %s\n%s", what, st.Error, st)
	}
	if st.Outcome == nil || st.Outcome.Type != "error" || !strings.Contains(st.Outcome.Message, want) {
		t.Fatalf("%s: outcome %s, want a RUN_ERROR saying %q\n%s", what, mustJSON(t, st.Outcome), want, st)
	}
	if n := len(st.of("RUN_FINISHED")); n != 0 {
		t.Fatalf("%s: a refused request finished the run too (%d RUN_FINISHED)", what, n)
	}
}

// mustRefuseAny is mustRefuse that also takes an HTTP 4xx answer saying
// want (a request the endpoint refuses before it reads the run).
func mustRefuseAny(t *testing.T, what string, st aguiStep, want string) {
	t.Helper()
	if strings.HasPrefix(st.Error, "HTTP 4") && strings.Contains(st.Error, want) && len(st.Events) == 0 {
		return
	}
	mustRefuse(t, what, st, want)
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// What the run and the desk say

// interruptID is the AG-UI interrupt id of a waiting call
// ("<callId>:<kind>:<first 16 hex of args_digest>").
func interruptID(it workflows.Interrupt) string {
	return it.CallID + ":" + string(it.Kind) + ":" + it.ArgsDigest[:16]
}

// checkInterrupt fails unless the AG-UI interrupt describes exactly the
// call that waits in the run.
func checkInterrupt(t *testing.T, got aguiInterrupt, want workflows.Interrupt) {
	t.Helper()
	if got.ID != interruptID(want) || got.Reason != "tool_call" || got.ToolCallID != want.CallID ||
		got.Metadata.Tool != want.Tool || got.Metadata.Kind != string(want.Kind) ||
		strings.TrimPrefix(got.Metadata.ArgsDigest, "sha256:") != want.ArgsDigest {
		t.Fatalf("interrupt %s does not describe the waiting call %s (want id %s)", mustJSON(t, got), mustJSON(t, want), interruptID(want))
	}
	if !jsonEqual(got.Metadata.CallArgs, want.CallArgs) {
		t.Fatalf("interrupt %s: call_args %s, the run's %s", got.ID, got.Metadata.CallArgs, want.CallArgs)
	}
	exp, err := time.Parse(time.RFC3339, got.ExpiresAt)
	if err != nil || exp.Sub(want.ExpiresAt).Abs() > time.Second {
		t.Fatalf("interrupt %s: expiresAt %q (%v), the run's %v", got.ID, got.ExpiresAt, err, want.ExpiresAt)
	}
	if !strings.Contains(got.Message, want.Tool) {
		t.Fatalf("interrupt %s: message %q does not name the tool %s", got.ID, got.Message, want.Tool)
	}
	var schema struct {
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal(got.ResponseSchema, &schema) != nil || !containsAll(schema.Required, "approved") || schema.Properties["editedArgs"] == nil {
		t.Fatalf("interrupt %s: responseSchema %s: want approved required and editedArgs", got.ID, got.ResponseSchema)
	}
}

// jsonEqual reports whether a and b are the same JSON value. A JSON string
// holding JSON counts as that JSON (call_args may carry the text).
func jsonEqual(a, b json.RawMessage) bool {
	norm := func(r json.RawMessage) any {
		var v any
		if json.Unmarshal(r, &v) != nil {
			return nil
		}
		if s, ok := v.(string); ok {
			var inner any
			if json.Unmarshal([]byte(s), &inner) == nil {
				return inner
			}
		}
		return v
	}
	x, _ := json.Marshal(norm(a))
	y, _ := json.Marshal(norm(b))
	return len(a) > 0 && bytes.Equal(x, y)
}

// ticket reads a ticket of the stack's desk.
func (s *stack) ticket(id string) desk.Ticket {
	s.t.Helper()
	d, err := desk.Connect(s.deskPath())
	if err != nil {
		s.t.Fatalf("opening the desk: %v", err)
	}
	defer d.Close()
	tk, err := d.Ticket(context.Background(), id)
	if err != nil {
		s.t.Fatalf("reading %s: %v", id, err)
	}
	return tk
}

// countStatus counts the trace records of one call with one status.
func countStatus(trace []workflows.TraceRecord, callID, status string) int {
	return len(records(trace, callID, status))
}

// door is the run's memo toolgate_door ("" if none).
func (s *stack) door(id string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		s.t.Fatalf("describing %s: %v", id, err)
	}
	f := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["toolgate_door"]
	if f == nil {
		return ""
	}
	var v string
	if err := converter.GetDefaultDataConverter().FromPayload(f, &v); err != nil {
		s.t.Fatalf("memo toolgate_door of %s: %v", id, err)
	}
	return v
}
