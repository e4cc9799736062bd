package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// quiet logs errors only.
var quiet = log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))

// queue is the test ledger's task queue.
const queue = "q"

// fix runs one ledger workflow in the test environment.
type fix struct {
	testsuite.WorkflowTestSuite
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	k   keys
	n   int
	// recovered is what RecoverActivity finds of a last run (none: a
	// ledger that never ran).
	recovered Recovery
	asked     []RecoverRequest
}

// newFix is the task queue's (home) ledger, which keeps the pauses.
func newFix(t *testing.T, guards string, perRun int) *fix {
	return newFixWith(t, newKeys(t), guards, perRun)
}

// newShard is the ledger of guard ("spend" in the tests' budget), which
// counts it.
func newShard(t *testing.T, guards, guard string, perRun int) *fix {
	f := newFix(t, guards, perRun)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ShardID(queue, guard), TaskQueue: queue})
	return f
}

// newFixWith is newFix with the approvers' keys k (guards "-": no policy).
func newFixWith(t *testing.T, k keys, guards string, perRun int) *fix {
	var p *policy.Policy
	if guards != "-" {
		p = testPolicy(t, k, guards)
	}
	return newFixPolicy(t, k, p, perRun)
}

// newFixPolicy is a ledger whose worker's policy is p.
func newFixPolicy(t *testing.T, k keys, p *policy.Policy, perRun int) *fix {
	f := &fix{t: t, k: k}
	f.SetLogger(quiet)
	f.env = f.NewTestWorkflowEnvironment()
	f.env.SetStartTime(t0)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ID(queue), TaskQueue: queue})
	Register(f.env, Config{Policy: p, UpdatesPerRun: perRun})
	f.env.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: MarkerWorkflow})
	// A ledger that never ran before: nothing to recover.
	f.env.OnActivity(RecoverActivity, mock.Anything, mock.Anything).Return(func(_ context.Context, req RecoverRequest) (Recovery, error) {
		f.asked = append(f.asked, req)
		return f.recovered, nil
	}).Maybe()
	return f
}

// at runs fn d after the start.
func (f *fix) at(d time.Duration, fn func()) { f.env.RegisterDelayedCallback(fn, d) }

// run runs the ledger with in; it ends when cancelled or continued as new.
func (f *fix) run(in Input) error {
	f.env.ExecuteWorkflow(WorkflowName, in)
	require.True(f.t, f.env.IsWorkflowCompleted())
	return f.env.GetWorkflowError()
}

// outcome is an update's outcome, filled in once it is handled.
type outcome[T any] struct {
	done     bool
	rejected bool // by the validator
	result   T
	err      error
}

func send[T any](f *fix, name string, arg any) *outcome[T] {
	out := &outcome[T]{}
	f.n++
	f.env.UpdateWorkflow(name, fmt.Sprint("u-", f.n), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { out.done, out.rejected, out.err = true, true, err },
		OnComplete: func(v any, err error) {
			out.done, out.err = true, err
			if err == nil {
				out.result = v.(T)
			}
		},
	}, arg)
	return out
}

func (f *fix) reserve(r Reservation) *outcome[Verdict] { return send[Verdict](f, UpdateReserve, r) }
func (f *fix) settle(s Settlement) *outcome[Settled]   { return send[Settled](f, UpdateSettle, s) }
func (f *fix) toggle(pause bool, tok string) *outcome[View] {
	if pause {
		return send[View](f, UpdatePause, Switch{Token: tok})
	}
	return send[View](f, UpdateUnpause, Switch{Token: tok})
}

// token signs, as name, a pause of refund for this ledger, valid ten
// minutes from the ledger's clock, as edit changes it.
func (f *fix) token(name string, edit func(*signed.Claims)) string {
	f.t.Helper()
	now := f.env.Now().Unix()
	c := signed.Claims{Approver: name, WorkflowID: ID(queue), Action: signed.ActionPause, Tool: "refund", Reason: "fraud spike",
		IssuedAt: now, Expiry: now + 600, ID: signed.NewID()}
	if edit != nil {
		edit(&c)
	}
	tok, err := signed.Sign(f.k[name], c)
	require.NoError(f.t, err)
	return tok
}

func (f *fix) view() View {
	v, err := f.env.QueryWorkflow(QueryGuards)
	require.NoError(f.t, err)
	var out View
	require.NoError(f.t, v.Get(&out))
	return out
}

// carried is the input a continue-as-new error carries.
func carried(t *testing.T, err error) Input {
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want a continue-as-new, got %v", err)
	assert.Equal(t, WorkflowName, can.WorkflowType.Name)
	var in Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	return in
}

