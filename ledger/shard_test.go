package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
)

// twoGuards are a budget and a rate over refunds, and a repeat limit over
// every destructive tool.
const twoGuards = budget + `  - {id: pace, kind: rate, tools: [refund], limit: 100, window: 1m}
  - {id: again, kind: repeat, limit: 3, window: 1h}
`

// A ledger's id says which guard it counts; a call's guards are those that
// cover its tool, in the policy's order.
func TestAShardIsNamedByItsGuard(t *testing.T) {
	assert.Equal(t, "toolgate-ledger-q", ShardID(queue, ""))
	assert.Equal(t, "toolgate-ledger-q/guard/spend", ShardID(queue, "spend"))
	assert.Equal(t, "spend", shardOf(ShardID(queue, "spend"), queue))
	assert.Empty(t, shardOf(ID(queue), queue))
	assert.Empty(t, shardOf(ShardID("other", "spend"), queue), "a ledger of another task queue's name is no shard of this one")
	b := newBook(t, twoGuards)
	assert.Equal(t, []string{"spend", "pace", "again"}, coveringGuards(b.eng, "refund", true))
	assert.Equal(t, []string{"again"}, coveringGuards(b.eng, "close", true))
	assert.Empty(t, coveringGuards(b.eng, "search", false))
	assert.Empty(t, coveringGuards(nil, "refund", true))
}

// What a guard's ledger takes of another ledger's state is its guard's
// entries, leases and spent slices: no other guard's, no pause, no token.
func TestAShardTakesOnlyItsGuardOfAState(t *testing.T) {
	st := State{
		Entries: []Entry{
			{Key: "a", Holds: []Hold{{Guard: "spend", Scope: "all", Amount: 5}, {Guard: "pace", Scope: "all", Amount: 1}}},
			{Key: "b", Holds: []Hold{{Guard: "again", Scope: "all", Amount: 1}}},
		},
		Pauses: []Pause{{Tool: "refund", By: "alice", Reason: "r"}},
		Spent:  []Spent{{ID: "t", Exp: 1}},
		Leases: []Lease{{ID: "w1", Holds: []Hold{{Guard: "pace", Scope: "all", Amount: 9}, {Guard: "spend", Scope: "all", Amount: 7}}}, {ID: "w2", Holds: []Hold{{Guard: "pace", Amount: 1}}}},
		Used:   []Used{{Guard: "spend", Scope: "all", Amount: 3}, {Guard: "pace", Scope: "all", Amount: 4}},
	}
	got := stateOf(st, "spend")
	assert.Equal(t, State{
		Entries: []Entry{{Key: "a", Holds: []Hold{{Guard: "spend", Scope: "all", Amount: 5}}}},
		Leases:  []Lease{{ID: "w1", Holds: []Hold{{Guard: "spend", Scope: "all", Amount: 7}}}},
		Used:    []Used{{Guard: "spend", Scope: "all", Amount: 3}},
	}, got)
	assert.Len(t, st.Entries[0].Holds, 2, "the state read is not changed")
}

// The task queue's ledger counts no guard: it answers whether a call is
// paused, refuses a call a guard covers that a worker from before shards
// sends it, lets a call no guard covers through, and keeps a lease that
// holds nothing (its worker is told the pauses).
func TestTheHomeLedgerCountsNoGuard(t *testing.T) {
	b := newBook(t, twoGuards)
	b.role = countsPause
	v := b.reserve(t0, refund("a", 1))
	assert.Equal(t, Denied, v.Decide)
	assert.Equal(t, "spend", v.Guard)
	assert.Contains(t, v.Reason, "upgrade the worker that sent it")
	assert.Equal(t, Reserved, b.reserve(t0, pausesOnly(refund("a", 1))).Decide)
	read := res("s", "search", `{}`)
	read.Destructive = false
	assert.Equal(t, Reserved, b.reserve(t0, read).Decide)
	assert.Empty(t, b.st.Entries)
	g := b.renew(t0, LeaseRequest{Lessee: "w1", Want: []Want{want(b, 100)}})
	assert.Zero(t, g.Grants[0].Amount, "it grants no guard's slice")
	require.Len(t, b.st.Leases, 1)
	assert.Equal(t, "w1", b.st.Leases[0].ID)
	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "r", At: t0.Add(time.Second)}))
	assert.Equal(t, []string{"w1"}, b.view(t0.Add(time.Second)).Unseen, "w1 renewed before the pause")
	assert.Equal(t, Paused, b.reserve(t0, pausesOnly(refund("a", 1))).Decide)
}

// A guard's ledger counts its guard only, and refuses every call when the
// policy of the worker it runs on has no such guard.
func TestAGuardsLedgerCountsItsGuardOnly(t *testing.T) {
	b := newBook(t, twoGuards)
	b.role, b.only = countsGuard, "pace"
	v := b.reserve(t0, refund("a", 20000))
	require.Equal(t, Reserved, v.Decide, "the budget is not this ledger's")
	assert.Equal(t, []Use{{Guard: "pace", Scope: "all", Amount: 1, Sum: 1, Limit: 100}}, v.Uses)
	gone := newBook(t, budget)
	gone.role, gone.only = countsGuard, "pace"
	v = gone.reserve(t0, refund("a", 1))
	assert.Equal(t, Denied, v.Decide)
	assert.Contains(t, v.Reason, "counts guard pace, which the policy of the worker it runs on does not have")
}

