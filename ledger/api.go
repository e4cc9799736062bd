// Package ledger is toolgate's fleet ledger: long-lived workflows that hold
// what every run of a task queue has reserved and spent under the policy's
// guards (budgets, rate limits, repeat limits), one per guard, and the
// pauses operators have put on tools (the kill switch), in the task queue's
// own (shard.go). They live outside every run, so no run, rewind, fork or
// restart rolls them back; each continues as new, carrying its state,
// before its history grows long.
//
// A run reserves a call with the reserve update (ReserveActivity, a local
// activity), keyed by the call's idempotency key, and settles it: commit
// (the call ran), carried by its next reservation or signalled, or release
// (it was rejected, expired, failed or answered from the memo), signalled
// (SignalSettle). Entries are kept by the key's digest, so a retried,
// rewound or re-approved call counts once, across the ledger's
// continue-as-new too. The settle update (SettleActivity) is there for
// callers that want the ledger's answer.
package ledger

import (
	"context"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/policy"
)

// Names programs rely on.
const (
	// WorkflowName is the ledger's workflow type.
	WorkflowName = "ToolgateLedger"
	// IDPrefix starts a ledger's workflow id: IDPrefix + the task queue (ID).
	IDPrefix = "toolgate-ledger-"

	UpdateReserve = "reserve" // Reservation → Verdict
	UpdateSettle  = "settle"  // Settlement → Settled
	// SignalSettle is how a run settles (Settlement): a signal, so the run
	// does not wait for the ledger; the ledger settles a key once.
	SignalSettle  = "settle"
	UpdatePause   = "pause"   // Switch → View (a signed pause)
	UpdateUnpause = "unpause" // Switch → View (a signed unpause)
	QueryGuards   = "guards"  // → View
	// QueryState answers the ledger's whole State: a ledger started anew
	// after its last run closed (terminated, say) rebuilds its state from
	// it (RecoverActivity) before it answers anyone.
	QueryState = "state"

	// PolicyActivity is the local activity a ledger run starts with: it
	// returns the worker's policy, recorded in the ledger's history.
	PolicyActivity = "toolgate.ledger.policy"
	// ReserveActivity calls the ledger with the reserve update
	// (UpdateWithStart: the first starts the ledger); SettleActivity
	// signals it a settlement (SignalSettle), naming the run it serves. A
	// run calls both as local activities (before rules version 12 it
	// settled by a signal of its own).
	ReserveActivity = "toolgate.ledger.reserve"
	SettleActivity  = "toolgate.ledger.settle"
	// RecoverActivity is the local activity a ledger started anew (not
	// continued) begins with: it reads the state of the ledger's last run
	// when that run closed otherwise than by continuing as new.
	RecoverActivity = "toolgate.ledger.recover"
	// ActWorkflow carries an operator's signed pause or unpause (Act) from
	// a client of the runs to a worker of the task queue, which sends it to
	// the ledger (ActActivity, a local activity): a person needs no
	// credential for the authority namespace, and the ledger checks the
	// signature and takes a token once.
	ActWorkflow = "toolgate.ledger.act"
	ActActivity = "toolgate.ledger.act"

	// ClosingError is the type of the error a ledger run refuses an update
	// with while it continues as new: the caller tries again, and reaches
	// the next run.
	ClosingError = "ToolgateLedgerClosing"

	// AllTools is the tool of a pause of every destructive tool.
	AllTools = "*"
)

// Stages a call reserves at (Reservation.Stage).
const (
	StageGate    = "gate"    // when the call is proposed
	StageDecided = "decided" // when a human has decided it: checked again
)

// What the ledger decides of a reservation (Verdict.Decide).
const (
	Reserved = "reserved" // the call counts; it may go on
	Denied   = "denied"   // a guard's limit is reached (exceed deny), or the amount could not be counted
	Ask      = "ask"      // a guard's limit is reached (exceed ask): the call needs Need's approval
	Paused   = "paused"   // the tool is paused fleet-wide
)

// Bounds on what a ledger keeps.
const (
	MaxEntries    = 4096 // reservations held within the guards' windows
	MaxPauses     = 256  // tools paused at once
	MaxSpent      = 1024 // signed pauses and unpauses remembered until they expire
	MaxKeyBytes   = 1024 // bytes of a reservation's key
	MaxArgsBytes  = 16 << 10
	MaxReasonSize = 500 // bytes of a pause's reason
	MaxCommits    = 64  // commits one reservation carries (Reservation.Commits)
	// UpdatesPerRun is how many updates a ledger run takes before it
	// continues as new (Config.UpdatesPerRun overrides it).
	UpdatesPerRun = 1000
)

// EntryOf is the digest a ledger keeps a reservation's key by (Entry.Key,
// Verdict.Entry): the first 16 bytes of its SHA-256, in hex.
func EntryOf(key string) string { return keyID(key) }