// Runs reserve and settle by update; the validator refuses bad input.
func TestReserveAndSettleByUpdate(t *testing.T) {
	f := newShard(t, budget, "spend", 0)
	var a, b, b2 *outcome[Verdict]
	var rel *outcome[Settled]
	var bad, badSettle *outcome[Verdict]
	var view View
	f.at(time.Second, func() {
		a = f.reserve(refund("a", 4000))
		b = f.reserve(refund("b", 7000))
		bad = f.reserve(refund("", 1))
		badSettle = send[Verdict](f, UpdateSettle, Settlement{})
	})
	f.at(2*time.Second, func() {
		rel = f.settle(Settlement{Key: "a"})
		b2 = f.reserve(refund("b", 7000))
	})
	f.at(3*time.Second, func() {
		view = f.view()
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	require.True(t, a.done && b.done && rel.done && b2.done)
	assert.Equal(t, Reserved, a.result.Decide)
	assert.Equal(t, Denied, b.result.Decide)
	assert.Equal(t, "spend", b.result.Guard)
	assert.Equal(t, Settled{Found: true, Entry: keyID("a")}, rel.result)
	assert.Equal(t, Reserved, b2.result.Decide, b2.result.Reason)
	assert.True(t, bad.rejected)
	assert.ErrorContains(t, bad.err, "the reservation has no key")
	assert.True(t, badSettle.rejected)
	assert.True(t, view.Policy)
	assert.Equal(t, []ScopeView{{Scope: "all", Reserved: 7000}}, view.Guards[0].Scopes)
}

// Runs settle by signal: a commit counts the call as spent, a release
// frees it; a signal that is no settlement is dropped, and the ledger goes on.
func TestSettleBySignal(t *testing.T) {
	f := newShard(t, budget, "spend", 0)
	var view View
	var after *outcome[Verdict]
	f.at(time.Second, func() {
		f.reserve(refund("a", 4000))
		f.reserve(refund("b", 3000))
	})
	f.at(2*time.Second, func() {
		f.env.SignalWorkflow(SignalSettle, Settlement{Key: "a", Commit: true})
		f.env.SignalWorkflow(SignalSettle, Settlement{Key: "b"})
		f.env.SignalWorkflow(SignalSettle, "not a settlement")
		f.env.SignalWorkflow(SignalSettle, Settlement{})
	})
	f.at(3*time.Second, func() {
		view = f.view()
		after = f.reserve(refund("c", 6000))
	})
	f.at(4*time.Second, func() { f.env.CancelWorkflow() })
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	assert.Equal(t, []ScopeView{{Scope: "all", Committed: 4000}}, view.Guards[0].Scopes)
	assert.Equal(t, Reserved, after.result.Decide, "b's 3,000 released: 4,000 + 6,000 fits")
}

// A settlement signalled in the workflow task the ledger continues as new
// in is carried to the next run, not lost with this one.
func TestSettleSignalledAsTheLedgerContinues(t *testing.T) {
	f := newShard(t, budget, "spend", 2)
	f.at(time.Second, func() { f.reserve(refund("a", 4000)) })
	f.at(2*time.Second, func() {
		f.env.SignalWorkflow(SignalSettle, Settlement{Key: "a", Commit: true}) // the second: the run continues as new
	})
	in := carried(t, f.run(Input{}))
	require.NotNil(t, in.Carry)
	require.Len(t, in.Carry.Entries, 1)
	assert.True(t, in.Carry.Entries[0].Committed, "a's commit, signalled as the ledger closed, is carried")
}

// An operator's signed pause is taken; a token from a non-operator, for
// another workflow or act, expired or used already, is refused with why.
func TestSignedPause(t *testing.T) {
	f := newFix(t, budget, 0)
	tok := f.token("alice", nil)
	var taken, again, carol, wid, act, expired, late, long, noReason, noTool, empty *outcome[View]
	var stopped, runs, counted *outcome[Verdict]
	var unpaused *outcome[View]
	f.at(time.Second, func() {
		taken = f.toggle(true, tok)
		carol = f.toggle(true, f.token("carol", nil))
		wid = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.WorkflowID = "toolgate-ledger-other" }))
		act = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.Action = signed.ActionUnpause }))
		expired = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.IssuedAt, c.Expiry = t0.Unix()-700, t0.Unix()-100 }))
		late = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.IssuedAt += 600; c.Expiry += 600 }))
		long = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.Expiry = c.IssuedAt + 7200 }))
		noReason = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.Reason = "" }))
		noTool = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.Tool = "" }))
		empty = f.toggle(true, "")
	})
	f.at(2*time.Second, func() {
		again = f.toggle(true, tok)
		stopped = f.reserve(refund("a", 1))
	})
	f.at(3*time.Second, func() {
		unpaused = f.toggle(false, f.token("bob", func(c *signed.Claims) { c.Action = signed.ActionUnpause }))
	})
	f.at(4*time.Second, func() {
		r := refund("a", 1)
		r.PausesOnly = true
		runs = f.reserve(r)
		counted = f.reserve(refund("b", 1))
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))

	require.NoError(t, taken.err)
	require.Len(t, taken.result.Pauses, 1)
	assert.Equal(t, Pause{Tool: "refund", By: "alice", Reason: "fraud spike", At: t0.Add(time.Second)}, taken.result.Pauses[0])
	for name, o := range map[string]struct {
		out  *outcome[View]
		want string
	}{
		"carol":   {carol, `pause refused: carol is not an operator: to pause a tool needs one of the operators' roles [ops], and carol holds [finance]`},
		"wid":     {wid, `pause refused: alice's token is signed for the workflow "toolgate-ledger-other", not this ledger (toolgate-ledger-q)`},
		"act":     {act, `pause refused: alice's token is signed for the act "unpause", not pause`},
		"expired": {expired, `pause refused: token expired: token of "alice" expired at`},
		"late":    {late, `pause refused: token not yet valid`},
		"long":    {long, `longer than the 1h0m0s this worker's policy allows`},
		"reason":  {noReason, `pause refused: alice's token gives no reason`},
		"tool":    {noTool, `pause refused: alice's token names no tool`},
		"empty":   {empty, `pause refused: no token`},
		"again":   {again, `pause refused: this token was used already`},
	} {
		require.True(t, o.out.done, name)
		assert.True(t, o.out.rejected, name+": refused by the validator, before the history")
		assert.ErrorContains(t, o.out.err, o.want, name)
	}
	assert.Equal(t, Paused, stopped.result.Decide)
	assert.Contains(t, stopped.result.Reason, "refund is paused fleet-wide by alice at 2026-12-02T13:00:01Z: fraud spike")
	require.NoError(t, unpaused.err)
	assert.Empty(t, unpaused.result.Pauses)
	assert.Equal(t, Reserved, runs.result.Decide)
	assert.Empty(t, runs.result.Uses, "asked for the pauses only")
	assert.Equal(t, Denied, counted.result.Decide, "guard spend counts refunds in its own ledger: one sent here is refused")
	assert.Contains(t, counted.result.Reason, "counts guard spend in a ledger of its own now")
}

