package agui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// fakeRun is one run of the fake backend. steps are applied one per State
// read (the run moving on while a stream polls it).
type fakeRun struct {
	info  RunInfo
	st    workflows.State
	trace []workflows.TraceRecord
	steps []func(*fakeRun)
}

// decision is an update the fake took (or refused).
type decision struct {
	id      string
	how     string // approve | reject | respond
	in      workflows.DecisionInput
	update  string
	applied bool
}

// fake is a Backend over runs in memory. Decisions behave as Temporal and
// the run do: one update per update id (the first one's outcome for the
// same id again), a decision only for an open interrupt with its digest.
type fake struct {
	mu        sync.Mutex
	runs      map[string]*fakeRun
	starts    []workflows.RunInput
	messages  []string
	decisions []decision
	results   map[string]workflows.DecisionResult // by update id
	// forget: Temporal no longer holds earlier updates (a retry then reaches the run).
	forget bool
	// onStart, onMessage script the run; onDecided runs after a decision applied.
	onStart   func(*fakeRun)
	onMessage func(*fakeRun, string)
	onDecided func(*fakeRun, decision)
}

func newFake() *fake {
	return &fake{runs: map[string]*fakeRun{}, results: map[string]workflows.DecisionResult{}}
}

func (f *fake) run(id string) (*fakeRun, error) {
	r := f.runs[id]
	if r == nil {
		return nil, fmt.Errorf("%w: no run with id %s", client.ErrUnknownRun, id)
	}
	return r, nil
}

func (f *fake) Describe(_ context.Context, id string) (RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(id)
	if err != nil {
		return RunInfo{}, err
	}
	return r.info, nil
}

func (f *fake) Start(_ context.Context, id string, in workflows.RunInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs[id] != nil {
		return fmt.Errorf("%w: a run with id %s is already running", client.ErrRefusedInput, id)
	}
	f.starts = append(f.starts, in)
	r := &fakeRun{info: RunInfo{Running: true, Door: Door},
		st: workflows.State{Status: workflows.StatusRunning, Turn: 1, Goal: in.Goal, Interrupts: []workflows.Interrupt{}}}
	f.runs[id] = r
	if f.onStart != nil {
		f.onStart(r)
	}
	return nil
}

func (f *fake) Message(_ context.Context, id, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(id)
	if err != nil {
		return err
	}
	f.messages = append(f.messages, text)
	if f.onMessage != nil {
		f.onMessage(r, text)
	}
	return nil
}

func (f *fake) State(_ context.Context, id string) (workflows.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(id)
	if err != nil {
		return workflows.State{}, err
	}
	if len(r.steps) > 0 {
		r.steps[0](r)
		r.steps = r.steps[1:]
	}
	st := r.st
	st.Interrupts = append([]workflows.Interrupt{}, r.st.Interrupts...)
	return st, nil
}

func (f *fake) Trace(_ context.Context, id string) ([]workflows.TraceRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(id)
	if err != nil {
		return nil, err
	}
	return append([]workflows.TraceRecord{}, r.trace...), nil
}

func (f *fake) Decide(_ context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	how := "reject"
	if approve {
		how = "approve"
	}
	return f.decide(id, how, in, opts)
}

func (f *fake) Respond(_ context.Context, id string, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	return f.decide(id, "respond", in, opts)
}

