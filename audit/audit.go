// Package audit lists every decision an exported AgentRun history holds —
// who made it, under which rule, and whether it is proven to be theirs — so
// an auditor can re-verify a run's decisions from its history alone, without
// the Temporal server or the worker.
//
// A history is JSON as `temporal workflow show --output json` writes it (and
// the files under testsuite/histories). The decisions in it are:
//
//   - the signed start (RunInput.request_token, in WorkflowExecutionStarted);
//   - approve and reject, sent as updates (WorkflowExecutionUpdateAccepted,
//     with the outcome from WorkflowExecutionUpdateCompleted) or as signals
//     (WorkflowExecutionSignaled);
//   - grant and revoke updates;
//   - a rewind (rules version 7): the rewound signal's note, under a policy
//     an operator's signed rewind, tied to the reset (WorkflowTaskFailed of
//     cause RESET_WORKFLOW) the run's history holds; a reset no verified
//     note follows is listed as unattributed (KindReset);
//   - a fork's start (RunInput.fork), under a policy an operator's signed
//     request_token of act fork over its whole input;
//   - the decisions the run's policy took by itself, from the trace in the
//     run's result (WorkflowExecutionCompleted): calls allowed or denied by a
//     rule ("rule:<id>") and calls let through by a grant ("grant:<name>").
//
// Each signed token is verified with signed.Verify against the key the
// policy declares for its approver (sub), and checked to be for this
// workflow id, for the action it came as, and — for approve and reject — for
// the call (and, when the payload names them, the approver and the
// args_digest) it was sent with; a start's input_digest must be its input's
// (rules version 5 and later; before, its goal_digest the goal's SHA-256),
// and a fork's always. A rewind's and a fork's signer must hold one of the
// policy's operators roles (policy.Policy.Operator), and a rewind's token
// must sign the note's call, base run and preview. A rule decision is checked by evaluating the policy's rules again
// on the call's recorded arguments; a grant's use by finding the verified,
// applied grant it relies on.
//
// Then what ran is tied to what was approved (Execution): every call the run
// executed that needed a decision — a call of a tool its recorded specs
// declare destructive, with the arguments of its ActivityTaskScheduled
// event (a local activity's marker records none: the trace's) — must match
// the verified approvals that sign its digest with the quorum the rules ask,
// or the rule that allows it (evaluated as the run's rules version did), or
// the grant whose condition it meets; without a policy, the approval's
// args_digest.
//
// The policy is the one the run was held to, recorded in its history (the
// result of the toolgate.config local activity, a LocalActivity marker),
// unless the caller passes one kept independently: a history whose recorded
// policy was swapped along with the tokens then fails against it, and a run
// that recorded another policy than the one given is named
// (Report.PolicyDiffers). Without one kept apart, the audit cannot vouch for
// the policy it verifies against (Report.Notes says so): whoever answered
// the run's first workflow task recorded it, and whoever can rewrite the
// history can rewrite the policy and keys it records too.
//
// Then who wrote the events that give a run its results and rules, by the
// server's word (principals.go): every workflow task answered, activity
// closed, reset, termination and versioning change must carry the
// principal of a worker or of the server itself (Report.Writers,
// Report.Unvouched). A history no event of which carries a principal (a
// server without principal attribution) cannot be checked so, and
// Report.Notes says so.
//
// Read from the server (Runs, with WithRewindRecords), each reset is also
// checked against the record the worker that carried out the rewind made in
// the authority namespace (rules version 14): a reset no record covers is
// named. Namespace audits a whole namespace by the same principals: in the
// authority namespace, which only workers write, every event a call wrote
// must be a worker's or the server's.
//
// Time validity (iat, exp) is NOT checked: tokens expire minutes after they
// are signed, and what matters is that the run accepted them when they were
// valid, which it checked with its own clock (a refused update leaves no
// event, or a failed outcome). Applied says what the run did with each.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Entry kinds.
const (
	KindStart    = signed.ActionStart   // a signed start (request_token)
	KindApprove  = signed.ActionApprove // a signed approval
	KindReject   = signed.ActionReject  // a signed rejection (or cancellation)
	KindRespond  = signed.ActionRespond // a signed answer in the tool's place
	KindGrant    = signed.ActionGrant   // a signed grant
	KindRevoke   = signed.ActionRevoke  // a signed revocation of a grant
	KindRewind   = signed.ActionRewind  // an operator's rewind of the run (its rewound note)
	KindFork     = signed.ActionFork    // an operator's fork: the run's start, as a fork of another
	KindReset    = "reset"              // a reset of the run no verified rewind note follows: unattributed
	KindRule     = "rule"               // a call allowed or denied by a rule of the policy
	KindGrantUse = "grant-use"          // a call let through by a grant
	KindUnsigned = "unsigned"           // an approve or reject without a token
	// KindWithdraw is a withdrawal: the caller that proposed a call took it
	// back before it ran. It is never signed and never verified, and never a
	// failure: it stops a call and authorizes nothing (the executions check
	// still finds any call that ran without an approval).
	KindWithdraw = "withdraw"
)

