package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/policy"
)

const budget = `
  - {id: spend, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 10000, window: 1h, reason: "refunds are capped"}
`

// A budget sums amounts exactly, up to its limit and not one cent past it,
// and forgets what left its window.
func TestBudgetSumsExactlyWithinItsWindow(t *testing.T) {
	b := newBook(t, budget)
	v := b.reserve(t0, refund("a", 4000))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, []Use{{Guard: "spend", Scope: "all", Amount: 4000, Sum: 4000, Limit: 10000}}, v.Uses)
	v = b.reserve(t0.Add(30*time.Minute), refund("b", 6000))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, int64(10000), v.Uses[0].Sum) // exactly the limit: allowed

	v = b.reserve(t0.Add(40*time.Minute), refund("c", 2000))
	assert.Equal(t, Denied, v.Decide)
	assert.Equal(t, "spend", v.Guard)
	assert.Equal(t, "guard spend: this call's amount 2,000 would bring the sum to 12,000, over the limit of 10,000 per 1h: refunds are capped", v.Reason)
	assert.Len(t, b.st.Entries, 2, "a refused call makes no entry")

	// At t0+1h the first entry leaves the window: 6000 + 4000 fits again.
	v = b.reserve(t0.Add(time.Hour-time.Millisecond), refund("d", 1))
	assert.Equal(t, Denied, v.Decide, "one millisecond before, a is still in the window")
	v = b.reserve(t0.Add(time.Hour), refund("d", 4000))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, int64(10000), v.Uses[0].Sum)
	assert.Len(t, b.st.Entries, 2, "a was pruned")
}

// Each of per's scopes counts apart.
func TestGuardsCountPerScope(t *testing.T) {
	for _, tc := range []struct {
		per        string
		a, b       func(*Reservation)
		scopeA     string
		sameScopes bool
	}{
		{per: "all", a: func(r *Reservation) { r.Tool = "refund" }, b: func(r *Reservation) { r.Tool = "wire" }, scopeA: "all", sameScopes: true},
		{per: "tool", a: func(r *Reservation) { r.Tool = "refund" }, b: func(r *Reservation) { r.Tool = "wire" }, scopeA: "tool:refund"},
		{per: "requester", a: func(r *Reservation) { r.RequestedBy = "alice" }, b: func(r *Reservation) { r.RequestedBy = "" }, scopeA: "requester:alice"},
		{per: "run", a: func(r *Reservation) { r.Workflow = "run-a" }, b: func(r *Reservation) { r.Workflow = "run-b" }, scopeA: "run:run-a"},
	} {
		t.Run(tc.per, func(t *testing.T) {
			b := newBook(t, fmt.Sprintf("  - {id: calls, kind: rate, tools: [refund, wire], limit: 1, window: 1m, per: %s}\n", tc.per))
			ra, rb := res("a", "refund", `{}`), res("b", "refund", `{}`)
			tc.a(&ra)
			tc.b(&rb)
			v := b.reserve(t0, ra)
			require.Equal(t, Reserved, v.Decide, v.Reason)
			assert.Equal(t, tc.scopeA, v.Uses[0].Scope)
			v = b.reserve(t0, rb)
			if tc.sameScopes {
				assert.Equal(t, Denied, v.Decide)
				return
			}
			require.Equal(t, Reserved, v.Decide, v.Reason)
			assert.NotEqual(t, tc.scopeA, v.Uses[0].Scope)
			ra.Key = "a2"
			v = b.reserve(t0, ra)
			assert.Equal(t, Denied, v.Decide, "a's scope is full")
			assert.Contains(t, v.Reason, "guard calls ("+tc.scopeA+"): this call would be call 2 within 1m, over the limit of 1")
		})
	}
	b := newBook(t, "  - {id: calls, kind: rate, tools: [refund], limit: 5, window: 1m, per: requester}\n")
	v := b.reserve(t0, res("a", "refund", `{}`))
	require.Equal(t, Reserved, v.Decide)
	assert.Equal(t, "requester:", v.Uses[0].Scope, "no requester is a scope too")
}

