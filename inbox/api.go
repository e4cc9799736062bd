package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Call is one waiting call as the page shows it.
type Call struct {
	Run string `json:"run"`
	// Policy: the run is under a worker policy; a decision must be signed.
	Policy bool `json:"policy"`
	// Goal is the run's goal.
	Goal string `json:"goal,omitempty"`
	workflows.Interrupt
	// CallArgsText and OriginalArgsText are call_args and original_args as
	// the exact canonical JSON text the digest is taken of (a number as
	// written, never through a JavaScript double): what the page shows.
	CallArgsText     string `json:"call_args_text"`
	OriginalArgsText string `json:"original_args_text,omitempty"`
	// Asked is the interrupt's requested_at in Unix nanoseconds, in decimal
	// (a JavaScript number cannot hold it): a signed decision's "asked".
	Asked string `json:"asked"`
	// Trace is the run's most recent trace records, oldest first.
	Trace []TraceLine `json:"trace"`
	// TraceError says why the trace could not be read.
	TraceError string `json:"trace_error,omitempty"`
}

// TraceLine is a trace record with its JSON values also as exact canonical
// text.
type TraceLine struct {
	workflows.TraceRecord
	ArgsText         string `json:"args_text,omitempty"`
	ResultText       string `json:"result_text,omitempty"`
	OriginalArgsText string `json:"original_args_text,omitempty"`
}

// List is one page of waiting calls, newest first.
type List struct {
	Calls  []Call              `json:"calls"`
	Failed []client.RunFailure `json:"failed"`
	// Next asks for the next page of runs (the "page" parameter); empty on the last.
	Next string    `json:"next,omitempty"`
	Now  time.Time `json:"now"`
	// Paused are the tools paused fleet-wide on the served task queues
	// (the kill switch): an approval of a call of one is refused after it
	// is given. At most MaxPaused.
	Paused []PausedTool `json:"paused"`
	// PausedErrors say which queues' fleet ledgers did not answer: their
	// pauses, if any, are not shown. At most MaxPausedErrors.
	PausedErrors []string `json:"paused_errors"`
}

