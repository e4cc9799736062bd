package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/timeline"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// StepCall is a call of a run's timeline with its arguments and result also
// as exact canonical text (as Call's), what the page shows.
type StepCall struct {
	timeline.Call
	ArgsText   string `json:"args_text,omitempty"`
	ResultText string `json:"result_text,omitempty"`
}

// StepView is one step of a run's timeline as the page shows it.
type StepView struct {
	timeline.Step
	Calls []StepCall `json:"calls"`
}

// Steps is GET /api/steps: run's timeline (client.Steps), and whether the
// run is under a worker policy, so that a rewind or fork must be signed.
type Steps struct {
	WorkflowID string         `json:"workflow_id"`
	Runs       []timeline.Run `json:"runs"`
	Steps      []StepView     `json:"steps"`
	LastEvent  int64          `json:"last_event"`
	Policy     bool           `json:"policy"`
	// PolicyError says why the run's state, and so its policy, could not be
	// read (no worker answers its queries); the page then signs if it can.
	PolicyError string `json:"policy_error,omitempty"`
}

// PreviewView is GET /api/rewind-preview: what a rewind would do
// (client.RewindPreview), its calls with exact text.
type PreviewView struct {
	timeline.Preview
	Kept    []StepCall `json:"kept"`
	Dropped []StepCall `json:"dropped"`
	Reads   []StepCall `json:"reads"`
}

// RewindRequest is the body of POST /api/rewind: rewind run to just before
// call to, bound to the digest of the preview the page showed (expect).
// Under a policy token is operator's rewind, signed in the browser.
type RewindRequest struct {
	Run      string `json:"run"`
	To       string `json:"to"`
	Expect   string `json:"expect"`
	Operator string `json:"operator"`
	Token    string `json:"token,omitempty"`
}

// ForkRequest is the body of POST /api/fork: start run id as a fork of run
// at call at, with at's arguments replaced by args if given. Under a policy
// token is operator's fork (a start token, act fork, over
// client.ForkInput), signed in the browser.
type ForkRequest struct {
	Run      string          `json:"run"`
	At       string          `json:"at"`
	ID       string          `json:"id"`
	Args     json.RawMessage `json:"args,omitempty"`
	Operator string          `json:"operator"`
	Token    string          `json:"token,omitempty"`
}

// Forked is what POST /api/fork answers: the fork started.
type Forked struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

