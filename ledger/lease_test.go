package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// want asks for amount of the budget "spend" (scope all) of b's policy.
func want(b *book, amount int64) Want {
	g, _ := b.guardByID("spend")
	return Want{Guard: "spend", Scope: "all", Amount: amount, Print: GuardPrint(g)}
}

// A lease's slice counts as held until the worker says it spent it (then
// it counts as committed, from then) or returns it; the ledger grants at
// most a quarter of what is left, so a reservation sent to the ledger sees
// every lease.
func TestALeaseCountsUntilItIsSpentOrReturned(t *testing.T) {
	b := newBook(t, budget) // spend: limit 10000 per 1h
	g := b.renew(t0, LeaseRequest{Lessee: "w1", Want: []Want{want(b, 4000)}})
	require.Len(t, g.Grants, 1)
	assert.False(t, g.Renewed, "a new lease")
	assert.Equal(t, Grant{Guard: "spend", Scope: "all", Amount: 2500, Sum: 2500, Limit: 10000}, g.Grants[0], "a quarter of what is left")

	v := b.reserve(t0, refund("a", 7501))
	assert.Equal(t, Denied, v.Decide, "the lease's 2500 count: 7501 more would pass the limit")
	require.Equal(t, Reserved, b.reserve(t0, refund("a", 7500)).Decide)

	// The worker spent 1000, holds 500 for a call on its way, returns the rest.
	g = b.renew(t0.Add(time.Second), LeaseRequest{Lessee: "w1", Used: []Hold{{Guard: "spend", Scope: "all", Amount: 1000}},
		Held: []Hold{{Guard: "spend", Scope: "all", Amount: 500}}})
	assert.True(t, g.Renewed)
	sv := b.view(t0.Add(time.Second)).Guards[0].Scopes[0]
	assert.Equal(t, ScopeView{Scope: "all", Committed: 1000, Reserved: 7500, Leased: 500}, sv)

	// It may not hold more than its lease held.
	b.renew(t0.Add(2*time.Second), LeaseRequest{Lessee: "w1", Held: []Hold{{Guard: "spend", Scope: "all", Amount: 5000}}})
	assert.Equal(t, int64(500), b.view(t0.Add(2 * time.Second)).Guards[0].Scopes[0].Leased)

	// Holding nothing, the lease ends; what was spent stays until its window ends.
	b.renew(t0.Add(3*time.Second), LeaseRequest{Lessee: "w1", Used: []Hold{{Guard: "spend", Scope: "all", Amount: 500}}})
	assert.Empty(t, b.st.Leases)
	assert.Equal(t, ScopeView{Scope: "all", Committed: 1500, Reserved: 7500}, b.view(t0.Add(3 * time.Second)).Guards[0].Scopes[0])
	assert.Equal(t, ScopeView{Scope: "all", Committed: 1500}, b.view(t0.Add(time.Hour + 2*time.Second)).Guards[0].Scopes[0],
		"spent at t0+1s and t0+3s, kept as one slice from t0+3s: it counts a little longer, never shorter")
	assert.Empty(t, b.view(t0.Add(time.Hour + 3*time.Second)).Guards[0].Scopes, "and leaves the window an hour after")
}