// PausedTool is one tool paused fleet-wide on a task queue. By and Reason
// come from an operator's signed pause: the page shows them as text only.
type PausedTool struct {
	TaskQueue string `json:"task_queue"`
	// Tool is the tool paused; ledger.AllTools ("*") is every destructive tool.
	Tool   string    `json:"tool"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Bounds on the pauses a listing carries.
const (
	MaxPaused       = ledger.MaxPauses // pauses listed, over every served queue
	MaxPausedErrors = 8                // ledgers named as not answering
	maxPauseText    = 200              // bytes of a pause's tool, by or task queue
	maxPauseError   = 500              // bytes of a ledger's error
)

// pending is GET /api/pending?run=ID&tool=NAME&page=TOKEN&size=N: one page
// of runs of the served task queues (Options.TaskQueues), at most size
// (default Options.PageSize), only those waiting on tool and only run if
// given. Only the runs of the page are queried.
func (h *Handler) pending(w http.ResponseWriter, r *http.Request) {
	if status, msg := sameOrigin(r, false); status != 0 {
		writeError(w, status, "%s", msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	q := r.URL.Query()
	opts := client.PendingOptions{PageSize: h.opts.PageSize, TaskQueues: h.opts.TaskQueues,
		Tool: q.Get("tool"), RunID: q.Get("run"), TraceRecords: h.opts.TraceRecords}
	if s := q.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > client.MaxPageSize {
			writeError(w, http.StatusBadRequest, "size %q: want a number of runs from 1 to %d", s, client.MaxPageSize)
			return
		}
		opts.PageSize = n
	}
	if p := q.Get("page"); p != "" {
		tok, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			writeError(w, http.StatusBadRequest, "page: not a page token")
			return
		}
		opts.PageToken = tok
	}
	page, err := h.b.Pending(ctx, opts)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	out := listOf(page)
	out.Paused, out.PausedErrors = h.pauses(ctx)
	writeJSON(w, http.StatusOK, out)
}

// pauses are the tools paused on the fleet ledgers of the served task
// queues, and why a ledger's pauses could not be read: a ledger that does
// not answer never costs the listing its calls. Both are bounded, each
// string clipped.
func (h *Handler) pauses(ctx context.Context) ([]PausedTool, []string) {
	queues := h.opts.TaskQueues
	if len(queues) == 0 {
		queues = []string{workflows.TaskQueue}
	}
	paused, errs := []PausedTool{}, []string{}
	for _, q := range queues {
		v, ok, err := h.b.Guards(ctx, q)
		if err != nil {
			if len(errs) < MaxPausedErrors {
				errs = append(errs, clipText(fmt.Sprintf("the fleet ledger of task queue %s did not answer: tools paused on it are not shown: %v", clipText(q, maxPauseText), err), maxPauseError))
			}
			continue
		}
		if !ok {
			continue
		}
		for _, p := range v.Pauses {
			if len(paused) == MaxPaused {
				return paused, errs
			}
			paused = append(paused, PausedTool{TaskQueue: clipText(q, maxPauseText), Tool: clipText(p.Tool, maxPauseText),
				By: clipText(p.By, maxPauseText), Reason: clipText(p.Reason, ledger.MaxReasonSize), At: p.At.UTC()})
		}
	}
	return paused, errs
}

// clipText is s cut to at most n bytes (on a rune boundary) with "…" added
// when cut; invalid UTF-8 is replaced.
func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// listOf turns a page of waiting calls into what the page shows: newest first,
// each with its run's recent trace and its JSON as exact text.
func listOf(page client.PendingPage) List {
	out := List{Calls: []Call{}, Failed: page.Failed, Now: time.Now().UTC()}
	if out.Failed == nil {
		out.Failed = []client.RunFailure{}
	}
	if len(page.NextPageToken) > 0 {
		out.Next = base64.RawURLEncoding.EncodeToString(page.NextPageToken)
	}
	for _, pc := range page.Calls {
		tr := []TraceLine{}
		for _, rec := range page.Traces[pc.RunID] {
			tr = append(tr, TraceLine{TraceRecord: rec, ArgsText: jsonText(rec.Args), ResultText: jsonText(rec.Result),
				OriginalArgsText: jsonText(rec.OriginalArgs)})
		}
		out.Calls = append(out.Calls, Call{Run: pc.RunID, Policy: pc.Policy, Goal: pc.Goal, Interrupt: pc.Interrupt,
			CallArgsText: jsonText(pc.CallArgs), OriginalArgsText: jsonText(pc.OriginalArgs),
			Asked: strconv.FormatInt(pc.RequestedAt.UnixNano(), 10), Trace: tr, TraceError: page.TraceErrors[pc.RunID]})
	}
	slices.SortStableFunc(out.Calls, func(a, b Call) int { return b.RequestedAt.Compare(a.RequestedAt) })
	return out
}

// jsonText is raw as canonical JSON text ("" for none); JSON that does not
// canonicalize is given compacted, as it is.
func jsonText(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	if c, err := tool.Canonical(raw); err == nil {
		return string(c)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// Decision is the body of POST /api/decide.
type Decision struct {
	Run      string `json:"run"`
	Decision string `json:"decision"` // approve | reject | respond
	workflows.DecisionInput
}

// decide is POST /api/decide: one decision, bound to the args_digest (and
// kind) the page showed, sent as an update.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	var d Decision
	if !readBody(w, r, "decision", &d) {
		return
	}
	if msg := d.check(); msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	if len(d.EditedArgs) > 0 {
		if status, msg := h.checkEdit(ctx, d); status != 0 {
			writeError(w, status, "%s", msg)
			return
		}
	}
	var (
		res workflows.DecisionResult
		err error
	)
	if d.Decision == "respond" {
		res, err = h.b.Respond(ctx, d.Run, d.DecisionInput)
	} else {
		res, err = h.b.Decide(ctx, d.Run, d.Decision == "approve", d.DecisionInput)
	}
	if err != nil {
		writeDecideError(w, fmt.Errorf("%s %s of run %s: %w", d.Decision, d.CallID, d.Run, err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// checkEdit checks edited arguments against the waiting call's tool schema,
// as the run holds it, before anything is sent: 0 if they fit, else the
// status and why. (The run checks them again, and its rules too.)
func (h *Handler) checkEdit(ctx context.Context, d Decision) (int, string) {
	st, err := h.b.State(ctx, d.Run)
	if err != nil {
		return http.StatusBadGateway, fmt.Sprintf("reading run %s: %v", d.Run, err)
	}
	name := ""
	for _, it := range st.Interrupts {
		if it.CallID == d.CallID {
			name = it.Tool
		}
	}
	if name == "" {
		return http.StatusConflict, fmt.Sprintf("call %s of run %s is not waiting any more", d.CallID, d.Run)
	}
	spec, err := h.b.Tool(ctx, d.Run, name)
	if err != nil {
		return http.StatusBadGateway, fmt.Sprintf("reading the schema of %s: %v", name, err)
	}
	if len(bytes.TrimSpace(spec.Schema)) == 0 {
		return 0, ""
	}
	sch, err := tool.CompileSchema(spec.Schema)
	if err == nil {
		err = sch.Validate(d.EditedArgs)
	}
	if err != nil {
		return http.StatusUnprocessableEntity, fmt.Sprintf("the edited arguments do not fit %s's schema (nothing was sent): %v", name, err)
	}
	return 0, ""
}

// check says what is missing from a decision ("" if nothing).
func (d Decision) check() string {
	switch {
	case d.Run == "" || d.CallID == "":
		return "a decision names its run and call_id"
	case d.Decision != "approve" && d.Decision != "reject" && d.Decision != "respond":
		return fmt.Sprintf("decision %q: want approve, reject or respond", d.Decision)
	case d.Decision == "respond" && len(d.Response) == 0:
		return "respond needs response: the answer the planner gets in the tool's place"
	case d.Decision != "respond" && len(d.Response) > 0:
		return "a response goes with respond only"
	case d.Decision == "respond" && len(d.EditedArgs) > 0:
		return "edited arguments go with an approval only"
	case d.ArgsDigest == "":
		return "a decision is bound to the args_digest the page showed: it has none"
	case d.Decision == "reject" && strings.TrimSpace(d.Reason) == "" && d.Token == "":
		return "a rejection needs a reason (the planner is told it)"
	case d.Decision == "reject" && len(d.EditedArgs) > 0:
		return "edited arguments go with an approval only"
	}
	if len(d.EditedArgs) > 0 {
		if _, err := tool.Canonical(d.EditedArgs); err != nil {
			return fmt.Sprintf("edited arguments: %v", err)
		}
	}
	return ""
}

// sameOriginJSON refuses what a cross-site page could send: a decision (a
// rewind, a fork) must be application/json, carry the Header, and come from this origin. It
// returns 0 if the request passes, else the status and why.
func sameOriginJSON(r *http.Request) (int, string) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "a decision, rewind or fork is a JSON POST (Content-Type: application/json)"
	}
	return sameOrigin(r, true)
}

// sameOrigin refuses a request of the API another site could make with the
// browser's credentials: it must carry the Header (a form, an <img> or a
// <script src> cannot set one, and a cross-site fetch that sets one needs a
// CORS preflight the inbox never answers), and Sec-Fetch-Site and Origin,
// where sent, must say this origin. needOrigin: the request must have an
// Origin (browsers send one with every POST; a same-origin GET has none).
// It returns 0 if the request passes, else the status and why.
func sameOrigin(r *http.Request, needOrigin bool) (int, string) {
	if r.Header.Get(Header) != "1" {
		return http.StatusForbidden, fmt.Sprintf("the inbox's API answers the inbox page only: a request carries the %s header, which the page sends and another site's page, form, <img> or <script src> cannot", Header)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: " + site + "): the inbox's API answers the inbox page only"
	}
	origin := r.Header.Get("Origin")
	if origin == "" && !needOrigin {
		return 0, ""
	}
	u, err := url.Parse(origin)
	if origin == "" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return http.StatusForbidden, fmt.Sprintf("origin %q does not match this inbox (%s): cross-origin request refused", origin, r.Host)
	}
	return 0, ""
}

// writeDecideError maps the client's refusals to statuses; a stale decision
// (digest changed, call decided) or rewind (the run moved on since the
// preview) is 409 with "stale" set.
func writeDecideError(w http.ResponseWriter, err error) {
	status, stale := http.StatusBadGateway, false
	switch {
	case errors.Is(err, client.ErrDigestMismatch), errors.Is(err, client.ErrAlreadyDecided), errors.Is(err, client.ErrStale), errors.Is(err, client.ErrRunClosed):
		status, stale = http.StatusConflict, true
	case errors.Is(err, client.ErrUnknownRun), errors.Is(err, client.ErrUnknownCall):
		status = http.StatusNotFound
	case errors.Is(err, client.ErrUnauthorized):
		status = http.StatusForbidden
	case errors.Is(err, client.ErrRefusedInput), errors.Is(err, client.ErrEditRefused):
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, map[string]any{"error": err.Error(), "stale": stale})
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]any{"error": fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w) // escapes <, > and & in strings: the JSON is never HTML
	_ = enc.Encode(v)
}
