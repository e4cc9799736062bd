package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// This file is a worker's side of leases (lease.go): the spender of one
// task queue's ledger. ReserveActivity asks it first; it answers a call in
// the worker's process when every guard that covers the call is a budget or
// a rate whose slice the worker holds enough of, no pause it knows of (from
// a renewal at most pauseFresh old) stops the tool, and the key is not one
// the ledger itself counts. Otherwise the call goes to the ledger, as it
// did before leases. A renewal each renewEvery, while the worker reserves,
// says what its calls spent, returns what it holds and does not need, asks
// for more, and learns the pauses. A call that holds its slice longer than
// handAfter (one waiting for a human) is handed to the ledger as an entry,
// so a lease holds only calls about to run.

// Spender timings.
const (
	renewEvery = time.Second
	// pauseFresh: a spender spends only within this of its last renewal's
	// start (the pauses it knows are at most that old); past it, calls go
	// to the ledger, which fails closed.
	pauseFresh = 2 * time.Second
	// handAfter: a call reserved under a lease longer than this is handed
	// to the ledger (LeaseRequest.Hand).
	handAfter = 10 * time.Second
	// idleAfter: renewals with no call reserved before a slice is returned.
	idleAfter = 3
	// quietAfter: a spender with nothing held stops renewing after this
	// long without a reservation.
	quietAfter = 10 * time.Second
	// maxLocalKeys bounds the settled keys a spender remembers (a call
	// reserved again here counts once).
	maxLocalKeys = 1 << 16
	// renewTimeout bounds one renewal's round trip.
	renewTimeout = 5 * time.Second
	// giveUpAfter: renewals failed in a row, with nobody reserving for
	// quietAfter, before a spender stops renewing (its lease lapses).
	giveUpAfter = 10
)

// spender is one worker process's lease of one ledger: a guard's, which it
// spends from, or the home ledger's (guard ""), which tells it the pauses.
type spender struct {
	eng    *policy.Engine
	guard  string   // the guard leased ("": none, the home ledger's lease)
	prints []string // GuardPrint of each of eng's guards
	lessee string
	// send sends a lease request under an update id, returning the grant.
	send func(ctx context.Context, updateID string, q LeaseRequest) (LeaseGrant, error)
	now  func() time.Time

	mu       sync.Mutex
	slots    []*slot
	keys     map[string]*local // key id → the call reserved here
	order    []string          // key ids, oldest first
	pauses   []Pause
	fresh    time.Time // spend only before this (local clock)
	gen      int       // bumped when the ledger no longer held the lease
	seq      int       // the next request's number
	pending  *sent     // a request not yet answered: sent again as it was
	lastUse  time.Time
	running  bool
	kick     chan struct{}
	sending  chan struct{} // closed when the request on its way is answered
	toldAt   time.Time     // when an act this worker carried told it the pauses
	settled  []string      // entries of calls settled here, for the next request
	failures int           // renewals failed in a row
}

// slot is what the spender holds of one guard's scope.
type slot struct {
	guard, scope, print string
	avail               int64 // granted, not yet reserved
	inflight            int64 // reserved by calls not yet settled
	used                int64 // committed since the last request
	recent              int64 // reserved since the last request: sizes the next want
	unit                int64 // the last call's amount
	need                bool  // a call found too little
	idle                int   // requests without a reservation between
	sum, limit          int64 // the scope's sum and limit at the last grant
}

// local is one call reserved under the lease (or sent to the ledger).
type local struct {
	run       string
	holds     []Hold
	gen       int
	at        time.Time
	committed bool
	released  bool
	ledger    bool // the ledger counts it (reserved there, or handed to it)
}

// sent is a request on its way, with what it moved out of the slots.
type sent struct {
	id   string
	q    LeaseRequest
	hand []string // key ids handed
}