// With no policy (or one that does not compile) nobody may pause, and
// reservations only check pauses.
func TestNoPolicyNobodyPauses(t *testing.T) {
	t.Run("none", func(t *testing.T) { testNoPolicy(t, newFix(t, "-", 0)) })
	t.Run("broken", func(t *testing.T) {
		k := newKeys(t)
		p := testPolicy(t, k, budget)
		p.Guards[0].Window = "forever"
		testNoPolicy(t, newFixPolicy(t, k, p, 0))
	})
}

func testNoPolicy(t *testing.T, f *fix) {
	var p *outcome[View]
	var r *outcome[Verdict]
	var view View
	f.at(time.Second, func() {
		p = f.toggle(true, f.token("alice", nil))
		r = f.reserve(refund("a", 1))
	})
	f.at(2*time.Second, func() {
		view = f.view()
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	assert.ErrorContains(t, p.err, "pause refused: this worker has no policy, so nobody may pause a tool")
	assert.Equal(t, Reserved, r.result.Decide)
	assert.Empty(t, r.result.Uses)
	assert.False(t, view.Policy)
}

// A state given by a client's start is ignored; the ledger's own
// continue-as-new carries it.
func TestACarryIsTakenOnlyFromContinueAsNew(t *testing.T) {
	carry := &State{Pauses: []Pause{{Tool: "refund", By: "mallory", Reason: "r", At: t0}}}
	for _, continued := range []bool{false, true} {
		f := newFix(t, budget, 0)
		if continued {
			f.env.SetContinuedExecutionRunID("previous-run")
		}
		var r *outcome[Verdict]
		f.at(time.Second, func() { r = f.reserve(pausesOnly(refund("a", 1))) })
		f.at(2*time.Second, f.env.CancelWorkflow)
		require.True(t, temporal.IsCanceledError(f.run(Input{Carry: carry})))
		if continued {
			assert.Equal(t, Paused, r.result.Decide)
		} else {
			assert.Equal(t, Reserved, r.result.Decide, "a client may not give the ledger its state")
		}
	}
}

// After UpdatesPerRun updates the ledger continues as new, carrying its
// pauses and spent tokens (a guard's ledger its entries:
// TestSettleSignalledAsTheLedgerContinues); the next run refuses a token
// spent in the previous one.
func TestContinueAsNewCarriesTheState(t *testing.T) {
	f := newFix(t, budget, 3)
	tok := f.token("alice", func(c *signed.Claims) { c.Tool = "wire" })
	var late, paused *outcome[Verdict]
	f.at(time.Second, func() { f.toggle(true, tok) })
	f.at(2*time.Second, func() { paused = f.reserve(res("w", "wire", `{}`)) }) // paused: no entry
	f.at(3*time.Second, func() { f.reserve(pausesOnly(refund("k", 300))) })
	f.at(4*time.Second, func() { late = f.reserve(refund("late", 1)) })
	in := carried(t, f.run(Input{}))
	require.NotNil(t, in.Carry)
	assert.Equal(t, Paused, paused.result.Decide)
	assert.Empty(t, in.Carry.Entries, "the task queue's ledger counts no guard")
	assert.Equal(t, []Pause{{Tool: "wire", By: "alice", Reason: "fraud spike", At: t0.Add(time.Second)}}, in.Carry.Pauses)
	assert.Equal(t, []Spent{{ID: tokenID(tok), Exp: t0.Unix() + 600}}, in.Carry.Spent)
	assert.Nil(t, late, "the run ended before")

	g := newFixWith(t, f.k, budget, 0)
	g.env.SetContinuedExecutionRunID("previous-run")
	var again *outcome[View]
	var view View
	g.at(time.Second, func() {
		again = g.toggle(true, tok)
		view = g.view()
	})
	g.at(2*time.Second, g.env.CancelWorkflow)
	require.True(t, temporal.IsCanceledError(g.run(in)))
	assert.ErrorContains(t, again.err, "pause refused: this token was used already")
	assert.True(t, view.Sharded)
	assert.Equal(t, "spend", view.Guards[0].ID, "the guard is listed, its use is its own ledger's")
	assert.Empty(t, view.Guards[0].Scopes)
	assert.Len(t, view.Pauses, 1)
}

// An unpause lifts a pause of its tool only, and refuses one of a tool not
// paused (before it takes the token).
func TestUnpause(t *testing.T) {
	f := newFix(t, budget, 0)
	unpause := func(tool string) func(*signed.Claims) {
		return func(c *signed.Claims) { c.Action, c.Tool = signed.ActionUnpause, tool }
	}
	var none, wrongUpdate, all, read, write *outcome[View]
	var r1, r2 *outcome[Verdict]
	f.at(time.Second, func() {
		none = f.toggle(false, f.token("bob", unpause("refund")))
		f.toggle(true, f.token("bob", func(c *signed.Claims) { c.Tool = AllTools }))
		wrongUpdate = f.toggle(false, f.token("bob", nil))
	})
	f.at(2*time.Second, func() {
		rd := res("s", "search", `{}`)
		rd.Destructive = false
		r1 = f.reserve(rd)
		r2 = f.reserve(res("c", "close", `{}`))
		read = f.toggle(false, f.token("carol", unpause(AllTools)))
	})
	f.at(3*time.Second, func() { all = f.toggle(false, f.token("alice", unpause(AllTools))) })
	f.at(4*time.Second, func() {
		write = f.toggle(false, f.token("alice", unpause(AllTools)))
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	assert.ErrorContains(t, none.err, "unpause refused: refund is not paused")
	assert.ErrorContains(t, wrongUpdate.err, `unpause refused: bob's token is signed for the act "pause", not unpause`)
	assert.Equal(t, Reserved, r1.result.Decide)
	assert.Equal(t, Paused, r2.result.Decide)
	assert.Contains(t, r2.result.Reason, "every destructive tool is paused fleet-wide by bob")
	assert.ErrorContains(t, read.err, "unpause refused: carol is not an operator")
	require.NoError(t, all.err)
	assert.Empty(t, all.result.Pauses)
	assert.ErrorContains(t, write.err, "unpause refused: every destructive tool (*) is not paused")
}

// A token's use is claimed on the server: a second claim of it is refused,
// whatever the ledger's state remembers.
func TestAClaimIsRecordedOnTheServer(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quiet)
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: MarkerWorkflow})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		l := &ledger{claiming: map[string]bool{}}
		if err := l.claim(ctx, "abc"); err != nil {
			return "", err
		}
		err := l.claim(ctx, "abc")
		if err == nil {
			return "", errors.New("claimed twice")
		}
		return err.Error(), nil
	}, workflow.RegisterOptions{Name: "claim-twice"})
	env.ExecuteWorkflow("claim-twice")
	require.NoError(t, env.GetWorkflowError())
	var msg string
	require.NoError(t, env.GetWorkflowResult(&msg))
	assert.Contains(t, msg, "this token was used already: its use is recorded on the server (workflow toolgate-spent-abc)")
}

