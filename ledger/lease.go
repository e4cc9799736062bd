package ledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// This file is the ledger's side of leases: a worker takes a slice of a
// budget or rate ahead of need and spends it in its own process (spender.go),
// so a guarded call costs no round trip to the ledger (Google's Doorman does
// the same for rate limits). The ledger counts a lease's whole slice as held
// until the worker says what it spent (LeaseRequest.Used, counted from the
// moment it says so: later than the calls ran, so they stay in the window
// longer, never shorter) and what it still holds; a lease not renewed within
// LeaseTTL counts all it held as spent. Only budgets and rates are leased;
// a repeat limit counts calls by their digest, so its calls always come to
// the ledger. The ledger grants at most a quarter of what is left: near a
// limit, calls come to the ledger one by one, and the limit is exact.

// Lease names and bounds.
const (
	// UpdateLease is a worker's lease request (LeaseRequest → LeaseGrant).
	UpdateLease = "lease"
	// LeaseTTL is how long a grant holds without a renewal: past it the
	// ledger counts what the lease held as spent.
	LeaseTTL = 5 * time.Second
	// MaxLeases bounds the leases a ledger keeps at once (one a worker
	// process and task queue).
	MaxLeases = 256
	// MaxUsed bounds the slices of spent amounts a ledger keeps (per guard
	// and scope, one for each 64th of the guard's window).
	MaxUsed = 4096
	// MaxLeaseHolds bounds the guard scopes one lease request names.
	MaxLeaseHolds = 256
	// MaxHand bounds the calls one lease request hands to the ledger.
	MaxHand = 64
	// MaxSettled bounds the settled calls one lease request names.
	MaxSettled = 1024
	// usedSlices is how many slices a guard's window is kept in.
	usedSlices = 64
	// PageEvents: a ledger run continues as new once its history is this
	// long, within the first page a worker reads of it (256 events).
	PageEvents = 200
	// pageChange versions continuing as new by PageEvents.
	pageChange = "ledger-page"
)

// Lease is what one worker process holds of the guards.
type Lease struct {
	ID    string `json:"id"` // the lessee (LeaseRequest.Lessee): pid@host-nonce
	Until int64  `json:"u"`  // Unix milliseconds of the ledger's clock: past it, all it holds is spent
	Holds []Hold `json:"h"`
	// Renewed is when the lessee last renewed (Unix milliseconds): it was
	// told every pause made before then.
	Renewed int64 `json:"r,omitempty"`
}

// Used is an amount spent under a lease, counted toward a guard's scope
// from At (Unix milliseconds of the ledger's clock) until At leaves the
// guard's window.
type Used struct {
	Guard  string `json:"g"`
	Scope  string `json:"s"`
	At     int64  `json:"t"`
	Amount int64  `json:"a"`
}

// LeaseRequest is a worker's renewal of its lease: what it spent since its
// last request, what it still holds (reserved, or granted and not spent),
// and what it would like to hold more.
type LeaseRequest struct {
	// Lessee names the worker process and its spender (spender.go): only
	// workers reach the ledger.
	Lessee string `json:"lessee"`
	Used   []Hold `json:"used,omitempty"`
	Held   []Hold `json:"held,omitempty"`
	Want   []Want `json:"want,omitempty"`
	// Hand are calls reserved under the lease that have waited long (for a
	// human): the ledger keeps each as an entry, reserved by its run, and
	// the lease no longer holds them.
	Hand []Handed `json:"hand,omitempty"`
	// Settled are the entries (EntryOf their keys) of calls the lease
	// settled since the last request: a reservation of the same key the
	// ledger also holds (sent before a worker died, say) is released, for
	// the lease counted the call.
	Settled []string `json:"settled,omitempty"`
}

// Handed is a call a worker hands from its lease to the ledger.
type Handed struct {
	Key   string `json:"key"` // the entry's key (EntryOf the call's key)
	Run   string `json:"run,omitempty"`
	Holds []Hold `json:"holds"`
}