// A lease not renewed within LeaseTTL counts all it held as spent, and the
// worker is told it no longer holds anything.
func TestALapsedLeaseCountsAllItHeldAsSpent(t *testing.T) {
	b := newBook(t, budget)
	g := b.renew(t0, LeaseRequest{Lessee: "w1", Want: []Want{want(b, 400)}})
	require.Equal(t, int64(400), g.Grants[0].Amount)
	b.expire(t0.Add(LeaseTTL + time.Millisecond))
	assert.Empty(t, b.st.Leases)
	assert.Equal(t, ScopeView{Scope: "all", Committed: 400}, b.view(t0.Add(LeaseTTL + time.Millisecond)).Guards[0].Scopes[0])
	g = b.renew(t0.Add(LeaseTTL+2*time.Millisecond), LeaseRequest{Lessee: "w1", Held: []Hold{{Guard: "spend", Scope: "all", Amount: 400}}})
	assert.False(t, g.Renewed, "the worker holds nothing of the lapsed lease")
	assert.Equal(t, ScopeView{Scope: "all", Committed: 400}, b.view(t0.Add(LeaseTTL + 2*time.Millisecond)).Guards[0].Scopes[0])
	b.renew(t0.Add(LeaseTTL+3*time.Millisecond), LeaseRequest{Lessee: "w1", Used: []Hold{{Guard: "spend", Scope: "all", Amount: 300}}})
	assert.Equal(t, ScopeView{Scope: "all", Committed: 400}, b.view(t0.Add(LeaseTTL + 3*time.Millisecond)).Guards[0].Scopes[0],
		"what the worker then says it spent of the lapsed lease is counted already")
}

// A worker whose guard differs from the ledger's, a repeat limit, and a
// request past the bounds are granted nothing.
func TestALeaseIsGrantedOnlyForTheLedgersOwnBudgetsAndRates(t *testing.T) {
	b := newBook(t, budget+"  - {id: again, kind: repeat, tools: [refund], limit: 2, window: 1h}\n")
	w := want(b, 100)
	w.Print = "budget|refund|args.amount_cents|99999999|1h|all|deny"
	rg, _ := b.guardByID("again")
	g := b.renew(t0, LeaseRequest{Lessee: "w1", Want: []Want{w, {Guard: "again", Scope: "all", Amount: 1, Print: GuardPrint(rg)}}})
	assert.Equal(t, []Grant{{Guard: "spend", Scope: "all"}, {Guard: "again", Scope: "all"}}, g.Grants)
	assert.Empty(t, b.st.Leases)
	assert.Error(t, checkLease(LeaseRequest{Lessee: "w1", Hand: make([]Handed, MaxHand+1)}))
	assert.Error(t, checkLease(LeaseRequest{Lessee: "w1", Used: []Hold{{Guard: "spend", Amount: -1}}}))
	assert.Error(t, checkLease(LeaseRequest{}))
}

// testSpender is a spender on b, its lease requests taken by b under a lock
// at the spender's clock, which the test moves.
type testSpender struct {
	*spender
	mu    *sync.Mutex
	clock *time.Time
	sent  []LeaseRequest
}

func newTestSpender(t *testing.T, b *book, mu *sync.Mutex, clock *time.Time) *testSpender {
	ts := &testSpender{mu: mu, clock: clock}
	ts.spender = newSpender(b.eng, "spend", func(_ context.Context, _ string, q LeaseRequest) (LeaseGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		ts.sent = append(ts.sent, q)
		return b.renew(*clock, q), nil
	})
	ts.spender.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return *clock }
	ts.spender.running = true // the test renews (renewNow), not a loop
	return ts
}

// renewNow sends the spender's next request and applies the answer.
func (ts *testSpender) renewNow(t *testing.T) {
	t.Helper()
	ts.spender.mu.Lock()
	p := ts.pending
	if p == nil {
		p = ts.request()
	}
	ts.spender.mu.Unlock()
	if p == nil {
		return
	}
	start := ts.spender.now()
	g, err := ts.send(context.Background(), p.id, p.q)
	require.NoError(t, err)
	ts.spender.mu.Lock()
	ts.apply(p, g, start)
	ts.pending = nil
	ts.spender.mu.Unlock()
}