// A rate counts calls not released.
func TestRateCountsCallsNotReleased(t *testing.T) {
	b := newBook(t, "  - {id: calls, kind: rate, limit: 2, window: 1m}\n")
	assert.Equal(t, Reserved, b.reserve(t0, res("a", "refund", `{}`)).Decide)
	assert.Equal(t, Reserved, b.reserve(t0, res("b", "close", `{}`)).Decide)
	v := b.reserve(t0, res("c", "wire", `{}`))
	assert.Equal(t, Denied, v.Decide)
	assert.Equal(t, "guard calls: this call would be call 3 within 1m, over the limit of 2", v.Reason)
	b.settle(t0, Settlement{Key: "b"})
	v = b.reserve(t0, res("c", "wire", `{}`))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, int64(2), v.Uses[0].Sum)
	// A guard with no tools covers destructive tools only.
	r := res("d", "search", `{}`)
	r.Destructive = false
	v = b.reserve(t0, r)
	assert.Equal(t, Verdict{Decide: Reserved}, v)
	assert.Len(t, b.st.Entries, 3, "a call no guard covers makes no entry")
}

// A repeat counts every proposal of the same call, released or not.
func TestRepeatCountsProposalsReleasedOrNot(t *testing.T) {
	b := newBook(t, "  - {id: loop, kind: repeat, tools: [refund], limit: 3, window: 10m, reason: stop looping}\n")
	for i := range 3 {
		key := fmt.Sprint("k", i)
		v := b.reserve(t0, refund(key, 5))
		require.Equal(t, Reserved, v.Decide, v.Reason)
		assert.Equal(t, int64(i+1), v.Uses[0].Sum)
		assert.Equal(t, Settled{Found: true}, b.settle(t0, Settlement{Key: key}))
	}
	v := b.reserve(t0, refund("k3", 5))
	assert.Equal(t, Denied, v.Decide)
	assert.Equal(t, "guard loop: this call (the same tool and arguments) is proposed for the 4th time within 10m, over the limit of 3: stop looping", v.Reason)
	v = b.reserve(t0, refund("k4", 6))
	assert.Equal(t, Reserved, v.Decide, "other arguments are another call")
	// With no digest a repeat cannot count: it fails closed.
	r := refund("k5", 7)
	r.Digest = ""
	assert.Equal(t, Denied, b.reserve(t0, r).Decide)
}

const askThenDeny = `
  - {id: ask-spend, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 100, window: 1h, exceed: ask, approvers: {roles: [finance]}}
  - {id: ask-tool, kind: rate, tools: [refund], limit: 1, window: 1h, exceed: ask}
  - {id: hard-cap, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 1000, window: 1h}
`

// Past an ask guard the call needs its approvers (the guard's, else the
// tool's); Over lets it past that guard only; a deny wins over an ask.
func TestAskNeedOverAndDenyBeatsAsk(t *testing.T) {
	b := newBook(t, askThenDeny)
	require.Equal(t, Reserved, b.reserve(t0, refund("a", 100)).Decide)

	v := b.reserve(t0, refund("b", 50))
	assert.Equal(t, Ask, v.Decide)
	assert.Equal(t, "ask-spend", v.Guard, "the first guard that refuses, in policy order")
	assert.Equal(t, &policy.Approvers{Roles: []string{"finance"}, Count: 1}, v.Need)

	r := refund("b", 50)
	r.Over = "ask-spend"
	v = b.reserve(t0, r)
	assert.Equal(t, Ask, v.Decide)
	assert.Equal(t, "ask-tool", v.Guard)
	assert.Equal(t, &policy.Approvers{Roles: []string{"finance"}, Count: 2}, v.Need, "the tool's approvers")

	r.Over = "ask-tool"
	assert.Equal(t, "ask-spend", b.reserve(t0, r).Guard, "over names one guard")

	r.Over = "hard-cap" // a deny guard: over does not apply
	r.Args = []byte(`{"amount_cents":1000}`)
	v = b.reserve(t0, r)
	assert.Equal(t, Denied, v.Decide, "a deny wins over the asks before it")
	assert.Equal(t, "hard-cap", v.Guard)
	assert.Len(t, b.st.Entries, 1)
}

// Over counts the call past its guard's limit.
func TestOverCountsPastTheLimit(t *testing.T) {
	b := newBook(t, "  - {id: ask-spend, kind: budget, tools: [refund], amount: \"args.amount_cents\", limit: 100, window: 1h, exceed: ask}\n")
	r := refund("a", 150)
	r.Over, r.Stage = "ask-spend", StageDecided
	v := b.reserve(t0, r)
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, []Use{{Guard: "ask-spend", Scope: "all", Amount: 150, Sum: 150, Limit: 100}}, v.Uses)
	assert.Equal(t, Ask, b.reserve(t0, refund("b", 0)).Decide, "the sum is over the limit now")
}