// Want is a slice of a guard's scope a worker asks for.
type Want struct {
	Guard  string `json:"guard"`
	Scope  string `json:"scope"`
	Amount int64  `json:"amount"`
	// Print is the worker's guard (GuardPrint): a worker whose guard
	// differs from the ledger's is granted nothing.
	Print string `json:"print"`
	// Min is the least slice of use to the worker (its last call's
	// amount): a smaller one is not granted. Near a limit the ledger then
	// grants nothing, and calls go to it one by one, so a grant never
	// takes what a call on its way to the ledger needs.
	Min int64 `json:"min,omitempty"`
}

// LeaseGrant is the ledger's answer to a lease request: the slices granted
// (each Want's, in order; 0 when none), and the pauses.
type LeaseGrant struct {
	// Renewed: the ledger held the lessee's lease. When it did not (it
	// lapsed, and the ledger counted all it held as spent), the worker
	// holds nothing of it either.
	Renewed bool     `json:"renewed,omitempty"`
	Grants  []Grant  `json:"grants,omitempty"`
	Pauses  []Pause  `json:"pauses,omitempty"`
	TTL     Duration `json:"ttl"`
}

// Duration is a time.Duration that marshals as milliseconds.
type Duration int64

// Std is d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) * time.Millisecond }

// Grant is one slice granted.
type Grant struct {
	Guard  string `json:"guard"`
	Scope  string `json:"scope"`
	Amount int64  `json:"amount"`
	Sum    int64  `json:"sum"` // the scope's sum with what is granted
	Limit  int64  `json:"limit"`
}

// GuardPrint is what a lease compares of a guard, the worker's and the
// ledger's: everything that decides what a call counts and how far.
func GuardPrint(g policy.Guard) string {
	return fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s", g.Kind, strings.Join(g.Tools, ","), g.Amount, g.Limit, g.Window, g.PerOrAll(), g.ExceedOrDeny())
}

// leasable reports whether the ledger leases slices of g.
func leasable(g policy.Guard) bool {
	return g.Kind == policy.GuardBudget || g.Kind == policy.GuardRate
}

// checkLease says why q is not a lease request the ledger takes, or nil.
func checkLease(q LeaseRequest) error {
	switch {
	case q.Lessee == "" || len(q.Lessee) > MaxKeyBytes:
		return fmt.Errorf("the lease request's lessee is empty or over %d bytes", MaxKeyBytes)
	case len(q.Used)+len(q.Held)+len(q.Want) > 3*MaxLeaseHolds || len(q.Want) > MaxLeaseHolds || len(q.Held) > MaxLeaseHolds || len(q.Used) > MaxLeaseHolds:
		return fmt.Errorf("the lease request names over %d guard scopes", MaxLeaseHolds)
	}
	for _, h := range slices.Concat(q.Used, q.Held) {
		if h.Guard == "" || len(h.Guard) > MaxKeyBytes || len(h.Scope) > MaxKeyBytes || h.Amount < 0 || h.Amount > policy.MaxGuardLimit {
			return errors.New("the lease request holds an amount with no guard, a name over the bounds, or an amount out of range")
		}
	}
	if len(q.Settled) > MaxSettled {
		return fmt.Errorf("the lease request names %d settled calls, at most %d", len(q.Settled), MaxSettled)
	}
	for _, id := range q.Settled {
		if len(id) != 32 {
			return errors.New("the lease request names a settled call that is not an entry's digest")
		}
	}
	if len(q.Hand) > MaxHand {
		return fmt.Errorf("the lease request hands %d calls to the ledger, at most %d", len(q.Hand), MaxHand)
	}
	for _, h := range q.Hand {
		if len(h.Key) != 32 || len(h.Run) > 32 || len(h.Holds) > MaxLeaseHolds {
			return errors.New("the lease request hands a call whose key or run is not an entry's digest, or with too many holds")
		}
		for _, x := range h.Holds {
			if x.Guard == "" || len(x.Guard) > MaxKeyBytes || len(x.Scope) > MaxKeyBytes || x.Amount < 0 || x.Amount > policy.MaxGuardLimit {
				return errors.New("the lease request hands a call holding an amount with no guard, a name over the bounds, or an amount out of range")
			}
		}
	}
	for _, w := range q.Want {
		if w.Guard == "" || len(w.Guard) > MaxKeyBytes || len(w.Scope) > MaxKeyBytes || len(w.Print) > 4*MaxKeyBytes || w.Amount < 0 || w.Amount > policy.MaxGuardLimit ||
			w.Min < 0 || w.Min > policy.MaxGuardLimit {
			return errors.New("the lease request wants an amount with no guard, a name over the bounds, or an amount out of range")
		}
	}
	return nil
}