// A worker answers a call from its lease, settles it there, and says what
// it spent at its next renewal; the ledger's sums then hold it exactly.
func TestAWorkerSpendsItsLeaseAndSaysWhatItSpent(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0
	s := newTestSpender(t, b, mu, &clock)
	_, ok := s.reserve(refund("a", 100))
	assert.False(t, ok, "no lease yet: the ledger answers")
	s.renewNow(t)
	require.Equal(t, int64(800), s.find("spend", "all").avail, "eight calls' worth")

	v, ok := s.reserve(refund("b", 100))
	require.True(t, ok)
	assert.Equal(t, Reserved, v.Decide)
	assert.Equal(t, "b", v.Call[2:], "the answer names the call")
	v, ok = s.reserve(refund("b", 100))
	require.True(t, ok)
	assert.True(t, v.Again, "the same key counts once")
	out, ok := s.settle(Settlement{Key: "b", Commit: true, Workflow: "run-1"})
	require.True(t, ok)
	assert.True(t, out.Committed)
	_, ok = s.reserve(refund("c", 100))
	require.True(t, ok)
	out, ok = s.settle(Settlement{Key: "c", Workflow: "run-2"})
	require.True(t, ok)
	assert.NotEmpty(t, out.Refused, "another run may not settle it")
	_, ok = s.settle(Settlement{Key: "c", Workflow: "run-1"})
	require.True(t, ok)
	_, ok = s.settle(Settlement{Key: "zz", Commit: true})
	assert.False(t, ok, "a call the lease did not reserve is settled with the ledger")

	clock = clock.Add(time.Second)
	s.renewNow(t)
	sv := b.view(clock).Guards[0].Scopes[0]
	assert.Equal(t, int64(100), sv.Committed, "b ran: spent; c was released: back in the lease")
	assert.Zero(t, sv.Reserved)
	assert.Equal(t, s.find("spend", "all").avail, sv.Leased, "the ledger holds what the worker holds")
}

// A pause the worker knows of, or pauses it has not heard in pauseFresh,
// send the call to the ledger, which answers for the pause (or fails
// closed when it cannot be reached).
func TestAPausedOrUnheardLedgerTakesTheCall(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0
	s := newTestSpender(t, b, mu, &clock)
	s.reserve(refund("a", 1))
	s.renewNow(t)
	_, ok := s.reserve(refund("b", 1))
	require.True(t, ok)
	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "incident"}))
	clock = clock.Add(time.Second)
	s.renewNow(t)
	_, ok = s.reserve(refund("c", 1))
	assert.False(t, ok, "the pause is known: the ledger answers")
	b.unpause("refund")
	clock = clock.Add(time.Second)
	s.renewNow(t)
	_, ok = s.reserve(refund("d", 1))
	require.True(t, ok)
	clock = clock.Add(pauseFresh)
	_, ok = s.reserve(refund("e", 1))
	assert.False(t, ok, "no renewal for pauseFresh: the ledger answers")
}

// A call that holds its slice past handAfter (waiting for a human) is
// handed to the ledger: the ledger counts it as an entry of its run, and
// settles it.
func TestACallThatWaitsIsHandedToTheLedger(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0
	s := newTestSpender(t, b, mu, &clock)
	s.reserve(refund("a", 1))
	s.renewNow(t)
	_, ok := s.reserve(refund("b", 5))
	require.True(t, ok)
	for range handAfter / renewEvery { // renewed each second, as the loop does
		clock = clock.Add(renewEvery)
		s.renewNow(t)
	}
	require.Len(t, s.sent[len(s.sent)-1].Hand, 1)
	require.Len(t, b.st.Entries, 1)
	assert.Equal(t, keyID("run-1"), b.st.Entries[0].Run)
	sv := b.view(clock).Guards[0].Scopes[0]
	assert.Equal(t, int64(5), sv.Reserved)
	_, ok = s.reserve(refund("b", 5))
	assert.False(t, ok, "the ledger counts it: it answers again")
	_, ok = s.settle(Settlement{Key: "b", Commit: true, Workflow: "run-1"})
	assert.False(t, ok, "and settles it")
	assert.Equal(t, Settled{Found: true, Committed: true}, b.settle(clock, Settlement{Key: "b", Commit: true, Workflow: "run-1"}))
}