// An amount that cannot be counted denies the call.
func TestAnAmountThatCannotBeCountedDenies(t *testing.T) {
	b := newBook(t, budget)
	for _, args := range []string{`{}`, `{"amount_cents":-5}`, `{"amount_cents":1.5}`, `not json`} {
		v := b.reserve(t0, res("a", "refund", args))
		assert.Equal(t, Denied, v.Decide, args)
		assert.Equal(t, "spend", v.Guard, args)
		assert.Contains(t, v.Reason, "cannot count this call toward guard spend", args)
	}
	assert.Empty(t, b.st.Entries)
}

// Bad input is denied, never a panic.
func TestBadReservationsAreDenied(t *testing.T) {
	b := newBook(t, budget)
	for name, edit := range map[string]func(*Reservation){
		"no key":    func(r *Reservation) { r.Key = "" },
		"long key":  func(r *Reservation) { r.Key = strings.Repeat("k", MaxKeyBytes+1) },
		"no tool":   func(r *Reservation) { r.Tool = "" },
		"long args": func(r *Reservation) { r.Args = []byte(`{"x":"` + strings.Repeat("a", MaxArgsBytes) + `"}`) },
		"no stage":  func(r *Reservation) { r.Stage = "" },
		"stage":     func(r *Reservation) { r.Stage = "later" },
	} {
		r := refund("a", 1)
		edit(&r)
		v := b.reserve(t0, r)
		assert.Equal(t, Denied, v.Decide, name)
		assert.Contains(t, v.Reason, "the fleet ledger refuses this reservation: ", name)
	}
	assert.Empty(t, b.st.Entries)
}

// The ledger holds at most MaxEntries: past it, it refuses new ones.
func TestMaxEntriesFailsClosed(t *testing.T) {
	b := newBook(t, "  - {id: calls, kind: rate, limit: 1000000, window: 1h}\n")
	for i := range MaxEntries {
		require.Equal(t, Reserved, b.reserve(t0, res(fmt.Sprint(i), "refund", `{}`)).Decide)
	}
	v := b.reserve(t0, res("one more", "refund", `{}`))
	assert.Equal(t, Denied, v.Decide)
	assert.Equal(t, fmt.Sprintf("the fleet ledger holds %d reservations within its guards' windows, at most %d: it refuses new ones until older ones leave their windows", MaxEntries, MaxEntries), v.Reason)
	assert.Equal(t, Reserved, b.reserve(t0, res("7", "refund", `{}`)).Decide, "a key held is answered still")
	assert.Equal(t, Reserved, b.reserve(t0.Add(time.Hour), res("one more", "refund", `{}`)).Decide, "once they leave the window")
	assert.Len(t, b.st.Entries, 1)
}

// The same key counts once, and says it was reserved (and committed).
func TestAKeyCountsOnce(t *testing.T) {
	b := newBook(t, budget)
	first := b.reserve(t0, refund("a", 3000))
	again := b.reserve(t0.Add(time.Minute), refund("a", 3000))
	assert.Equal(t, Verdict{Decide: Reserved, Again: true, Uses: first.Uses}, again)
	b.settle(t0, Settlement{Key: "a", Commit: true})
	again = b.reserve(t0.Add(time.Minute), refund("a", 9999)) // a rewound call, same key
	assert.Equal(t, Verdict{Decide: Reserved, Again: true, Committed: true, Uses: first.Uses}, again)
	assert.Equal(t, int64(7000), b.reserve(t0, refund("b", 4000)).Uses[0].Sum, "a counts once")
	assert.Len(t, b.st.Entries, 2)
}

