package agui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// resumeEntry is one answer of a resume (AG-UI's ResumeEntry), with the
// payload and metadata this endpoint takes.
type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // resolved | cancelled
	Payload     *resumePayload  `json:"payload,omitempty"`
	Metadata    *resumeMetadata `json:"metadata,omitempty"`
}

// resumePayload is an answer (the interrupts' responseSchema).
type resumePayload struct {
	Approved   *bool           `json:"approved"`
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
}

// resumeMetadata is who answers: a signed decision's token (required under
// a worker policy), or the approver's name for a run without one.
type resumeMetadata struct {
	Token    string `json:"token,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// DefaultApprover is who decides an unsigned run's call when a resume entry
// names nobody (metadata.approver).
const DefaultApprover = "agui"

// ReservedApproverPrefixes start the approver names the run and the doors
// write themselves — the run's (workflows.ReservedApprovers: a rule that
// decided, a grant, always_approve), an MCP client's user
// (elicitation:NAME), a webhook's or a Slack message's link (webhook:…,
// slack:…: workflows.DoorApprovers) — so a metadata.approver that starts
// with one, in any case or spelt with look-alike letters (names.LooksLike),
// is refused: it would pass a human's decision off as one of those. So is
// one that looks like workflows.WithdrawnBy, and one that does not read as
// it is written (names.Check). A run of rules version 12 refuses them too;
// this endpoint says so before anything reaches the run.
var ReservedApproverPrefixes = append(slices.Clone(workflows.ReservedApprovers), workflows.DoorApprovers...)

// reservedPrefix is the reserved prefix name starts with, or looks like it
// starts with, or "".
func reservedPrefix(name string) string {
	p, _ := names.LooksLike(name, ReservedApproverPrefixes)
	return p
}

// isWithdrawnBy reports whether name is, or looks like, workflows.WithdrawnBy.
func isWithdrawnBy(name string) bool {
	_, ok := names.LooksLike(name, []string{workflows.WithdrawnBy})
	return ok
}

var interruptIDPattern = regexp.MustCompile(`^(c-[1-9][0-9]{0,9}):(gate|interrupt):([0-9a-f]{16})$`)

// InterruptID is the id of the interrupt of a waiting call: its call id, its
// kind and the first 16 hex digits of its args_digest.
func InterruptID(it workflows.Interrupt) string {
	d := strings.TrimPrefix(it.ArgsDigest, "sha256:")
	if len(d) > 16 {
		d = d[:16]
	}
	return it.CallID + ":" + string(it.Kind) + ":" + d
}

// parseResumeEntry decodes resume[i] exactly and checks its shape.
func parseResumeEntry(i int, raw json.RawMessage) (resumeEntry, *badRequest) {
	at := fmt.Sprintf("resume[%d]", i)
	var e resumeEntry
	if err := tool.DecodeExact(raw, &e); err != nil {
		return e, refuse(400, "%s: %s", at, text.Clip(err.Error(), 300))
	}
	if !interruptIDPattern.MatchString(e.InterruptID) {
		return e, refuse(400, "%s.interruptId %q: not an interrupt id of this endpoint (CALL:KIND:DIGEST16, as RUN_FINISHED gave it)", at, text.Clip(e.InterruptID, 100))
	}
	if m := e.Metadata; m != nil {
		switch {
		case len(m.Token) > signed.MaxTokenBytes:
			return e, refuse(400, "%s.metadata.token: %d bytes, at most %d", at, len(m.Token), signed.MaxTokenBytes)
		case len(m.Approver) > workflows.MaxNameBytes:
			return e, refuse(400, "%s.metadata.approver: %d bytes, at most %d", at, len(m.Approver), workflows.MaxNameBytes)
		case m.Approver != "" && checkID(at+".metadata.approver", m.Approver) != nil:
			return e, refuse(400, "%s.metadata.approver: control characters are refused", at)
		case m.Approver != "" && names.Check(m.Approver) != nil:
			return e, refuse(400, "%s.metadata.approver %q: %v; name the human who decides as the name reads", at, text.Clip(m.Approver, 100), names.Check(m.Approver))
		case reservedPrefix(m.Approver) != "":
			return e, refuse(400, "%s.metadata.approver %q: names starting with (or looking like) %s are reserved for what the run and the doors record themselves "+
				"(a rule, a grant, a policy, an MCP elicitation, a webhook's or a Slack link); name the human who decides",
				at, text.Clip(m.Approver, 100), strings.Join(ReservedApproverPrefixes, ", "))
		case isWithdrawnBy(m.Approver):
			return e, refuse(400, "%s.metadata.approver %q: %s is who the run records for a call its caller withdrew; name the human who decides",
				at, text.Clip(m.Approver, 100), workflows.WithdrawnBy)
		}
	}
	p := e.Payload
	if p != nil && len(p.Reason) > workflows.MaxTextBytes {
		return e, refuse(400, "%s.payload.reason: %d bytes, at most %d", at, len(p.Reason), workflows.MaxTextBytes)
	}
	switch e.Status {
	case "cancelled":
		if p != nil && (p.Approved != nil && *p.Approved || len(p.EditedArgs) > 0 || len(p.Data) > 0 || len(p.Response) > 0) {
			return e, refuse(400, "%s: a cancelled answer takes at most payload.reason (the call does not run)", at)
		}
	case "resolved":
		if p == nil || p.Approved == nil {
			return e, refuse(400, "%s.payload.approved is required: true runs the call, false rejects it", at)
		}
		for _, f := range []struct {
			name  string
			raw   json.RawMessage
			limit int
			obj   bool
		}{{"editedArgs", p.EditedArgs, workflows.MaxArgsBytes, true}, {"data", p.Data, workflows.MaxArgsBytes, true}, {"response", p.Response, tool.MaxResultBytes, false}} {
			switch {
			case len(f.raw) == 0:
			case isNull(f.raw):
				return e, refuse(400, "%s.payload.%s: null is refused (leave the field out)", at, f.name)
			case f.obj && !isObject(f.raw):
				return e, refuse(400, "%s.payload.%s: want a JSON object", at, f.name)
			case len(f.raw) > f.limit:
				return e, refuse(400, "%s.payload.%s: %d bytes, at most %d", at, f.name, len(f.raw), f.limit)
			}
		}
		switch {
		case !*p.Approved && (len(p.EditedArgs) > 0 || len(p.Data) > 0 || len(p.Response) > 0):
			return e, refuse(400, "%s: approved false rejects the call: editedArgs, data and response go with approved true", at)
		case len(p.Response) > 0 && (len(p.EditedArgs) > 0 || len(p.Data) > 0):
			return e, refuse(400, "%s: a response answers in the tool's place (it does not run): it takes no editedArgs or data", at)
		}
	default:
		return e, refuse(400, "%s.status %q: want \"resolved\" or \"cancelled\"", at, text.Clip(e.Status, 40))
	}
	return e, nil
}

// Decision kinds an answer becomes.
const (
	howApprove = "approve"
	howReject  = "reject"
	howCancel  = "cancel"
	howRespond = "respond"
)

// answer is one resume entry, validated against the run: the update it
// becomes and what it answers.
type answer struct {
	id     string               // the interrupt id
	open   *workflows.Interrupt // the waiting call it answers; nil: a replay
	how    string
	in     workflows.DecisionInput
	update string // the update id
	edited bool   // approve with edited arguments
}

// runErr is a refusal the run's state gives: RUN_ERROR's code and message.
type runErr struct{ code, msg string }

func (e *runErr) Error() string { return e.msg }

func failf(code, format string, args ...any) *runErr {
	return &runErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// planResume validates every entry of a resume against the run's state and
// trace, before any is applied: each names an open interrupt or one the
// trace shows decided (a replay); if any answers an open one, every open one
// is answered; none answers past its expiresAt (a cancel may); under a
// policy each carries metadata.token.
func planResume(thread string, r *request, st workflows.State, trace []workflows.TraceRecord, now time.Time) ([]answer, *runErr) {
	open := map[string]*workflows.Interrupt{}
	for i := range st.Interrupts {
		open[InterruptID(st.Interrupts[i])] = &st.Interrupts[i]
	}
	var out []answer
	answered := map[string]bool{}
	for i, e := range r.resume {
		m := interruptIDPattern.FindStringSubmatch(e.InterruptID)
		a := answer{id: e.InterruptID, open: open[e.InterruptID], update: updateID(thread, e.InterruptID, r.resumeRaw[i])}
		a.in = workflows.DecisionInput{CallID: m[1], Kind: tool.DecisionKind(m[2])}
		if a.open != nil {
			answered[e.InterruptID] = true
			a.in.ArgsDigest = a.open.ArgsDigest
			if e.Status == "resolved" && !now.Before(a.open.ExpiresAt) {
				return nil, failf("interrupt_expired", "interrupt %s expired at %s: it can no longer be answered, only cancelled (the run treats it as rejected)",
					e.InterruptID, a.open.ExpiresAt.UTC().Format(time.RFC3339))
			}
		} else {
			d, ok := decidedIn(trace, m[1], m[2], m[3])
			if !ok {
				return nil, failf("unknown_interrupt", "interrupt %s is not one this thread waits on, nor one it decided: post without resume to see what waits", e.InterruptID)
			}
			a.in.ArgsDigest = d
		}
		if err := fill(&a, e, st); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(answered) > 0 && len(answered) < len(open) {
		var missing []string
		for _, it := range st.Interrupts {
			if id := InterruptID(it); !answered[id] {
				missing = append(missing, id)
			}
		}
		return nil, failf("partial_resume", "partial resume: %d of %d open interrupts answered, nothing applied; answer %s too", len(answered), len(open), strings.Join(missing, ", "))
	}
	return out, nil
}

// fill makes the decision of entry e.
func fill(a *answer, e resumeEntry, st workflows.State) *runErr {
	md := e.Metadata
	if md == nil {
		md = &resumeMetadata{}
	}
	if st.Policy && md.Token == "" {
		return failf("unsigned", "this run's decisions must be signed: interrupt %s has no metadata.token (a decision signed by an approver of the worker's policy)", e.InterruptID)
	}
	a.in.Token, a.in.Approver = md.Token, md.Approver
	if a.in.Approver == "" && !st.Policy {
		a.in.Approver = DefaultApprover
	}
	p := e.Payload
	if p == nil {
		p = &resumePayload{}
	}
	switch {
	case e.Status == "cancelled":
		a.how, a.in.Cancel, a.in.Reason = howCancel, true, p.Reason
	case !*p.Approved:
		a.how, a.in.Reason = howReject, p.Reason
	case len(p.Response) > 0:
		a.how, a.in.Response, a.in.Note = howRespond, p.Response, p.Reason
	default:
		a.how, a.in.Note, a.in.EditedArgs, a.in.Data = howApprove, p.Reason, p.EditedArgs, p.Data
		a.edited = len(p.EditedArgs) > 0
	}
	switch {
	case len(a.in.EditedArgs) > 0 && a.in.Kind != workflows.KindGate:
		return failf("refused_answer", "interrupt %s: editedArgs approve a call held at the gate; this one is held by its tool's own question (answer it with data)", e.InterruptID)
	case len(a.in.Data) > 0 && a.in.Kind != workflows.KindInterrupt:
		return failf("refused_answer", "interrupt %s: data answers a tool's own question; this call waits at the gate (approve it, edit it or reject it)", e.InterruptID)
	}
	return nil
}

// updateID is the update id of an answer: the same thread, interrupt and
// answer (its canonical JSON) give the same id, so Temporal takes it once.
func updateID(thread, interruptID string, raw json.RawMessage) string {
	c, err := tool.Canonical(raw)
	if err != nil { // cannot be: raw was decoded strictly
		c = raw
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("agui"), []byte(thread), []byte(interruptID), c} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "agui-" + hex.EncodeToString(h.Sum(nil))
}

// decisionStatuses are the trace statuses of a human decision (or its absence).
var decisionStatuses = map[string]bool{
	workflows.TraceApproved: true, workflows.TraceEdited: true, workflows.TraceRejected: true,
	workflows.TraceCancelled: true, workflows.TraceResponded: true, workflows.TraceExpired: true,
}

// decidedIn finds, in the trace, the decision of call's interrupt of kind
// whose args_digest starts with prefix: a record that asked (blocked at the
// gate, interrupted by the tool) for those arguments, then a decision. It
// answers the full digest.
func decidedIn(trace []workflows.TraceRecord, call, kind, prefix string) (string, bool) {
	_, digest, ok := decisionFor(trace, call, kind, prefix)
	return digest, ok
}

// decisionFor is the decision record decidedIn finds, and the digest.
func decisionFor(trace []workflows.TraceRecord, call, kind, prefix string) (workflows.TraceRecord, string, bool) {
	asking := workflows.TraceBlocked
	if kind == string(workflows.KindInterrupt) {
		asking = workflows.TraceInterrupted
	}
	digest := ""
	for _, rec := range trace {
		if rec.CallID != call {
			continue
		}
		switch {
		case rec.Status == asking:
			digest = ""
			if d, err := tool.Digest(rec.Tool, rec.Args); err == nil && strings.HasPrefix(d, prefix) {
				digest = d
			}
		case digest != "" && decisionStatuses[rec.Status]:
			return rec, digest, true
		}
	}
	return workflows.TraceRecord{}, "", false
}

// applyResume sends each answer as its update. An answer the run says is
// decided already is accepted when the trace's decision is the answer's
// (a replay whose update Temporal no longer holds); any other refusal ends
// the resume, saying what was applied before it.
func (h *Handler) applyResume(ctx context.Context, wfid string, answers []answer) *runErr {
	var applied []string
	for _, a := range answers {
		var err error
		opt := client.WithUpdateID(a.update)
		if a.how == howRespond {
			_, err = h.b.Respond(ctx, wfid, a.in, opt)
		} else {
			_, err = h.b.Decide(ctx, wfid, a.how == howApprove, a.in, opt)
		}
		if err != nil && errors.Is(err, client.ErrAlreadyDecided) {
			err = h.sameDecision(ctx, wfid, a, err)
		}
		if err != nil {
			msg := fmt.Sprintf("interrupt %s: %s refused: %s", a.id, a.how, text.Clip(err.Error(), 600))
			if len(applied) > 0 {
				msg += fmt.Sprintf(" (applied before it: %s)", strings.Join(applied, ", "))
			}
			return failf(refusalCode(err), "%s", msg)
		}
		applied = append(applied, a.id)
	}
	return nil
}

// sameDecision accepts a refusal of an answer whose call the trace shows
// decided the answer's way.
func (h *Handler) sameDecision(ctx context.Context, wfid string, a answer, refusal error) error {
	trace, err := h.b.Trace(ctx, wfid)
	if err != nil {
		return fmt.Errorf("%w (and reading the trace to compare: %v)", refusal, err)
	}
	m := interruptIDPattern.FindStringSubmatch(a.id)
	rec, _, ok := decisionFor(trace, m[1], m[2], m[3])
	if !ok {
		return refusal
	}
	want := map[string][]string{
		howApprove: {workflows.TraceApproved},
		howReject:  {workflows.TraceRejected},
		howCancel:  {workflows.TraceCancelled, workflows.TraceExpired},
		howRespond: {workflows.TraceResponded},
	}[a.how]
	if a.edited {
		want = []string{workflows.TraceEdited, workflows.TraceApproved}
	}
	for _, s := range want {
		if rec.Status == s && (s != workflows.TraceApproved || !a.edited || len(rec.OriginalArgs) > 0) {
			return nil
		}
	}
	return fmt.Errorf("%w; the trace shows call %s %s, not what this answer says", refusal, m[1], rec.Status)
}

// refusalCode is RUN_ERROR's code for a refused update.
func refusalCode(err error) string {
	for _, k := range []struct {
		err  error
		code string
	}{
		{client.ErrUnauthorized, "unauthorized"}, {client.ErrDigestMismatch, "digest_mismatch"},
		{client.ErrAlreadyDecided, "already_decided"}, {client.ErrUnknownCall, "unknown_call"},
		{client.ErrEditRefused, "edit_refused"}, {client.ErrRefusedInput, "refused_answer"},
		{client.ErrUnknownRun, "no_run"}, {client.ErrRunClosed, "run_closed"}, {client.ErrBusy, "busy"},
	} {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return "backend"
}