// While it continues as new the ledger refuses updates with ClosingError
// (the caller sends them again, to the next run); those it accepted are
// handled first.
func TestClosingRefusesUpdates(t *testing.T) {
	f := newFix(t, budget, 1)
	var p *outcome[View]
	var b *outcome[Verdict]
	f.at(time.Second, func() {
		p = f.toggle(true, f.token("alice", func(c *signed.Claims) { c.Tool = "wire" })) // waits for its claim
		b = f.reserve(refund("b", 1))
	})
	in := carried(t, f.run(Input{}))
	require.True(t, p.done && b.done)
	require.NoError(t, p.err, "accepted before: handled before the run ends")
	assert.Len(t, in.Carry.Pauses, 1)
	assert.True(t, b.rejected)
	assert.True(t, isClosing(b.err), "%v", b.err)
	assert.Empty(t, in.Carry.Entries)
}

// A settlement is taken only from the run that reserved the call: a
// release named for another run frees nothing, a commit from the run that
// reserved it is taken (and a later release of it changes nothing).
func TestASettlementIsTakenOnlyFromTheRunThatReserved(t *testing.T) {
	f := newShard(t, budget, "spend", 0)
	var forged, own, late *outcome[Settled]
	var view View
	f.at(time.Second, func() {
		r := refund("a", 4000)
		r.Workflow = "run-1"
		f.reserve(r)
	})
	f.at(2*time.Second, func() {
		forged = f.settle(Settlement{Key: "a", Workflow: "attacker"})
		f.env.SignalWorkflow(SignalSettle, Settlement{Key: "a", Workflow: "attacker"})
	})
	f.at(3*time.Second, func() { own = f.settle(Settlement{Key: "a", Commit: true, Workflow: "run-1"}) })
	f.at(4*time.Second, func() { late = f.settle(Settlement{Key: "a", Workflow: "run-1"}) })
	f.at(5*time.Second, func() {
		view = f.view()
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	assert.Contains(t, forged.result.Refused, "another run")
	assert.Equal(t, Settled{Found: true, Committed: true, Entry: keyID("a")}, own.result)
	assert.True(t, late.result.Committed, "a call that ran stays spent")
	assert.Equal(t, []ScopeView{{Scope: "all", Committed: 4000}}, view.Guards[0].Scopes)
}

// A ledger started anew after its last run closed (terminated, say) goes
// on from that run's state: the task queue's its pauses, a guard's its
// reservations, never an empty book.
func TestALedgerStartedAnewGoesOnFromItsLastRun(t *testing.T) {
	last := &State{
		Entries: []Entry{{Key: keyID("old"), At: t0.UnixMilli(), Holds: []Hold{{Guard: "spend", Scope: "all", Amount: 9000}}, Committed: true}},
		Pauses:  []Pause{{Tool: AllTools, By: "bob", Reason: "incident", At: t0}},
	}
	for _, f := range []*fix{newFix(t, budget, 0), newShard(t, budget, "spend", 0)} {
		f.recovered = Recovery{From: "r0", Status: "Terminated", State: last}
		var r *outcome[Verdict]
		var view View
		f.at(time.Second, func() { r = f.reserve(refund("new", 2000)) })
		f.at(2*time.Second, func() {
			view = f.view()
			f.env.CancelWorkflow()
		})
		require.True(t, temporal.IsCanceledError(f.run(Input{})))
		require.Len(t, f.asked, 1)
		if f.asked[0].Home == "" { // the task queue's ledger
			require.Len(t, view.Pauses, 1, "the pause of the terminated run holds")
			assert.Equal(t, Paused, r.result.Decide)
			continue
		}
		assert.Equal(t, ID(queue), f.asked[0].Home)
		assert.Equal(t, Denied, r.result.Decide, "9,000 spent before: 2,000 more passes the limit")
		assert.Equal(t, []ScopeView{{Scope: "all", Committed: 9000}}, view.Guards[0].Scopes)
	}
}

// pausesOnly is r asking the task queue's ledger for the pauses only.
func pausesOnly(r Reservation) Reservation {
	r.PausesOnly = true
	return r
}