// ID is the workflow id of the ledger of a task queue.
func ID(taskQueue string) string { return IDPrefix + taskQueue }

// Reservation is one call, as a run reserves it.
type Reservation struct {
	// Key is the call's idempotency key (tool.Request.IdempotencyKey): the
	// ledger keeps the call by its digest, so the same key counts once.
	Key         string          `json:"key"`
	Workflow    string          `json:"workflow"` // the run's workflow id (per: run)
	CallID      string          `json:"call"`
	Tool        string          `json:"tool"`
	Destructive bool            `json:"destructive,omitempty"`
	Args        json.RawMessage `json:"args"`   // canonical JSON object
	Digest      string          `json:"digest"` // tool.Digest of the call (repeat)
	RequestedBy string          `json:"requested_by,omitempty"`
	Stage       string          `json:"stage"`
	// Over is the id of a guard (exceed ask) whose approvers let this call
	// past its limit: that guard counts the call even over its limit.
	Over string `json:"over,omitempty"`
	// Commits are the run's earlier calls that have run, committed before
	// this call is decided (at most MaxCommits): a commit changes no sum
	// (a call counts reserved or committed alike), so a run need not send
	// it apart.
	Commits []string `json:"commits,omitempty"`
	// Lessee and Return: the worker's lease gives back Return before the
	// ledger counts the call (lease.go), so a worker's unspent slice never
	// stands in the way of its own call near a limit.
	Lessee string `json:"lessee,omitempty"`
	Return []Hold `json:"return,omitempty"`
	// PausesOnly asks the home ledger whether a pause stops the call, and
	// nothing else: a worker whose lease of the home ledger is not fresh
	// asks it so (shard.go); the call's guards count it in their own
	// ledgers.
	PausesOnly bool `json:"pauses_only,omitempty"`
}

// Verdict is the ledger's answer to a reservation.
type Verdict struct {
	Decide string `json:"decide"`
	Guard  string `json:"guard,omitempty"`  // the guard that denies or asks
	Reason string `json:"reason,omitempty"` // why it is denied, asked or paused: told to the planner
	// Need (Ask) is who may let the call past the guard.
	Need *policy.Approvers `json:"need,omitempty"`
	// Pause (Paused) is the pause that stops the call.
	Pause *Pause `json:"pause,omitempty"`
	// Uses are what the call counts toward, guard by guard.
	Uses []Use `json:"uses,omitempty"`
	// Again: the key was reserved before; the call counts once.
	Again bool `json:"again,omitempty"`
	// Committed: the key was committed before (the call ran).
	Committed bool `json:"committed,omitempty"`
	// Call, Tool and Stage name the reservation answered, and Entry the
	// digest of its key the ledger keeps it by: the run's history holds the
	// answer (a local activity's marker holds no input), for the audit.
	Call  string `json:"call,omitempty"`
	Tool  string `json:"tool,omitempty"`
	Stage string `json:"stage,omitempty"`
	Entry string `json:"entry,omitempty"`
	// Commits are the entries of the reservation's Commits, committed.
	Commits []string `json:"commits,omitempty"`
}

// Use is what one call counts toward one guard.
type Use struct {
	Guard  string `json:"guard"`
	Scope  string `json:"scope"`  // "all", "tool:refund", "requester:alice", "run:WID"
	Amount int64  `json:"amount"` // the call's amount (1 for a rate or repeat)
	Sum    int64  `json:"sum"`    // the scope's sum within the window, this call included
	Limit  int64  `json:"limit"`
}

// Settlement ends a reservation: Commit when the call ran, else release.
type Settlement struct {
	Key    string `json:"key"`
	Commit bool   `json:"commit,omitempty"`
	// Workflow is the workflow id of the run that settles: SettleActivity
	// sets it from its own activity info, whatever the run passed. A
	// settlement that names a run is taken only for a reservation of that
	// run (Settled.Refused).
	Workflow string `json:"workflow,omitempty"`
	// Tool and Destructive name the call settled, so that the settlement
	// reaches the ledgers of the guards that counted it (shard.go). A
	// settlement naming no tool is sent to every guard's ledger.
	Tool        string `json:"tool,omitempty"`
	Destructive bool   `json:"destructive,omitempty"`
}

// Settled is what a settlement found.
type Settled struct {
	Found     bool   `json:"found"`           // the key was reserved (within the windows)
	Committed bool   `json:"committed"`       // it is committed now
	Entry     string `json:"entry,omitempty"` // the digest of the key settled (Verdict.Entry)
	// Refused says why the settlement changed nothing: it names a run
	// other than the one that reserved the call.
	Refused string `json:"refused,omitempty"`
}

// Act is an operator's signed pause (Pause) or unpause, sent through
// ActWorkflow to the ledger of the task queue the act runs on.
type Act struct {
	Pause bool   `json:"pause"`
	Token string `json:"token"`
}