// newSpender is a spender of eng's guard of id guard ("": of the home
// ledger, which leases no guard), sending lease requests with send. nil
// eng: nil (no guards to lease).
func newSpender(eng *policy.Engine, guard string, send func(context.Context, string, LeaseRequest) (LeaseGrant, error)) *spender {
	if eng == nil {
		return nil
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	s := &spender{eng: eng, guard: guard, lessee: cut(fmt.Sprintf("%d@%s-%s", os.Getpid(), host, hex.EncodeToString(b[:])), 200), send: send, now: time.Now,
		keys: map[string]*local{}, kick: make(chan struct{}, 1)}
	for _, g := range eng.Guards() {
		s.prints = append(s.prints, GuardPrint(g))
	}
	return s
}

// mine reports whether the spender leases g.
func (s *spender) mine(g policy.Guard) bool { return s.guard != "" && g.ID == s.guard }

// slotOf is the slot of g's scope, added when there is none.
func (s *spender) slotOf(g policy.Guard, print, scope string) *slot {
	for _, sl := range s.slots {
		if sl.guard == g.ID && sl.scope == scope {
			return sl
		}
	}
	sl := &slot{guard: g.ID, scope: scope, print: print}
	s.slots = append(s.slots, sl)
	return sl
}

// reserve answers r in the worker, or says (false) that the ledger must.
func (s *spender) reserve(r Reservation) (Verdict, bool) {
	if s == nil || s.guard == "" || len(r.Commits) > 0 || r.Over != "" || checkReservation(r) != nil {
		return Verdict{}, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUse = now
	defer s.wake()
	id := keyID(r.Key)
	if k, ok := s.keys[id]; ok && !k.released {
		if k.ledger {
			return Verdict{}, false // the ledger counts it: it answers again
		}
		return answered(r, Verdict{Decide: Reserved, Again: true, Committed: k.committed, Uses: s.uses(k.holds)}), true
	}
	now = s.awaitRenewal(now)
	if _, paused := pauseOf(s.pauses, r); paused || !now.Before(s.fresh) {
		s.wantFor(r) // leases for the next calls
		return Verdict{}, false
	}
	var holds []Hold
	short := false
	for i, g := range s.eng.Guards() {
		if !s.mine(g) || !g.Covers(r.Tool, r.Destructive) {
			continue
		}
		if !leasable(g) {
			return Verdict{}, false
		}
		amount, err := s.eng.GuardAmount(i, r.Tool, r.Args, r.RequestedBy)
		if err != nil {
			return Verdict{}, false // the ledger says why
		}
		sl := s.slotOf(g, s.prints[i], scope(g, r))
		sl.unit, sl.idle = max(amount, 1), 0
		if sl.avail < amount {
			sl.need, short = true, true
			continue
		}
		holds = append(holds, Hold{Guard: g.ID, Scope: sl.scope, Amount: amount})
	}
	if short {
		return Verdict{}, false
	}
	for _, h := range holds {
		sl := s.find(h.Guard, h.Scope)
		sl.avail -= h.Amount
		sl.inflight += h.Amount
		sl.recent += h.Amount
	}
	s.remember(id, &local{run: r.Workflow, holds: holds, gen: s.gen, at: now})
	return answered(r, Verdict{Decide: Reserved, Uses: s.uses(holds)}), true
}

// toLedger is r as the ledger gets it from this worker: it returns what the
// worker holds unspent of every guard scope r counts toward that holds too
// little for r, so the worker's own slice does not stand in the way of its
// call near a limit.
func (s *spender) toLedger(r Reservation) Reservation {
	if s == nil || checkReservation(r) != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.sending; ch != nil { // a grant on its way is returned too
		s.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(renewTimeout):
		}
		s.mu.Lock()
	}
	for i, g := range s.eng.Guards() {
		if !s.mine(g) || !g.Covers(r.Tool, r.Destructive) || !leasable(g) {
			continue
		}
		amount, err := s.eng.GuardAmount(i, r.Tool, r.Args, r.RequestedBy)
		if sl := s.find(g.ID, scope(g, r)); err == nil && sl != nil && sl.avail > 0 && sl.avail < amount {
			// Too little for this call: near the limit. Returned, so the
			// ledger counts the call against what is left, exactly.
			r.Return = append(r.Return, Hold{Guard: sl.guard, Scope: sl.scope, Amount: sl.avail})
			sl.avail = 0
		}
	}
	if len(r.Return) > 0 {
		r.Lessee = s.lessee
	}
	return r
}

// sentToLedger notes that the ledger answered the reservation of key (a
// call counted there is answered there again, and settled there).
func (s *spender) sentToLedger(key string, v Verdict) {
	if s == nil || v.Decide != Reserved {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := keyID(key)
	if k, ok := s.keys[id]; ok && !k.ledger {
		return // counted here: settled here
	}
	s.remember(id, &local{ledger: true, at: s.now()})
}

// remember keeps k as key id's call, forgetting the oldest settled calls
// past maxLocalKeys.
func (s *spender) remember(id string, k *local) {
	if _, ok := s.keys[id]; !ok {
		s.order = append(s.order, id)
	}
	s.keys[id] = k
	for len(s.order) > maxLocalKeys {
		old := s.keys[s.order[0]]
		if old != nil && !old.ledger && !old.committed && !old.released {
			break // still held: kept until settled
		}
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
}

// settle settles the call of st.Key in the worker when it was reserved
// here, or says (false) that the ledger must.
func (s *spender) settle(st Settlement) (Settled, bool) {
	if s == nil || st.Key == "" {
		return Settled{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := keyID(st.Key)
	k, ok := s.keys[id]
	if !ok || k.ledger {
		return Settled{}, false
	}
	if st.Workflow != "" && k.run != "" && st.Workflow != k.run {
		return Settled{Found: true, Committed: k.committed, Entry: id, Refused: "the settlement comes from another run than the one that reserved the call: refused"}, true
	}
	live := k.gen == s.gen // else the ledger counted the lease's holds as spent when it lapsed
	switch {
	case st.Commit && !k.committed:
		for _, h := range k.holds {
			if sl := s.find(h.Guard, h.Scope); sl != nil && live && !k.released {
				sl.inflight -= h.Amount
				sl.used += h.Amount
			} else if sl != nil && live { // released before, run after all: spent
				sl.used += h.Amount
			}
		}
		k.committed, k.released = true, false
		s.noteSettled(id)
	case !st.Commit && !k.committed && !k.released:
		for _, h := range k.holds {
			if sl := s.find(h.Guard, h.Scope); sl != nil && live {
				sl.inflight -= h.Amount
				sl.avail += h.Amount
			}
		}
		k.released = true
		s.noteSettled(id)
	}
	return Settled{Found: true, Committed: k.committed, Entry: id}, true
}

// noteSettled keeps id for the next request's Settled (the oldest dropped
// past a few requests' worth: they only tidy what a crash left).
func (s *spender) noteSettled(id string) {
	if s.settled = append(s.settled, id); len(s.settled) > 4*MaxSettled {
		s.settled = s.settled[len(s.settled)-4*MaxSettled:]
	}
}

// find is the slot of guard's scope, nil if none.
func (s *spender) find(guard, scope string) *slot {
	for _, sl := range s.slots {
		if sl.guard == guard && sl.scope == scope {
			return sl
		}
	}
	return nil
}

// uses are what holds count toward, as the spender knows the sums.
func (s *spender) uses(holds []Hold) []Use {
	out := make([]Use, 0, len(holds))
	for _, h := range holds {
		u := Use{Guard: h.Guard, Scope: h.Scope, Amount: h.Amount}
		if sl := s.find(h.Guard, h.Scope); sl != nil {
			u.Sum, u.Limit = sl.sum-sl.avail, sl.limit
		}
		out = append(out, u)
	}
	return out
}

// wantFor marks the slots r would spend from as short, so the next renewal
// asks for them.
func (s *spender) wantFor(r Reservation) {
	for i, g := range s.eng.Guards() {
		if !s.mine(g) || !g.Covers(r.Tool, r.Destructive) || !leasable(g) {
			continue
		}
		amount, err := s.eng.GuardAmount(i, r.Tool, r.Args, r.RequestedBy)
		if err != nil {
			continue
		}
		sl := s.slotOf(g, s.prints[i], scope(g, r))
		sl.unit, sl.idle, sl.need = max(amount, 1), 0, true
	}
}

// wake starts the renewal loop, or hurries it when a slot is short. Called
// with s.mu held.
func (s *spender) wake() {
	if !s.running {
		s.running = true
		go s.loop()
	}
	if slices.ContainsFunc(s.slots, func(sl *slot) bool { return sl.need }) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// loop renews the lease until the spender holds nothing and has been
// quiet for quietAfter.
func (s *spender) loop() {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.kick:
		}
		s.mu.Lock()
		p := s.pending
		if p == nil {
			p = s.request()
		}
		if p == nil {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.pending = p
		done := make(chan struct{})
		s.sending = done
		s.mu.Unlock()
		start := s.now()
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		g, err := s.send(ctx, p.id, p.q)
		cancel()
		s.mu.Lock()
		if err != nil {
			s.failures++
			if s.failures >= giveUpAfter && s.now().Sub(s.lastUse) >= quietAfter {
				// Nobody reserves and the ledger does not answer (the
				// worker stopped, its client closed): the lease lapses
				// there, and all it held counts as spent. Stop renewing.
				s.slots, s.pending, s.settled, s.running = nil, nil, nil, false
				s.sending = nil
				close(done)
				s.mu.Unlock()
				return
			}
		} else {
			s.failures = 0
			s.apply(p, g, start)
			s.pending = nil
		}
		s.sending = nil
		close(done)
		s.mu.Unlock()
		// Renew every renewEvery; after a failure (a ledger continuing as
		// new refuses it) try again sooner, backing off to renewEvery.
		next := renewEvery
		if f := s.failuresNow(); f > 0 {
			next = min(50*time.Millisecond<<min(f-1, 4), renewEvery)
		}
		t.Reset(next)
	}
}

// failuresNow is s.failures, read under the lock.
func (s *spender) failuresNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures
}

// request is the next lease request, moving what it reports out of the
// slots; nil when there is nothing to say and the spender has been quiet.
func (s *spender) request() *sent {
	now := s.now()
	q := LeaseRequest{Lessee: s.lessee}
	var hand []string
	s.slots = slices.DeleteFunc(s.slots, func(sl *slot) bool {
		if sl.recent == 0 && !sl.need {
			sl.idle++
		}
		if sl.idle >= idleAfter { // not needed: returned
			sl.avail = 0
		}
		q.Used = addHold(q.Used, sl.guard, sl.scope, sl.used)
		sl.used = 0
		want := int64(0)
		if sl.idle < idleAfter {
			want = min(max(2*sl.recent, 8*sl.unit), policy.MaxGuardLimit)
		}
		if want > 0 {
			q.Want = append(q.Want, Want{Guard: sl.guard, Scope: sl.scope, Amount: want, Print: sl.print, Min: sl.unit})
		}
		sl.recent, sl.need = 0, false
		return sl.avail == 0 && sl.inflight == 0 && want == 0
	})
	// Calls held past handAfter go to the ledger as entries.
	for _, id := range s.order {
		k := s.keys[id]
		if k == nil || k.ledger || k.committed || k.released || k.gen != s.gen || now.Sub(k.at) < handAfter || len(q.Hand) >= MaxHand {
			continue
		}
		q.Hand = append(q.Hand, Handed{Key: id, Run: keyIDOrEmpty(k.run), Holds: k.holds})
		hand = append(hand, id)
		for _, h := range k.holds {
			if sl := s.find(h.Guard, h.Scope); sl != nil {
				sl.inflight -= h.Amount
			}
		}
		k.ledger = true
	}
	for _, sl := range s.slots {
		q.Held = addHold(q.Held, sl.guard, sl.scope, sl.avail+sl.inflight)
	}
	n := min(len(s.settled), MaxSettled)
	q.Settled, s.settled = s.settled[:n:n], s.settled[n:]
	if len(q.Used) == 0 && len(q.Held) == 0 && len(q.Want) == 0 && len(q.Hand) == 0 && len(q.Settled) == 0 && now.Sub(s.lastUse) >= quietAfter {
		return nil
	}
	s.seq++
	return &sent{id: fmt.Sprintf("l-%s-%d", s.lessee, s.seq), q: q, hand: hand}
}

// keyIDOrEmpty is the digest of a run's workflow id as entries keep it.
func keyIDOrEmpty(run string) string {
	if run == "" {
		return ""
	}
	return keyID(run)
}

// apply takes the ledger's answer to p, sent at start.
func (s *spender) apply(p *sent, g LeaseGrant, start time.Time) {
	if !g.Renewed && len(p.q.Held) > 0 {
		// The ledger no longer held the lease (it lapsed): it counted all
		// it held as spent, and holds none of it now.
		s.gen++
		for _, sl := range s.slots {
			sl.avail, sl.inflight = 0, 0
		}
	}
	for j, gr := range g.Grants {
		if j >= len(p.q.Want) {
			break
		}
		w := p.q.Want[j]
		sl := s.find(w.Guard, w.Scope)
		if sl == nil || gr.Guard != w.Guard || gr.Scope != w.Scope {
			continue // returned meanwhile; the next request returns the grant
		}
		sl.avail += gr.Amount
		sl.sum, sl.limit = gr.Sum, gr.Limit
	}
	if !start.Before(s.toldAt) { // else an act told newer pauses
		s.pauses = g.Pauses
	}
	fresh := pauseFresh
	if ttl := g.TTL.Std(); ttl > 0 {
		fresh = min(fresh, ttl) // never spend past the ledger's own term
	}
	s.fresh = start.Add(fresh)
}

// awaitRenewal waits (a little) for a renewal on its way when the last one
// is no longer fresh at now, rather than send the call to the ledger, which
// a renewal that is late because the ledger is busy would make busier
// still. Called with s.mu held, which it lets go while it waits; it
// returns the time after.
func (s *spender) awaitRenewal(now time.Time) time.Time {
	ch := s.sending
	if now.Before(s.fresh) || ch == nil {
		return now
	}
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(pauseFresh):
	}
	s.mu.Lock()
	return s.now()
}

// pausedBy is the pause the spender knows of that stops r, if any, and
// whether it knows (its last renewal is fresh): the home ledger's spender
// answers whether a call is paused without asking the ledger. It waits a
// little for a renewal on its way.
func (s *spender) pausedBy(r Reservation) (p Pause, paused, known bool) {
	if s == nil {
		return Pause{}, false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.lastUse = now
	defer s.wake()
	if now = s.awaitRenewal(now); !now.Before(s.fresh) {
		return Pause{}, false, false
	}
	p, paused = pauseOf(s.pauses, r)
	return p, paused, true
}

// told takes the pauses the ledger answered an act this worker carried
// with: a pause stops this worker's calls at once.
func (s *spender) told(pauses []Pause) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pauses, s.toldAt = slices.Clone(pauses), s.now()
}