// However many workers lease and however their calls interleave with calls
// sent to the ledger, a budget is never passed: every slice a worker spends
// was counted by the ledger before it was spent.
func TestLeasesNeverPassALimit(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0 // 10000 per 1h
	var spenders []*testSpender
	for range 4 {
		spenders = append(spenders, newTestSpender(t, b, mu, &clock))
	}
	var spent int64
	n := 0
	for round := range 60 {
		for i, s := range spenders {
			if round%3 == i%3 {
				s.renewNow(t)
			}
			for range 5 {
				n++
				r := refund(fmt.Sprintf("k%d", n), 37+n%50)
				amount := int64(37 + n%50)
				v, ok := s.reserve(r)
				if !ok {
					r = s.toLedger(r)
					mu.Lock()
					v = b.reserve(clock, r)
					if v.Decide == Reserved {
						b.settle(clock, Settlement{Key: r.Key, Commit: true})
					}
					mu.Unlock()
				} else {
					s.settle(Settlement{Key: r.Key, Commit: true})
				}
				if v.Decide == Reserved {
					spent += amount
				}
			}
		}
		mu.Lock()
		clock = clock.Add(200 * time.Millisecond)
		mu.Unlock()
	}
	assert.LessOrEqual(t, spent, int64(10000), "what was let through never passes the limit")
	t.Logf("%d of 10000 spent", spent)
	assert.Greater(t, spent, int64(9000), "and the budget is used: a lease near the limit gives way to the ledger")
	for _, s := range spenders { // every worker returns what it holds
		for range idleAfter + 1 {
			s.renewNow(t)
		}
	}
	sv := b.view(clock).Guards[0].Scopes[0]
	assert.Equal(t, spent, sv.Committed, "the ledger holds every amount spent, once")
	assert.Zero(t, sv.Leased)
}

// The guards view names the workers holding leases that have not renewed
// since the latest pause: those not yet told of it.
func TestTheViewNamesWorkersNotYetToldOfAPause(t *testing.T) {
	b := newBook(t, budget)
	b.renew(t0, LeaseRequest{Lessee: "w1", Want: []Want{want(b, 100)}})
	b.renew(t0, LeaseRequest{Lessee: "w2", Want: []Want{want(b, 100)}})
	assert.Empty(t, b.view(t0).Unseen, "no pause")
	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "incident", At: t0.Add(time.Second)}))
	assert.Equal(t, []string{"w1", "w2"}, b.view(t0.Add(time.Second)).Unseen)
	g := b.renew(t0.Add(1500*time.Millisecond), LeaseRequest{Lessee: "w2", Held: []Hold{{Guard: "spend", Scope: "all", Amount: 100}}})
	assert.Equal(t, "refund", g.Pauses[0].Tool, "the renewal tells the pause")
	assert.Equal(t, []string{"w1"}, b.view(t0.Add(1500*time.Millisecond)).Unseen)
	assert.Empty(t, b.view(t0.Add(LeaseTTL+time.Second)).Unseen, "w1's lease lapsed: it spends nothing more")
}

// Near a limit, a worker's own unspent slice gives way to its call: the
// call goes to the ledger with the slice returned, and the limit is exact.
func TestAWorkersOwnSliceGivesWayToItsCall(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0 // 10000 per 1h
	s := newTestSpender(t, b, mu, &clock)
	_, ok := s.reserve(refund("a", 100))
	require.False(t, ok)
	require.Equal(t, Reserved, b.reserve(clock, s.toLedger(refund("a", 100))).Decide)
	s.renewNow(t)
	require.Equal(t, int64(800), s.find("spend", "all").avail, "eight calls' worth")
	r := refund("b", 9900)
	_, ok = s.reserve(r)
	require.False(t, ok, "the slice is too small")
	v := b.reserve(clock, s.toLedger(r))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, int64(10000), v.Uses[0].Sum, "exactly the limit")
	assert.Zero(t, s.find("spend", "all").avail)
	assert.Empty(t, b.st.Leases, "the lease gave back all it held")
}