// Settling commits or releases, once; a call that ran stays spent.
func TestSettle(t *testing.T) {
	b := newBook(t, budget)
	assert.Equal(t, Settled{}, b.settle(t0, Settlement{Key: "nope", Commit: true}))
	assert.Equal(t, Settled{}, b.settle(t0, Settlement{Key: ""}))
	b.reserve(t0, refund("a", 3000))
	b.reserve(t0, refund("b", 3000))
	assert.Equal(t, Settled{Found: true, Committed: true}, b.settle(t0, Settlement{Key: "a", Commit: true}))
	assert.Equal(t, Settled{Found: true, Committed: true}, b.settle(t0, Settlement{Key: "a", Commit: true}))
	assert.Equal(t, Settled{Found: true, Committed: true}, b.settle(t0, Settlement{Key: "a"}), "release of a committed call: it ran")
	assert.Equal(t, Settled{Found: true}, b.settle(t0, Settlement{Key: "b"}))
	assert.Equal(t, Settled{Found: true}, b.settle(t0, Settlement{Key: "b"}))
	assert.Equal(t, int64(3000+7000), b.reserve(t0, refund("c", 7000)).Uses[0].Sum, "a counts, b does not")
	assert.Equal(t, Settled{Found: true, Committed: true}, b.settle(t0, Settlement{Key: "b", Commit: true}), "a late commit wins")
	assert.Equal(t, Settled{}, b.settle(t0.Add(time.Hour), Settlement{Key: "a"}), "out of every window")
}

// A key reserved again after its release is checked again, and counts
// from then.
func TestAReleasedKeyIsCheckedAgain(t *testing.T) {
	b := newBook(t, "  - {id: one, kind: rate, tools: [refund], limit: 1, window: 1h}\n")
	require.Equal(t, Reserved, b.reserve(t0, refund("a", 1)).Decide)
	b.settle(t0, Settlement{Key: "a"})
	require.Equal(t, Reserved, b.reserve(t0, refund("b", 1)).Decide)
	v := b.reserve(t0.Add(time.Minute), refund("a", 1))
	assert.Equal(t, Denied, v.Decide, "b holds the one call")
	assert.False(t, v.Again)
	b.settle(t0, Settlement{Key: "b"})
	v = b.reserve(t0.Add(time.Minute), refund("a", 1))
	assert.Equal(t, Verdict{Decide: Reserved, Uses: []Use{{Guard: "one", Scope: "all", Amount: 1, Sum: 1, Limit: 1}}}, v)
	e := b.st.Entries[b.find(keyID("a"))]
	assert.False(t, e.Released)
	assert.Equal(t, t0.Add(time.Minute).UnixMilli(), e.At)
	assert.Equal(t, Settled{}, b.settle(t0.Add(60*time.Minute), Settlement{Key: "b"}), "b left its window")
	assert.Equal(t, Settled{Found: true}, b.settle(t0.Add(60*time.Minute), Settlement{Key: "a"}), "a counts from its second reservation")
}

// A pause stops its tool; a pause of every tool stops destructive ones.
func TestPauses(t *testing.T) {
	b := newBook(t, budget)
	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "fraud spike", At: t0}))
	v := b.reserve(t0, refund("a", 1))
	assert.Equal(t, Paused, v.Decide)
	assert.Equal(t, "refund is paused fleet-wide by alice at 2026-12-02T13:00:00Z: fraud spike (toolgate unpause refund lets it run again)", v.Reason)
	assert.Equal(t, "alice", v.Pause.By)
	assert.Empty(t, b.st.Entries)
	assert.Equal(t, Reserved, b.reserve(t0, res("b", "close", `{}`)).Decide)

	require.NoError(t, b.pause(Pause{Tool: AllTools, By: "bob", Reason: "incident", At: t0}))
	v = b.reserve(t0, res("c", "close", `{}`))
	assert.Equal(t, Paused, v.Decide)
	assert.Equal(t, "every destructive tool is paused fleet-wide by bob at 2026-12-02T13:00:00Z: incident (toolgate unpause --all lets them run again)", v.Reason)
	read := res("d", "search", `{}`)
	read.Destructive = false
	assert.Equal(t, Reserved, b.reserve(t0, read).Decide, "a read runs")
	assert.Equal(t, "alice", b.reserve(t0, refund("e", 1)).Pause.By, "the tool's own pause first")

	require.NoError(t, b.pause(Pause{Tool: "refund", By: "bob", Reason: "still", At: t0}))
	assert.Len(t, b.st.Pauses, 2, "a pause replaces the tool's")
	assert.True(t, b.unpause(AllTools))
	assert.False(t, b.unpause(AllTools))
	assert.Equal(t, Reserved, b.reserve(t0, res("c", "close", `{}`)).Decide)
	assert.Error(t, b.pause(Pause{Tool: "x", By: "bob"}), "a reason is required")

	for i := len(b.st.Pauses); i < MaxPauses; i++ {
		require.NoError(t, b.pause(Pause{Tool: fmt.Sprint("t", i), By: "bob", Reason: "r"}))
	}
	assert.ErrorContains(t, b.pause(Pause{Tool: "one-more", By: "bob", Reason: "r"}), "at most 256")
	assert.NoError(t, b.pause(Pause{Tool: "refund", By: "bob", Reason: "replaced"}), "a replacement still fits")
}