// slice is how close together two spent amounts of g are kept as one.
func slice(g policy.Guard) int64 {
	return max(g.WindowDuration().Milliseconds()/usedSlices, 1000)
}

// spend counts amount toward g's scope from now: in the last slice of that
// scope when it began within a slice of now (it then counts from now, a
// little longer than its first amounts need), else in a new one. Past
// MaxUsed slices it folds into the scope's latest slice, whatever its age:
// what was spent is never dropped before its window ends.
func (b *book) spend(now time.Time, g policy.Guard, scope string, amount int64) {
	if amount <= 0 {
		return
	}
	at := now.UnixMilli()
	for i := len(b.st.Used) - 1; i >= 0; i-- {
		u := &b.st.Used[i]
		if u.Guard == g.ID && u.Scope == scope && (at-u.At < slice(g) || len(b.st.Used) >= MaxUsed) {
			u.At, u.Amount = max(u.At, at), u.Amount+amount
			return
		}
	}
	b.st.Used = append(b.st.Used, Used{Guard: g.ID, Scope: scope, At: at, Amount: amount})
}

// expire counts what every lease past its Until held as spent, and drops
// the lease; and drops the spent slices past their guards' windows.
func (b *book) expire(now time.Time) {
	at := now.UnixMilli()
	b.st.Leases = slices.DeleteFunc(b.st.Leases, func(l Lease) bool {
		if l.Until >= at {
			return false
		}
		for _, h := range l.Holds {
			if g, ok := b.keptByID(h.Guard); ok {
				b.spend(time.UnixMilli(l.Until), g, h.Scope, h.Amount)
			}
		}
		return true
	})
	b.st.Used = slices.DeleteFunc(b.st.Used, func(u Used) bool {
		g, ok := b.keptByID(u.Guard)
		return !ok || u.At <= at-g.WindowDuration().Milliseconds()
	})
}

// leased is what the leases and the spent slices count toward g's scope
// within its window.
func (b *book) leased(now time.Time, g policy.Guard, scope string) (spent, held int64) {
	cutoff := now.UnixMilli() - g.WindowDuration().Milliseconds()
	for _, u := range b.st.Used {
		if u.Guard == g.ID && u.Scope == scope && u.At > cutoff {
			spent += u.Amount
		}
	}
	for _, l := range b.st.Leases {
		for _, h := range l.Holds {
			if h.Guard == g.ID && h.Scope == scope {
				held += h.Amount
			}
		}
	}
	return spent, held
}

// addHold adds amount to g's scope in holds.
func addHold(holds []Hold, guard, scope string, amount int64) []Hold {
	if amount <= 0 {
		return holds
	}
	if i := slices.IndexFunc(holds, func(h Hold) bool { return h.Guard == guard && h.Scope == scope }); i >= 0 {
		holds[i].Amount += amount
		return holds
	}
	return append(holds, Hold{Guard: guard, Scope: scope, Amount: amount})
}

// holdOf is what holds hold of g's scope.
func holdOf(holds []Hold, guard, scope string) int64 {
	var n int64
	for _, h := range holds {
		if h.Guard == guard && h.Scope == scope {
			n += h.Amount
		}
	}
	return n
}