// Near a limit the ledger grants no slice smaller than the worker's last
// call: a grant taken while that call is on its way to the ledger would
// otherwise push it over a limit it fits within.
func TestNoSliceSmallerThanACallIsGranted(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0 // 10000 per 1h
	s := newTestSpender(t, b, mu, &clock)
	r := refund("a", 7000)
	_, ok := s.reserve(r)
	require.False(t, ok)
	require.Equal(t, Reserved, b.reserve(clock, s.toLedger(r)).Decide)
	_, ok = s.reserve(refund("b", 3000))
	require.False(t, ok, "no slice yet")
	s.renewNow(t) // the renewal the short call asked for, before the call reaches the ledger
	assert.Zero(t, s.find("spend", "all").avail, "750 (a quarter of what is left) is less than a call of 3000")
	v := b.reserve(clock, s.toLedger(refund("b", 3000)))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, int64(10000), v.Uses[0].Sum, "exactly the limit")
}

// The renewal loop, for real: the first call goes to the ledger and wakes
// the loop, whose grant answers the next calls in the worker; what they
// spent reaches the ledger at the next renewal.
func TestTheRenewalLoopLeasesAndReports(t *testing.T) {
	b, mu := newBook(t, budget), &sync.Mutex{}
	s := newSpender(b.eng, "spend", func(_ context.Context, _ string, q LeaseRequest) (LeaseGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		return b.renew(time.Now(), q), nil
	})
	_, ok := s.reserve(refund("a", 10))
	require.False(t, ok)
	n := 0
	require.Eventually(t, func() bool {
		n++
		_, ok := s.reserve(refund(fmt.Sprintf("k%d", n), 10))
		if ok {
			_, settled := s.settle(Settlement{Key: fmt.Sprintf("k%d", n), Commit: true, Workflow: "run-1"})
			return settled
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return b.view(time.Now()).Guards[0].Scopes[0].Committed == 10
	}, 5*time.Second, 50*time.Millisecond, "the next renewal says what was spent")
}

// A call the ledger reserved (a worker sent it, and died before its run
// heard the answer) and another worker's lease then answered counts once:
// the lease names the calls it settled, and the ledger lets its own
// reservation of them go.
func TestACallCountedByALeaseIsNotCountedByTheLedgerToo(t *testing.T) {
	b, mu, clock := newBook(t, budget), &sync.Mutex{}, t0
	require.Equal(t, Reserved, b.reserve(clock, refund("x", 300)).Decide, "sent by a worker that died")
	s := newTestSpender(t, b, mu, &clock)
	s.reserve(refund("a", 300))
	s.renewNow(t)
	_, ok := s.reserve(refund("x", 300))
	require.True(t, ok, "the run's retry, answered by the lease")
	_, ok = s.settle(Settlement{Key: "x", Commit: true, Workflow: "run-1"})
	require.True(t, ok)
	clock = clock.Add(renewEvery)
	s.renewNow(t)
	sv := b.view(clock).Guards[0].Scopes[0]
	assert.Equal(t, int64(300), sv.Committed)
	assert.Zero(t, sv.Reserved, "x counts once, as spent")
}

// A spender whose ledger no longer answers and whose worker no longer
// reserves stops renewing (its lease lapses at the ledger): no goroutine
// renews forever for a stopped worker.
func TestASpenderNobodyUsesStopsWhenTheLedgerIsGone(t *testing.T) {
	b := newBook(t, budget)
	var mu sync.Mutex
	var calls int
	s := newSpender(b.eng, "spend", func(_ context.Context, _ string, q LeaseRequest) (LeaseGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return b.renew(time.Now(), q), nil
		}
		return LeaseGrant{}, fmt.Errorf("the client is closed")
	})
	clock := time.Now()
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	s.reserve(refund("a", 10))
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.slots) > 0 && s.slots[0].avail > 0 }, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	clock = clock.Add(quietAfter)
	mu.Unlock()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.running }, 10*time.Second, 50*time.Millisecond,
		"it stops after %d failed renewals", giveUpAfter)
}