var (
	callIDRE = regexp.MustCompile(`^c-[1-9][0-9]{0,9}$`)
	digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func stepCalls(cs []timeline.Call) []StepCall {
	out := make([]StepCall, 0, len(cs))
	for _, c := range cs {
		out = append(out, StepCall{Call: c, ArgsText: jsonText(c.Args), ResultText: jsonText(c.Result)})
	}
	return out
}

// checkName says what is wrong with a run id or name ("" if nothing).
func checkName(what, s string) string {
	if s == "" {
		return what + " is missing"
	}
	if len(s) > workflows.MaxNameBytes {
		return fmt.Sprintf("%s has %d bytes, at most %d", what, len(s), workflows.MaxNameBytes)
	}
	return ""
}

// steps is GET /api/steps?run=ID. It only reads.
func (h *Handler) steps(w http.ResponseWriter, r *http.Request) {
	if status, msg := sameOrigin(r, false); status != 0 {
		writeError(w, status, "%s", msg)
		return
	}
	id := r.URL.Query().Get("run")
	if msg := checkName("run", id); msg != "" {
		writeError(w, http.StatusBadRequest, "%s: GET /api/steps?run=ID", msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	t, err := h.b.Steps(ctx, id)
	if err != nil {
		writeDecideError(w, fmt.Errorf("reading the steps of run %s: %w", id, err))
		return
	}
	out := Steps{WorkflowID: t.WorkflowID, Runs: t.Runs, Steps: []StepView{}, LastEvent: t.LastEvent}
	if out.Runs == nil {
		out.Runs = []timeline.Run{}
	}
	for _, s := range t.Steps {
		out.Steps = append(out.Steps, StepView{Step: s, Calls: stepCalls(s.Calls)})
	}
	if st, err := h.b.State(ctx, id); err != nil {
		out.PolicyError = err.Error()
	} else {
		out.Policy = st.Policy
	}
	writeJSON(w, http.StatusOK, out)
}

// rewindPreview is GET /api/rewind-preview?run=ID&to=CALL. It only reads.
func (h *Handler) rewindPreview(w http.ResponseWriter, r *http.Request) {
	if status, msg := sameOrigin(r, false); status != 0 {
		writeError(w, status, "%s", msg)
		return
	}
	q := r.URL.Query()
	id, to := q.Get("run"), q.Get("to")
	if msg := checkName("run", id); msg != "" {
		writeError(w, http.StatusBadRequest, "%s: GET /api/rewind-preview?run=ID&to=CALL", msg)
		return
	}
	if !callIDRE.MatchString(to) {
		writeError(w, http.StatusBadRequest, "to %q: want the call to rewind to, such as c-3", clipTo(to, 40))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	p, err := h.b.RewindPreview(ctx, id, to)
	if err != nil {
		writeDecideError(w, fmt.Errorf("previewing a rewind of run %s to %s: %w", id, to, err))
		return
	}
	writeJSON(w, http.StatusOK, PreviewView{Preview: p, Kept: stepCalls(p.Kept), Dropped: stepCalls(p.Dropped), Reads: stepCalls(p.Reads)})
}

// readBody reads a JSON POST of the API strictly into v, or writes why not
// and returns false.
func readBody(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	if status, msg := sameOriginJSON(r); status != 0 {
		writeError(w, status, "%s", msg)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "reading the %s: %v", what, err)
		return false
	}
	if err := tool.DecodeExact(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "the %s does not decode (strictly: every key once, spelt exactly as its field): %v", what, err)
		return false
	}
	return true
}

// rewind is POST /api/rewind: the rewind the page previewed, refused (409,
// stale) if the run moved on since.
func (h *Handler) rewind(w http.ResponseWriter, r *http.Request) {
	var rq RewindRequest
	if !readBody(w, r, "rewind", &rq) {
		return
	}
	msg := checkName("run", rq.Run)
	switch {
	case msg != "":
	case !callIDRE.MatchString(rq.To):
		msg = fmt.Sprintf("to %q: want the call to rewind to, such as c-3", clipTo(rq.To, 40))
	case !digestRE.MatchString(rq.Expect):
		msg = "expect: a rewind is bound to the digest of the preview the page showed (64 hex digits)"
	default:
		msg = checkName("operator", rq.Operator)
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	rw, err := h.b.Rewind(ctx, rq.Run, rq.To, rq.Expect, client.Operator{Name: rq.Operator, Token: rq.Token})
	if err != nil {
		writeDecideError(w, fmt.Errorf("rewind of run %s to %s: %w", rq.Run, rq.To, err))
		return
	}
	writeJSON(w, http.StatusOK, rw)
}

// fork is POST /api/fork: start a fork of a run at one of its calls.
func (h *Handler) fork(w http.ResponseWriter, r *http.Request) {
	var rq ForkRequest
	if !readBody(w, r, "fork", &rq) {
		return
	}
	msg := checkName("run", rq.Run)
	switch {
	case msg != "":
	case !callIDRE.MatchString(rq.At):
		msg = fmt.Sprintf("at %q: want the call to fork at, such as c-3", clipTo(rq.At, 40))
	case checkName("id", rq.ID) != "":
		msg = checkName("id", rq.ID) + ": the fork's new run id"
	case rq.ID == rq.Run:
		msg = "id: the fork is a new run, under an id of its own"
	default:
		msg = checkName("operator", rq.Operator)
	}
	if msg == "" && len(rq.Args) > 0 {
		if canon, err := tool.Canonical(rq.Args); err != nil {
			msg = fmt.Sprintf("args: %v", err)
		} else if canon[0] != '{' {
			msg = "args: the fork's arguments are a JSON object"
		}
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	run, err := h.b.Fork(ctx, rq.Run, rq.At, rq.ID, rq.Args, client.Operator{Name: rq.Operator, Token: rq.Token})
	if err == nil {
		// The server takes the start before the run checks it: answer what
		// the run said (a refused fork fails its first task).
		err = h.b.AwaitFork(ctx, run.GetID(), run.GetRunID())
	}
	if err != nil {
		writeDecideError(w, fmt.Errorf("fork of run %s at %s as %s: %w", rq.Run, rq.At, rq.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, Forked{ID: run.GetID(), RunID: run.GetRunID()})
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