func (f *fake) decide(id, how string, in workflows.DecisionInput, opts []client.DecideOption) (workflows.DecisionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	update := updateIDOf(opts)
	d := decision{id: id, how: how, in: in, update: update}
	if res, ok := f.results[update]; ok && update != "" && !f.forget {
		f.decisions = append(f.decisions, d)
		return res, nil
	}
	r, err := f.run(id)
	if err != nil {
		return workflows.DecisionResult{}, err
	}
	for i, it := range r.st.Interrupts {
		if it.CallID != in.CallID {
			continue
		}
		if in.ArgsDigest != it.ArgsDigest || in.Kind != it.Kind {
			f.decisions = append(f.decisions, d)
			return workflows.DecisionResult{}, fmt.Errorf("%w: args_digest %q does not match call %s", client.ErrDigestMismatch, in.ArgsDigest, in.CallID)
		}
		d.applied = true
		f.decisions = append(f.decisions, d)
		r.st.Interrupts = append(r.st.Interrupts[:i:i], r.st.Interrupts[i+1:]...)
		status := map[string]string{"approve": workflows.TraceApproved, "reject": workflows.TraceRejected, "respond": workflows.TraceResponded}[how]
		if in.Cancel {
			status = workflows.TraceCancelled
		}
		rec := workflows.TraceRecord{Turn: r.st.Turn, CallID: it.CallID, Tool: it.Tool, Args: it.CallArgs, Status: status,
			Approver: in.Approver, Reason: in.Reason, Result: in.Response}
		if len(in.EditedArgs) > 0 {
			rec.Status, rec.Args, rec.OriginalArgs = workflows.TraceEdited, in.EditedArgs, it.CallArgs
		}
		r.add(rec)
		res := workflows.DecisionResult{CallID: it.CallID, Tool: it.Tool, Decision: status, Approver: in.Approver}
		f.results[update] = res
		if f.onDecided != nil {
			f.onDecided(r, d)
		}
		return res, nil
	}
	f.decisions = append(f.decisions, d)
	return workflows.DecisionResult{}, fmt.Errorf("%w: call %s is not waiting for a decision", client.ErrAlreadyDecided, in.CallID)
}

func updateIDOf(opts []client.DecideOption) string {
	var uo sdkclient.UpdateWorkflowOptions
	for _, o := range opts {
		o(&uo)
	}
	return uo.UpdateID
}

func (r *fakeRun) add(rec workflows.TraceRecord) {
	rec.Seq = len(r.trace) + 1
	rec.At = time.Unix(1700000000, 0).UTC()
	if rec.Turn == 0 {
		rec.Turn = r.st.Turn
	}
	r.trace = append(r.trace, rec)
}

// waitAt makes call id of tool wait at the gate (a blocked record and an
// open interrupt, expiring at exp).
func (r *fakeRun) waitAt(id, toolName, args string, exp time.Time) workflows.Interrupt {
	digest, err := tool.Digest(toolName, json.RawMessage(args))
	if err != nil {
		panic(err)
	}
	r.add(workflows.TraceRecord{CallID: id, Tool: toolName, Args: json.RawMessage(args), Status: workflows.TraceBlocked, Error: "needs confirmation"})
	it := workflows.Interrupt{CallID: id, Tool: toolName, CallArgs: json.RawMessage(args), ArgsDigest: digest, Kind: workflows.KindGate,
		Reason: "needs confirmation", RequestedAt: exp.Add(-24 * time.Hour), ExpiresAt: exp}
	r.st.Interrupts = append(r.st.Interrupts, it)
	r.st.Status = workflows.StatusWaitingForApproval
	return it
}

// The desk's turn: a read (c-1), then a close (c-2) that waits at the gate.
const (
	goal      = "find the login ticket and close it"
	readArgs  = `{"query":"login"}`
	closeArgs = `{"ticket_id":"TKT-3"}`
	readOut   = `{"tickets":[{"id":"TKT-3","title":"cannot log in"}]}`
	closeOut  = `{"closed":"TKT-3"}`
	answerTxt = "closed TKT-3"
)

var expiry = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// deskFake scripts the desk's turn: started, it reads then waits on the
// close; an approval closes the ticket (once: sideEffects counts it) and
// answers; a rejection answers without it.
func deskFake() (*fake, *int) {
	f := newFake()
	closed := new(int)
	f.onStart = func(r *fakeRun) {
		r.steps = []func(*fakeRun){
			func(r *fakeRun) {},
			func(r *fakeRun) {
				r.st.Calls = 1
				r.add(workflows.TraceRecord{CallID: "c-1", Tool: "search_tickets", Args: json.RawMessage(readArgs), Status: workflows.TraceOK, Result: json.RawMessage(readOut)})
			},
			func(r *fakeRun) {
				r.st.Calls = 2
				r.waitAt("c-2", "close_ticket", closeArgs, expiry)
			},
		}
	}
	f.onDecided = func(r *fakeRun, d decision) {
		if len(r.st.Interrupts) > 0 {
			return
		}
		if d.how == "approve" {
			*closed++
			r.add(workflows.TraceRecord{CallID: d.in.CallID, Tool: "close_ticket", Args: json.RawMessage(closeArgs), Status: workflows.TraceOK, Result: json.RawMessage(closeOut), Approver: d.in.Approver})
		}
		r.st.Status, r.st.Answer = workflows.StatusWaitingForInput, answerTxt
	}
	return f, closed
}

