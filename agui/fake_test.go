package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/client"
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