// Switch is a signed pause or unpause (signed.ActionPause,
// signed.ActionUnpause): the token's WorkflowID is the ledger's id, its
// Tool the tool (AllTools: every destructive tool), its Reason why.
type Switch struct {
	Token string `json:"token"`
}

// Pause is one tool paused fleet-wide.
type Pause struct {
	Tool   string    `json:"tool"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// View is what the guards query answers: each guard's use, and the pauses.
type View struct {
	Guards  []GuardView `json:"guards"`
	Pauses  []Pause     `json:"pauses"`
	Entries int         `json:"entries"` // reservations held
	Leases  int         `json:"leases"`  // workers holding leases (lease.go)
	// Unseen are the workers holding leases that have not renewed since
	// the latest pause was made: they have not been told of it yet (they
	// are, within a second, or their lease lapses).
	Unseen []string `json:"unseen,omitempty"`
	Policy bool     `json:"policy"` // the ledger has loaded a policy
	// Sharded: the home ledger lists its guards with no use; each guard's
	// ledger (ShardID) holds its use, which Guards gathers.
	Sharded bool `json:"sharded,omitempty"`
}

// GuardView is one guard and its use within its window, per scope.
type GuardView struct {
	ID     string      `json:"id"`
	Kind   string      `json:"kind"`
	Limit  int64       `json:"limit"`
	Window string      `json:"window"`
	Per    string      `json:"per"`
	Exceed string      `json:"exceed"`
	Scopes []ScopeView `json:"scopes,omitempty"`
}

// ScopeView is one scope's use of a guard within the window: committed
// (spent, under a lease or not), reserved with the ledger (not yet
// settled), and leased (held by workers' leases: reserved by their calls,
// or granted and not yet spent).
type ScopeView struct {
	Scope     string `json:"scope"`
	Committed int64  `json:"committed"`
	Reserved  int64  `json:"reserved"`
	Leased    int64  `json:"leased,omitempty"`
}

// Input is a ledger run's input: empty when it starts; Carry is the state
// its previous run continued as new with (refused from any client's start).
type Input struct {
	Carry *State `json:"carry,omitempty"`
}

// State is what a ledger carries across continue-as-new.
type State struct {
	Entries []Entry `json:"e,omitempty"`
	Pauses  []Pause `json:"p,omitempty"`
	Spent   []Spent `json:"s,omitempty"`
	// Leases are the workers' leases, and Used what they spent (lease.go).
	Leases []Lease `json:"l,omitempty"`
	Used   []Used  `json:"u,omitempty"`
}

// Entry is one reserved call.
type Entry struct {
	Key       string `json:"k"`           // hex SHA-256 (first 16 bytes) of the reservation's key
	At        int64  `json:"t"`           // when it was first reserved, Unix milliseconds of the ledger's clock
	Digest    string `json:"d,omitempty"` // first 16 hex of the call's digest (repeat)
	Holds     []Hold `json:"h"`
	Committed bool   `json:"c,omitempty"`
	Released  bool   `json:"r,omitempty"`
	// Run is the digest (as Key) of the workflow id of the run that
	// reserved it: a settlement from another run is refused.
	Run string `json:"w,omitempty"`
}

// Hold is what an entry counts toward one guard.
type Hold struct {
	Guard  string `json:"g"`
	Scope  string `json:"s"`
	Amount int64  `json:"a"`
}

// Spent is a signed switch the ledger has taken: its id, until it expires.
type Spent struct {
	ID  string `json:"id"`
	Exp int64  `json:"exp"`
}

// Config is what a ledger needs of the worker it runs on.
type Config struct {
	// Policy is the worker's policy (nil: no guards, and nobody may pause).
	Policy *policy.Policy
	// UpdatesPerRun overrides UpdatesPerRun (tests make it small).
	UpdatesPerRun int
	// Backend, when set, answers ReserveActivity and SettleActivity in the
	// ledger workflow's place (a Memory, in unit tests of runs).
	Backend Backend
	// Tools are the tools the worker of the queue has — its own and those
	// it schedules on other task queues — which an operator may pause: a
	// pause of any other is refused before it reaches the ledger, naming
	// them (a misspelt tool paused would stop nothing). nil: any.
	Tools []string
	// Client reaches the ledgers: a client of the authority namespace
	// (package authority), where only workers write. nil: the activity's
	// own client, the runs' namespace.
	Client client.Client
}

// Backend is what answers a run's reservations and settlements: the ledger
// workflow (through the activities Register registers), or a Memory.
type Backend interface {
	Reserve(ctx context.Context, r Reservation) (Verdict, error)
	Settle(ctx context.Context, s Settlement) (Settled, error)
}

// PauseSource is a Backend that also tells a worker the pauses of a task
// queue's ledger (ReadPauses, in process): the worker checks them where a
// call is about to run.
type PauseSource interface {
	Pauses(ctx context.Context, taskQueue string) ([]Pause, error)
}