func newHandler(t *testing.T, b Backend, edit ...func(*Options)) *Handler {
	t.Helper()
	o := Options{Backend: b, Planner: plan.Config{Kind: plan.KindSupport}, Hosts: []string{"example.test"}, Poll: time.Millisecond}
	for _, e := range edit {
		e(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.reflect, h.errGrace = time.Second, 50*time.Millisecond
	return h
}

// input is a RunAgentInput as HttpAgent sends it.
func input(thread string, messages []json.RawMessage, resume ...map[string]any) map[string]any {
	if messages == nil {
		messages = []json.RawMessage{}
	}
	in := map[string]any{"threadId": thread, "runId": "run-1", "protocolVersion": "1.0", "tools": []any{}, "context": []any{},
		"forwardedProps": map[string]any{}, "state": map[string]any{}, "messages": messages}
	if len(resume) > 0 {
		in["resume"] = resume
	}
	return in
}

func userMsg(id, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": id, "role": "user", "content": text})
	return b
}

// post sends body (marshalled unless a string) as HttpAgent does, with
// header edits, and returns the response.
func post(t *testing.T, h http.Handler, body any, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	var raw []byte
	if s, ok := body.(string); ok {
		raw = []byte(s)
	} else {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "http://example.test"+Path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// events parses an SSE body, and checks the order the AG-UI client's
// verifier enforces.
func events(t *testing.T, rec *httptest.ResponseRecorder) []event {
	t.Helper()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	var out []event
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, e)
	}
	verifyOrder(t, out)
	return out
}

// verifyOrder is the client verifier's rules this endpoint can break.
func verifyOrder(t *testing.T, evs []event) {
	t.Helper()
	openCalls, openText := map[string]bool{}, map[string]bool{}
	for i, e := range evs {
		typ := e.str("type")
		switch {
		case i == 0 && typ != evRunStarted && typ != evRunError:
			t.Fatalf("first event %s: want RUN_STARTED or RUN_ERROR", typ)
		case i > 0 && (evs[i-1].str("type") == evRunFinished || evs[i-1].str("type") == evRunError):
			t.Fatalf("%s after the run ended", typ)
		}
		switch typ {
		case evToolCallStart:
			openCalls[e.str("toolCallId")] = true
		case evToolCallArgs:
			if !openCalls[e.str("toolCallId")] {
				t.Fatalf("TOOL_CALL_ARGS of %s, not open", e.str("toolCallId"))
			}
		case evToolCallEnd:
			if !openCalls[e.str("toolCallId")] {
				t.Fatalf("TOOL_CALL_END of %s, not open", e.str("toolCallId"))
			}
			delete(openCalls, e.str("toolCallId"))
		case evTextStart:
			openText[e.str("messageId")] = true
		case evTextContent, evTextEnd:
			if !openText[e.str("messageId")] {
				t.Fatalf("%s of %s, not open", typ, e.str("messageId"))
			}
			if typ == evTextEnd {
				delete(openText, e.str("messageId"))
			}
		case evRunFinished:
			if len(openCalls)+len(openText) > 0 {
				t.Fatalf("RUN_FINISHED with open calls %v or text %v", openCalls, openText)
			}
		}
	}
}

func types(evs []event) string {
	var out []string
	for _, e := range evs {
		s := e.str("type")
		if id := e.str("toolCallId"); id != "" {
			s += "(" + id + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func last(evs []event) event { return evs[len(evs)-1] }

// snapshotMessages are the messages of a stream's MESSAGES_SNAPSHOT: what
// the client holds, and sends with its next post.
func snapshotMessages(t *testing.T, evs []event) []json.RawMessage {
	t.Helper()
	for _, e := range evs {
		if e.str("type") == evMessagesSnapshot {
			var out []json.RawMessage
			b, _ := json.Marshal(e["messages"])
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no MESSAGES_SNAPSHOT in %s", types(evs))
	return nil
}

// interruptsOfFinish are the interrupts of a RUN_FINISHED.
func interruptsOfFinish(t *testing.T, e event) []map[string]any {
	t.Helper()
	o, _ := e["outcome"].(map[string]any)
	if e.str("type") != evRunFinished || o["type"] != "interrupt" {
		t.Fatalf("want RUN_FINISHED with an interrupt outcome, got %v", e)
	}
	var out []map[string]any
	for _, it := range o["interrupts"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}