// renew takes a lease request: it counts what the worker spent, keeps what
// it still holds (never more than its lease held), and grants what it may.
func (b *book) renew(now time.Time, q LeaseRequest) LeaseGrant {
	b.expire(now)
	out := LeaseGrant{Pauses: slices.Clone(b.st.Pauses), TTL: Duration(LeaseTTL.Milliseconds())}
	i := slices.IndexFunc(b.st.Leases, func(l Lease) bool { return l.ID == q.Lessee })
	for _, u := range q.Used { // spent: counted whatever the lease held, never less
		if g, ok := b.guardByID(u.Guard); ok && i >= 0 {
			// Without the lease it lapsed, and all it held, this
			// included, counts as spent already.
			b.spend(now, g, u.Scope, u.Amount)
		}
	}
	for _, id := range q.Settled { // counted by the lease: not by an entry too
		if j := b.find(id); j >= 0 && !b.st.Entries[j].Committed {
			b.st.Entries[j].Released = true
		}
	}
	var before []Hold
	switch {
	case i >= 0:
		before = b.st.Leases[i].Holds
		out.Renewed = true
		b.take(now, q.Hand)
	case len(b.st.Leases) >= MaxLeases:
		out.Grants = make([]Grant, len(q.Want))
		for j, w := range q.Want {
			out.Grants[j] = Grant{Guard: w.Guard, Scope: w.Scope}
		}
		return out
	default:
		b.st.Leases = append(b.st.Leases, Lease{ID: q.Lessee})
		i = len(b.st.Leases) - 1
	}
	l := &b.st.Leases[i]
	l.Holds = nil
	for _, h := range q.Held { // still held: at most what the lease held
		l.Holds = addHold(l.Holds, h.Guard, h.Scope, min(h.Amount, holdOf(before, h.Guard, h.Scope)-holdOf(l.Holds, h.Guard, h.Scope)))
	}
	for _, w := range q.Want {
		gr := Grant{Guard: w.Guard, Scope: w.Scope}
		if g, ok := b.guardByID(w.Guard); ok && leasable(g) && GuardPrint(g) == w.Print && w.Amount > 0 && len(b.st.Used) < MaxUsed {
			sum := b.sum(now, g, w.Scope, "", -1) // this lease's holds included
			if gr.Amount = max(min(w.Amount, (g.Limit-sum)/4), 0); gr.Amount < w.Min {
				gr.Amount = 0 // of no use to the worker's calls
			}
			gr.Sum, gr.Limit = sum+gr.Amount, g.Limit
			l.Holds = addHold(l.Holds, w.Guard, w.Scope, gr.Amount)
		}
		out.Grants = append(out.Grants, gr)
	}
	if len(l.Holds) == 0 && b.role != countsPause {
		b.st.Leases = slices.Delete(b.st.Leases, i, i+1)
	} else { // the home ledger keeps a lease that holds nothing: its worker is told the pauses (View.Unseen)
		l.Until, l.Renewed = now.Add(LeaseTTL).UnixMilli(), now.UnixMilli()
	}
	return out
}

// take keeps the calls a lease hands over as entries, reserved by their
// runs, from now. One the ledger has no room for counts as spent now: the
// ledger errs on the side of the budget.
func (b *book) take(now time.Time, hand []Handed) {
	for _, h := range hand {
		if b.find(h.Key) >= 0 {
			continue
		}
		if len(b.st.Entries) >= MaxEntries {
			for _, x := range h.Holds {
				if g, ok := b.guardByID(x.Guard); ok {
					b.spend(now, g, x.Scope, x.Amount)
				}
			}
			continue
		}
		b.st.Entries = append(b.st.Entries, Entry{Key: h.Key, At: now.UnixMilli(), Holds: slices.Clone(h.Holds), Run: h.Run})
	}
}

// giveBack takes back what lessee's lease returns with a reservation (never
// more than it holds).
func (b *book) giveBack(lessee string, ret []Hold) {
	i := slices.IndexFunc(b.st.Leases, func(l Lease) bool { return lessee != "" && l.ID == lessee })
	if i < 0 {
		return
	}
	l := &b.st.Leases[i]
	for _, r := range ret {
		for j := range l.Holds {
			if h := &l.Holds[j]; h.Guard == r.Guard && h.Scope == r.Scope {
				h.Amount -= min(max(r.Amount, 0), h.Amount)
			}
		}
	}
	l.Holds = slices.DeleteFunc(l.Holds, func(h Hold) bool { return h.Amount == 0 })
	if len(l.Holds) == 0 {
		b.st.Leases = slices.Delete(b.st.Leases, i, i+1)
	}
}