// A guard's ledger that never ran starts from what the task queue's ledger
// counted of its guard (before shards), so an upgrade does not start the
// guard's window anew; it refuses a pause, which is the task queue's
// ledger's.
func TestAGuardsLedgerStartsFromWhatTheHomeLedgerCounted(t *testing.T) {
	f := newShard(t, twoGuards, "spend", 0)
	f.recovered = Recovery{From: ID(queue), Home: true, State: &State{
		Entries: []Entry{{Key: keyID("old"), At: t0.UnixMilli(), Holds: []Hold{{Guard: "spend", Scope: "all", Amount: 9000}, {Guard: "pace", Scope: "all", Amount: 1}}}},
		Pauses:  []Pause{{Tool: "refund", By: "bob", Reason: "incident", At: t0}},
	}}
	var r *outcome[Verdict]
	var p *outcome[View]
	var view View
	f.at(time.Second, func() {
		r = f.reserve(refund("new", 1001))
		p = f.toggle(true, f.token("alice", nil))
	})
	f.at(2*time.Second, func() {
		view = f.view()
		f.env.CancelWorkflow()
	})
	require.True(t, temporal.IsCanceledError(f.run(Input{})))
	require.Len(t, f.asked, 1)
	assert.Equal(t, ID(queue), f.asked[0].Home)
	assert.Equal(t, Denied, r.result.Decide, "9,000 counted before: 1,001 more passes the limit (and the pause is not this ledger's)")
	assert.Empty(t, view.Pauses)
	require.Len(t, view.Guards, 1)
	assert.Equal(t, []ScopeView{{Scope: "all", Reserved: 9000}}, view.Guards[0].Scopes)
	assert.True(t, p.rejected)
	assert.ErrorContains(t, p.err, "not this ledger (toolgate-ledger-q/guard/spend)")
}

// The guards' ledgers' answers make one: the first that denies, else the
// first that asks; reserved, counting toward every guard, only when all
// reserve.
func TestTheGuardsAnswersMakeOne(t *testing.T) {
	a := Verdict{Decide: Reserved, Again: true, Uses: []Use{{Guard: "spend"}}}
	b := Verdict{Decide: Reserved, Committed: true, Uses: []Use{{Guard: "pace"}}}
	ask := Verdict{Decide: Ask, Guard: "big"}
	deny := Verdict{Decide: Denied, Guard: "pace"}
	assert.Equal(t, Verdict{Decide: Reserved, Committed: true, Uses: []Use{{Guard: "spend"}, {Guard: "pace"}}}, merged([]Verdict{a, b}))
	assert.Equal(t, Verdict{Decide: Reserved, Again: true, Uses: []Use{{Guard: "spend"}}}, merged([]Verdict{a}))
	assert.Equal(t, ask, merged([]Verdict{a, ask, b}))
	assert.Equal(t, deny, merged([]Verdict{ask, deny}))
	assert.Equal(t, Denied, merged([]Verdict{a, {Decide: "maybe"}}).Decide)
	assert.Equal(t, Verdict{Decide: Reserved}, merged(nil))
}

// A guard's ledger that never ran reads the task queue's ledger's state,
// or nothing when that never ran either.
func TestAGuardsLedgerReadsTheHomeLedger(t *testing.T) {
	c := &mocks.Client{}
	val := &mocks.Value{}
	val.On("Get", mock.Anything).Run(func(a mock.Arguments) {
		*a.Get(0).(*State) = State{Entries: []Entry{{Key: "a"}}}
	}).Return(nil)
	c.On("QueryWorkflow", mock.Anything, ID(queue), "", QueryState).Return(val, nil).Once()
	rec, err := fromHome(context.Background(), c, ID(queue))
	require.NoError(t, err)
	assert.Equal(t, Recovery{From: ID(queue), Home: true, State: &State{Entries: []Entry{{Key: "a"}}}}, rec)

	c.On("QueryWorkflow", mock.Anything, ID(queue), "", QueryState).Return(nil, serviceerror.NewNotFound("no such workflow")).Once()
	rec, err = fromHome(context.Background(), c, ID(queue))
	require.NoError(t, err)
	assert.Nil(t, rec.State)

	c.On("QueryWorkflow", mock.Anything, ID(queue), "", QueryState).Return(nil, errors.New("loading")).Once()
	_, err = fromHome(context.Background(), c, ID(queue))
	assert.ErrorContains(t, err, "asking the task queue's ledger toolgate-ledger-q for what it counted: loading", "the local activity tries again: nothing is answered meanwhile")
}

// A worker's lease of the task queue's ledger holds nothing and tells it
// the pauses: it does not know them until its first renewal, knows them
// after, and learns a new pause at the next renewal.
func TestTheHomeLeaseTellsTheWorkerThePauses(t *testing.T) {
	b, mu, clock := newBook(t, twoGuards), &sync.Mutex{}, t0
	b.role = countsPause
	s := newTestSpender(t, b, mu, &clock)
	s.guard = ""
	_, _, known := s.pausedBy(refund("a", 1))
	assert.False(t, known, "no renewal yet: the ledger answers")
	s.renewNow(t)
	require.Len(t, s.sent, 1)
	assert.Equal(t, LeaseRequest{Lessee: s.lessee}, s.sent[0], "it asks for no guard's slice")
	_, paused, known := s.pausedBy(refund("a", 1))
	assert.True(t, known)
	assert.False(t, paused)
	_, ok := s.reserve(refund("a", 1))
	assert.False(t, ok, "it leases no guard: a guard's ledger (or lease) counts the call")

	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "incident", At: clock}))
	clock = clock.Add(renewEvery)
	s.renewNow(t)
	p, paused, known := s.pausedBy(refund("a", 1))
	assert.True(t, known && paused)
	assert.Equal(t, "alice", p.By)
	clock = clock.Add(pauseFresh)
	_, _, known = s.pausedBy(refund("a", 1))
	assert.False(t, known, "no renewal for pauseFresh: it does not know, and the ledger answers")
}