// With no policy only pauses apply, and nothing is kept.
func TestNoPolicy(t *testing.T) {
	b := &book{st: &State{}}
	assert.Equal(t, Verdict{Decide: Reserved}, b.reserve(t0, refund("a", 1)))
	assert.Empty(t, b.st.Entries)
	require.NoError(t, b.pause(Pause{Tool: "refund", By: "alice", Reason: "r"}))
	assert.Equal(t, Paused, b.reserve(t0, refund("a", 1)).Decide)
	assert.Equal(t, View{Guards: []GuardView{}, Pauses: b.st.Pauses, Entries: 0}, b.view(t0))
}

// The view sums each scope's committed and reserved use within the window.
func TestView(t *testing.T) {
	b := newBook(t, budget+"  - {id: per-run, kind: rate, tools: [refund], limit: 9, window: 1m, per: run}\n")
	b.reserve(t0, refund("a", 100))
	r := refund("b", 200)
	r.Workflow = "run-2"
	b.reserve(t0.Add(30*time.Second), r)
	b.reserve(t0.Add(30*time.Second), refund("c", 400))
	b.settle(t0, Settlement{Key: "a", Commit: true})
	b.settle(t0, Settlement{Key: "c"})
	v := b.view(t0.Add(time.Minute))
	assert.True(t, v.Policy)
	assert.Equal(t, 3, v.Entries)
	require.Len(t, v.Guards, 2)
	assert.Equal(t, GuardView{ID: "spend", Kind: "budget", Limit: 10000, Window: "1h", Per: "all", Exceed: "deny",
		Scopes: []ScopeView{{Scope: "all", Committed: 100, Reserved: 200}}}, v.Guards[0])
	assert.Equal(t, []ScopeView{{Scope: "run:run-2", Reserved: 1}}, v.Guards[1].Scopes, "a left the 1m window; c is released")
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		assert.Equal(t, want, thousands(n))
	}
	for n, want := range map[int64]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 112: "112th", 1001: "1,001st"} {
		assert.Equal(t, want, ordinal(n))
	}
}

// Each guard counts within its own window, not the longest one the ledger
// keeps entries for.
func TestEachGuardItsOwnWindow(t *testing.T) {
	b := newBook(t, budget+"  - {id: one-a-minute, kind: rate, tools: [refund], limit: 1, window: 1m}\n")
	require.Equal(t, Reserved, b.reserve(t0, refund("a", 1)).Decide)
	v := b.reserve(t0.Add(time.Minute-time.Millisecond), refund("b", 1))
	assert.Equal(t, "one-a-minute", v.Guard)
	v = b.reserve(t0.Add(time.Minute), refund("b", 1))
	require.Equal(t, Reserved, v.Decide, v.Reason)
	assert.Equal(t, []Use{{Guard: "spend", Scope: "all", Amount: 1, Sum: 2, Limit: 10000}, {Guard: "one-a-minute", Scope: "all", Amount: 1, Sum: 1, Limit: 1}}, v.Uses)
}

// A reservation carries the run's earlier commits: each is committed before
// the call is decided, and counts as before (reserved or committed alike).
func TestReservationCarriesCommits(t *testing.T) {
	b := newBook(t, budget)
	require.Equal(t, Reserved, b.reserve(t0, refund("a", 4000)).Decide)
	r := refund("b", 6000)
	r.Commits = []string{"a", "never-reserved"}
	require.Equal(t, Reserved, b.reserve(t0, r).Decide)
	assert.Equal(t, []ScopeView{{Scope: "all", Committed: 4000, Reserved: 6000}}, b.view(t0).Guards[0].Scopes)
	r = refund("c", 1)
	r.Commits = make([]string, MaxCommits+1)
	assert.Equal(t, Denied, b.reserve(t0, r).Decide)
}