// How a decision reached the run.
const (
	ViaUpdate = "update"
	ViaSignal = "signal"
	ViaStart  = "start"
	ViaTrace  = "trace" // taken by the run itself; found in its trace
	ViaReset  = "reset" // the reset's WorkflowTaskFailed event (cause RESET_WORKFLOW)
)

// ProblemUnsigned is the Problem of an unsigned decision of a run without a
// policy.
const ProblemUnsigned = "unsigned (the worker had no policy)"

// Entry is one decision.
type Entry struct {
	At      time.Time // the event's time (for trace entries, the trace record's)
	EventID int64
	Kind    string // KindStart … KindUnsigned
	Via     string // ViaUpdate | ViaSignal | ViaStart | ViaTrace | ViaReset
	CallID  string
	Tool    string // trace entries and grants
	// Approver is the token's sub (as claimed: see Verified), or for an
	// unsigned decision the payload's approver (an unsigned rewind note's
	// by), or "rule:<id>" / "grant:<name>" from the trace.
	Approver string
	Rule     string // the rule that asked for (or took) the decision, from the trace
	// Digest is the args_digest the token signs (trace entries: the
	// call's; a rewind: the digest of the preview it was made from).
	Digest string
	// EditedDigest is set when an approval edited the call's arguments: the
	// digest of the arguments approved instead.
	EditedDigest string
	// Result is what the run answered: approved, counted (a quorum not met
	// yet), rejected, a grant's id, allow or deny (rules), or "refused: …".
	Result string
	// Applied: the update completed without failure; signals and trace
	// entries: true; a start: the run did not refuse it.
	Applied bool
	// Verified: the signature verifies with the policy's key for the
	// approver and the token is for this run, action and call (rules: the
	// policy's rules decide the same; grant uses: a verified grant precedes).
	Verified bool
	Problem  string // why not Verified
	// Channel is the channel of a decision by link ("slack", "email"): its
	// token is signed by the policy's via_key, for an approver whose via
	// names that channel, not by the approver's own key.
	Channel string
	// Unsigned: a rewind note or a fork that came without a token (an
	// approve or reject without one is KindUnsigned).
	Unsigned bool
}

// Signed says whether the entry is a signed decision (one carrying a token).
func (e Entry) Signed() bool {
	switch e.Kind {
	case KindStart, KindApprove, KindReject, KindRespond, KindGrant, KindRevoke:
		return true
	case KindRewind, KindFork:
		return !e.Unsigned
	}
	return false
}

// Report is the audit of one history.
type Report struct {
	WorkflowID string
	RunID      string
	// Policy is the policy the decisions were verified against; nil if the
	// history records none and none was given.
	Policy *policy.Policy
	// PolicyFrom is "history" (recorded in the run's toolgate.config
	// marker), "given" (History's pol), or what the caller sets (a file).
	PolicyFrom string
	// Recorded: the history records a policy (the run was held to one).
	Recorded bool
	Entries  []Entry
	// Executions are the calls the run executed that needed a decision, each
	// matched to the approval, rule or grant that let it run (Execution).
	Executions []Execution
	// Version is the run's rules version (its GetVersion marker); -1 for a
	// run from before there was one.
	Version int
	// PolicyDiffers, when a policy was given, says how the policy the run
	// recorded differs from it (policydiff.go): the run was not
	// held to the given policy. Empty: the same, or none given.
	PolicyDiffers []string
	// Principals: some event of the history carries a principal — the
	// server attributed the events it wrote (principals.go). Without, the
	// writers cannot be checked and Notes says so.
	Principals bool
	// Writers are the events whose writer matters (workflow tasks answered,
	// activities closed, resets, terminations, versioning overrides), each
	// with the principal the server stamped on it; none when no event
	// carries a principal.
	Writers []Writer
	// Notes say what the audit could not see (a run that continued as new,
	// one that has not closed, a trace that dropped records, a server that
	// recorded no principals), and how far its proof goes.
	Notes []string
}

// Mismatches lists the executions that fail the audit: what ran is not what
// was approved (or allowed by a rule, or let through by a grant), or
// nothing let it run. An execution the history cannot tie either way
// (Unbound) is no failure.
func (r Report) Mismatches() []Execution {
	var out []Execution
	for _, x := range r.Executions {
		if !x.Matched && !x.Unbound {
			out = append(out, x)
		}
	}
	return out
}

// Failed lists the entries that fail the audit: signed decisions (rewinds
// and forks too) that do not verify, rule and grant decisions the policy
// does not back, an unsigned update, rewind note or fork a run under a
// policy applied, and under a policy a reset no verified rewind note
// follows. Unsigned decisions and resets of a run without a policy are not
// failures: nothing could authenticate them; nor is a withdrawal.
func (r Report) Failed() []Entry {
	var out []Entry
	for _, e := range r.Entries {
		if e.Verified {
			continue
		}
		if e.Kind == KindWithdraw {
			continue
		}
		if e.Kind == KindUnsigned && !(r.Recorded && e.Applied && e.Via == ViaUpdate) {
			continue
		}
		if e.Unsigned && !(r.Recorded && e.Applied) {
			continue // a run under a policy refuses it; an unattributed reset (KindReset) fails instead
		}
		if e.Kind == KindReset && !r.Recorded {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Unverified counts the entries that are not verified (unsigned ones too).
func (r Report) Unverified() int {
	n := 0
	for _, e := range r.Entries {
		if !e.Verified {
			n++
		}
	}
	return n
}

// Option configures an audit.
type Option func(*options)

type options struct {
	keyring *encryption.Keyring
	records RecordReader
}

// RecordReader reads the record a worker made, in the authority namespace,
// of the rewind whose reset id is reset (workflows.RewindRecordPrefix +
// reset): authority.ErrNoRecord when there is none.
type RecordReader func(reset string) (workflows.RewindRecord, error)

// WithRewindRecords checks every reset a history holds against the record
// a worker made of it in the authority namespace (read), and names each
// reset no record covers: a reset anyone but a worker carrying out an
// operator's rewind made.
func WithRewindRecords(read RecordReader) Option { return func(o *options) { o.records = read } }

// WithKeyring decrypts the payloads of a history written by workers with an
// encryption key file before auditing it. A history with a payload under a
// key k lacks, or any encrypted payload when no keyring is given, is refused
// before it is read, naming the key.
func WithKeyring(k *encryption.Keyring) Option { return func(o *options) { o.keyring = k } }

// File audits the history in the file at path (see History).
func File(path string, pol *policy.Policy, opts ...Option) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	return History(f, pol, opts...)
}

// History audits one exported history. pol is the policy to verify against;
// nil: the policy recorded in the history (Report.PolicyFrom says which).
func History(r io.Reader, pol *policy.Policy, opts ...Option) (Report, error) {
	hist, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		return Report{}, fmt.Errorf("reading the history: %w", err)
	}
	return Events(hist, pol, opts...)
}

// Events audits one run's history as the server gives it (see History).
func Events(hist *historypb.History, pol *policy.Policy, opts ...Option) (Report, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if err := encryption.Decrypt(context.Background(), hist, o.keyring); err != nil {
		return Report{}, err
	}
	evs := hist.GetEvents()
	if len(evs) == 0 || evs[0].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		return Report{}, errors.New("not a run's history: it does not start with WorkflowExecutionStarted")
	}
	a := &auditor{pol: pol, version: -1, updates: map[string]int{}, inputs: map[int]decisionPayload{}, claims: map[int]signed.Claims{},
		notifies: map[int64]workflows.Notification{}, events: evs, signedResets: map[int64]string{}, configAt: -1, records: o.records}
	a.rep.Version = -1
	a.rep.PolicyFrom = "given"
	if pol == nil {
		a.rep.PolicyFrom = "history"
	}
	start := evs[0].GetWorkflowExecutionStartedEventAttributes()
	a.rep.WorkflowID = start.GetWorkflowId()
	a.rep.RunID = start.GetOriginalExecutionRunId()
	for _, ev := range evs {
		if err := a.event(ev); err != nil {
			return Report{}, fmt.Errorf("event %d (%s): %w", ev.GetEventId(), ev.GetEventType(), err)
		}
	}
	a.finish()
	if pol != nil && a.config != nil {
		a.rep.PolicyDiffers = policyDiff(a.config.Policy, pol)
	}
	if pol == nil {
		a.rep.Notes = append([]string{a.selfConsistent()}, a.rep.Notes...)
	}
	return a.rep, nil
}

// NoteUnvouchedPolicy begins the note of an audit against the policy the run
// recorded (no policy given): it cannot vouch for that policy.
const NoteUnvouchedPolicy = "signatures were checked against the policy the run recorded, which this audit cannot vouch for"

// selfConsistent says how far an audit against the history's own record
// goes: only as far as that record is the real one.
func (a *auditor) selfConsistent() string {
	if !a.rep.Recorded {
		return "the run had no policy: its approvals are unauthenticated, and matching what ran to them proves the history consistent with itself only: " +
			"whoever can rewrite the history can rewrite the approvals along with what ran"
	}
	who := "whoever answered the run's first workflow task"
	if a.continued {
		who = "whoever answered the first workflow task of the run it continued"
	}
	if ev := a.eventByID(a.configAt); ev != nil && ev.GetPrincipal() != nil {
		who += fmt.Sprintf(" (here %s, by the server's word)", principalWords(ev.GetPrincipal()))
	}
	return NoteUnvouchedPolicy + ": " + who + " wrote it — anyone who can poll the run's task queue, with a worker of their own, could have recorded " +
		"a policy that gives an approver a key of theirs — and whoever can rewrite the exported history can rewrite it too. " +
		"To check against the real one: toolgate audit HISTORY.json --policy FILE, with the policy file your workers load"
}

// eventByID is the history's event of id, nil if none.
func (a *auditor) eventByID(id int64) *historypb.HistoryEvent {
	for _, ev := range a.events {
		if ev.GetEventId() == id {
			return ev
		}
	}
	return nil
}
