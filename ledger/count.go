package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// This file is the ledger's bookkeeping: pure, deterministic (it runs
// inside the ledger's workflow), with no Temporal in it. Every loop ranges
// over a slice, never over a map.

// MaxToolBytes bounds a tool's name as the ledger keeps it (a reservation's
// tool, a pause's).
const MaxToolBytes = 128

// book keeps a State under a compiled policy (nil engine: no policy, no
// guards; only pauses stop a call).
type book struct {
	st  *State
	eng *policy.Engine
	// role is what the ledger counts (shard.go): every guard, the pauses
	// only (the home ledger), or the guard only (a guard's ledger).
	role role
	only string
}

// keyID is an entry's key: the hex of the first 16 bytes of the SHA-256 of
// a reservation's key.
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// digestID is what an entry keeps of a call's digest: its first 16 hex.
func digestID(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

// checkReservation says why r is not one a ledger takes, or nil.
func checkReservation(r Reservation) error {
	switch {
	case r.Key == "":
		return errors.New("the reservation has no key (the call's idempotency key)")
	case len(r.Key) > MaxKeyBytes:
		return fmt.Errorf("the reservation's key is %d bytes, at most %d", len(r.Key), MaxKeyBytes)
	case r.Tool == "":
		return errors.New("the reservation names no tool")
	case len(r.Tool) > MaxToolBytes:
		return fmt.Errorf("the reservation's tool is %d bytes, at most %d", len(r.Tool), MaxToolBytes)
	case len(r.Args) > MaxArgsBytes:
		return fmt.Errorf("the reservation's arguments are %d bytes, at most %d", len(r.Args), MaxArgsBytes)
	case len(r.Workflow) > MaxKeyBytes || len(r.RequestedBy) > MaxKeyBytes || len(r.CallID) > MaxKeyBytes ||
		len(r.Digest) > MaxKeyBytes || len(r.Over) > MaxKeyBytes:
		return fmt.Errorf("the reservation's workflow, call id, digest, requester or over is over %d bytes", MaxKeyBytes)
	case r.Stage != StageGate && r.Stage != StageDecided:
		return fmt.Errorf("the reservation's stage is %q, want %s or %s", cut(r.Stage, 40), StageGate, StageDecided)
	case len(r.Commits) > MaxCommits:
		return fmt.Errorf("the reservation carries %d commits, at most %d", len(r.Commits), MaxCommits)
	case len(r.Lessee) > MaxKeyBytes || len(r.Return) > MaxLeaseHolds:
		return fmt.Errorf("the reservation's lessee is over %d bytes, or it returns over %d guard scopes", MaxKeyBytes, MaxLeaseHolds)
	}
	for _, h := range r.Return {
		if h.Amount < 0 || len(h.Guard) > MaxKeyBytes || len(h.Scope) > MaxKeyBytes {
			return errors.New("the reservation returns a negative amount, or a name over the bounds")
		}
	}
	for _, k := range r.Commits {
		if k == "" || len(k) > MaxKeyBytes {
			return fmt.Errorf("the reservation carries a commit whose key is empty or over %d bytes", MaxKeyBytes)
		}
	}
	return nil
}

// guards are the policy's guards this ledger counts (none without a
// policy).
func (b *book) guards() []policy.Guard {
	if b.eng == nil || b.role == countsPause {
		return nil
	}
	if b.role == countsGuard {
		return slices.DeleteFunc(slices.Clone(b.eng.Guards()), func(g policy.Guard) bool { return g.ID != b.only })
	}
	return b.eng.Guards()
}

// kept are the guards whose entries and spent slices this ledger keeps
// until their windows end: its own, and on the home ledger every guard.
func (b *book) kept() []policy.Guard {
	if b.role == countsPause && b.eng != nil {
		return b.eng.Guards()
	}
	return b.guards()
}

// keptByID is the guard of id among kept, false if none.
func (b *book) keptByID(id string) (policy.Guard, bool) {
	for _, g := range b.kept() {
		if g.ID == id {
			return g, true
		}
	}
	return policy.Guard{}, false
}

// mine reports whether this ledger counts g.
func (b *book) mine(g policy.Guard) bool {
	switch b.role {
	case countsPause:
		return false
	case countsGuard:
		return g.ID == b.only
	}
	return true
}

// longest is the longest window of the guards this ledger keeps entries
// for (0: no guard): the home ledger keeps what it counted before shards
// for as long as any guard's window, so that a guard's ledger started
// later takes it (stateOf).
func (b *book) longest() time.Duration {
	var w time.Duration
	for _, g := range b.kept() {
		w = max(w, g.WindowDuration())
	}
	return w
}

// prune drops the entries older than the longest guard window (every entry
// when there is no guard).
func (b *book) prune(now time.Time) {
	cutoff := now.UnixMilli() - b.longest().Milliseconds()
	b.st.Entries = slices.DeleteFunc(b.st.Entries, func(e Entry) bool { return e.At <= cutoff })
}

// find is the index of the entry of key id, or -1.
func (b *book) find(id string) int {
	return slices.IndexFunc(b.st.Entries, func(e Entry) bool { return e.Key == id })
}

// scope is what guard g counts r toward.
func scope(g policy.Guard, r Reservation) string {
	switch g.PerOrAll() {
	case policy.PerTool:
		return "tool:" + r.Tool
	case policy.PerRequester:
		return "requester:" + r.RequestedBy
	case policy.PerRun:
		return "run:" + r.Workflow
	}
	return "all"
}

// sum is what the entries within g's window count toward scope (the entry
// at index skip left out). A budget and a rate count entries not released;
// a repeat counts every proposal of the call of digest dig, released or not.
func (b *book) sum(now time.Time, g policy.Guard, scope, dig string, skip int) int64 {
	cutoff := now.UnixMilli() - g.WindowDuration().Milliseconds()
	var n int64
	for i, e := range b.st.Entries {
		if i == skip || e.At <= cutoff {
			continue
		}
		if g.Kind == policy.GuardRepeat {
			if e.Digest != dig {
				continue
			}
		} else if e.Released {
			continue
		}
		for _, h := range e.Holds {
			if h.Guard == g.ID && h.Scope == scope {
				n += h.Amount
			}
		}
	}
	if g.Kind != policy.GuardRepeat { // leased: spent under leases, and held by them
		spent, held := b.leased(now, g, scope)
		n += spent + held
	}
	return n
}

// guardByID is the guard of id, false if the policy has none.
func (b *book) guardByID(id string) (policy.Guard, bool) {
	for _, g := range b.guards() {
		if g.ID == id {
			return g, true
		}
	}
	return policy.Guard{}, false
}

// uses are what entry i counts toward, as it is now.
func (b *book) uses(now time.Time, i int) []Use {
	e := b.st.Entries[i]
	var out []Use
	for _, h := range e.Holds {
		g, ok := b.guardByID(h.Guard)
		if !ok {
			continue
		}
		out = append(out, Use{Guard: h.Guard, Scope: h.Scope, Amount: h.Amount, Sum: b.sum(now, g, h.Scope, e.Digest, -1), Limit: g.Limit})
	}
	return out
}

// pausedBy is the pause that stops r, if any: r's tool's own, else the
// pause of every destructive tool.
func (b *book) pausedBy(r Reservation) (Pause, bool) { return pauseOf(b.st.Pauses, r) }

// pauseOf is the pause in pauses that stops r, if any: r's tool's own,
// else the pause of every destructive tool (the ledger's, and a worker's
// lease's copy of them).
func pauseOf(pauses []Pause, r Reservation) (Pause, bool) {
	if i := slices.IndexFunc(pauses, func(p Pause) bool { return p.Tool == r.Tool }); i >= 0 {
		return pauses[i], true
	}
	if !r.Destructive {
		return Pause{}, false
	}
	if i := slices.IndexFunc(pauses, func(p Pause) bool { return p.Tool == AllTools }); i >= 0 {
		return pauses[i], true
	}
	return Pause{}, false
}

// pausedReason tells the planner why p stops a call of tool.
func pausedReason(p Pause, tool string) string {
	at := p.At.UTC().Format(time.RFC3339)
	if p.Tool == AllTools {
		return fmt.Sprintf("every destructive tool is paused fleet-wide by %s at %s: %s (toolgate unpause --all lets them run again)", p.By, at, p.Reason)
	}
	return fmt.Sprintf("%s is paused fleet-wide by %s at %s: %s (toolgate unpause %s lets it run again)", tool, p.By, at, p.Reason, tool)
}

// reserve counts one call, or says why it may not go on.
func (b *book) reserve(now time.Time, r Reservation) Verdict {
	if err := checkReservation(r); err != nil {
		return Verdict{Decide: Denied, Reason: "the fleet ledger refuses this reservation: " + err.Error()}
	}
	for _, k := range r.Commits { // the run's earlier calls that ran
		b.settle(now, Settlement{Key: k, Commit: true})
	}
	if p, ok := b.pausedBy(r); ok {
		return Verdict{Decide: Paused, Pause: &p, Reason: pausedReason(p, r.Tool)}
	}
	if r.PausesOnly { // asked whether the call is paused: it is not
		return Verdict{Decide: Reserved}
	}
	switch gs := coveringGuards(b.eng, r.Tool, r.Destructive); {
	case b.role == countsPause && len(gs) > 0:
		return Verdict{Decide: Denied, Guard: gs[0], Reason: unshardedReason(gs)}
	case b.role == countsGuard && len(b.guards()) == 0:
		return Verdict{Decide: Denied, Guard: b.only, Reason: fmt.Sprintf("this fleet ledger counts guard %s, which the policy of the worker it runs on does not have: "+
			"the call is refused until the workers' policies agree", b.only)}
	}
	b.prune(now)
	b.expire(now)
	b.giveBack(r.Lessee, r.Return)
	id, dig := keyID(r.Key), digestID(r.Digest)
	at := b.find(id)
	if at >= 0 && !b.st.Entries[at].Released {
		e := b.st.Entries[at]
		return Verdict{Decide: Reserved, Again: true, Committed: e.Committed, Uses: b.uses(now, at)}
	}
	var (
		holds     []Hold
		uses      []Use
		deny, ask *Verdict
	)
	refuse := func(v Verdict) { // the first deny wins, else the first ask
		if v.Decide == Denied && deny == nil {
			deny = &v
		}
		if v.Decide == Ask && ask == nil {
			ask = &v
		}
	}
	var all []policy.Guard // every guard, by its index in the policy (GuardAmount)
	if b.eng != nil {
		all = b.eng.Guards()
	}
	for i, g := range all {
		if !b.mine(g) || !g.Covers(r.Tool, r.Destructive) {
			continue
		}
		sc := scope(g, r)
		amount, err := b.eng.GuardAmount(i, r.Tool, r.Args, r.RequestedBy)
		if err != nil {
			refuse(Verdict{Decide: Denied, Guard: g.ID, Reason: fmt.Sprintf("the fleet ledger cannot count this call toward guard %s, so it is refused: %v", g.ID, err)})
			continue
		}
		if g.Kind == policy.GuardRepeat && dig == "" {
			refuse(Verdict{Decide: Denied, Guard: g.ID, Reason: fmt.Sprintf("guard %s counts repeats of a call by its digest, and this reservation has none, so it is refused", g.ID)})
			continue
		}
		total := b.sum(now, g, sc, dig, at) + amount
		if total > g.Limit && !(r.Over == g.ID && g.ExceedOrDeny() == policy.Ask) {
			v := Verdict{Decide: Denied, Guard: g.ID, Reason: overReason(g, sc, amount, total)}
			if g.ExceedOrDeny() == policy.Ask {
				need := b.eng.Policy().GuardNeed(g, r.Tool)
				v.Decide, v.Need = Ask, &need
			}
			refuse(v)
			continue
		}
		holds = append(holds, Hold{Guard: g.ID, Scope: sc, Amount: amount})
		uses = append(uses, Use{Guard: g.ID, Scope: sc, Amount: amount, Sum: total, Limit: g.Limit})
	}
	switch {
	case deny != nil:
		return *deny
	case ask != nil:
		return *ask
	case len(holds) == 0:
		return Verdict{Decide: Reserved}
	}
	e := Entry{Key: id, At: now.UnixMilli(), Digest: dig, Holds: holds}
	if r.Workflow != "" {
		e.Run = keyID(r.Workflow)
	}
	if at >= 0 { // released before: it counts again, from now
		b.st.Entries[at] = e
		return Verdict{Decide: Reserved, Uses: uses}
	}
	if n := len(b.st.Entries); n >= MaxEntries {
		return Verdict{Decide: Denied, Reason: fmt.Sprintf("the fleet ledger holds %d reservations within its guards' windows, at most %d: "+
			"it refuses new ones until older ones leave their windows", n, MaxEntries)}
	}
	b.st.Entries = append(b.st.Entries, e)
	return Verdict{Decide: Reserved, Uses: uses}
}

// overReason says how a call would go past guard g's limit (total is the
// scope's sum with the call).
func overReason(g policy.Guard, sc string, amount, total int64) string {
	var s string
	switch g.Kind {
	case policy.GuardBudget:
		s = fmt.Sprintf("this call's amount %s would bring the sum to %s, over the limit of %s per %s",
			thousands(amount), thousands(total), thousands(g.Limit), g.Window)
	case policy.GuardRepeat:
		s = fmt.Sprintf("this call (the same tool and arguments) is proposed for the %s time within %s, over the limit of %s",
			ordinal(total), g.Window, thousands(g.Limit))
	default:
		s = fmt.Sprintf("this call would be call %s within %s, over the limit of %s", thousands(total), g.Window, thousands(g.Limit))
	}
	head := "guard " + g.ID
	if sc != "all" {
		head += " (" + sc + ")"
	}
	if g.Reason != "" {
		s += ": " + g.Reason
	}
	return head + ": " + s
}

// answered names, in v, the reservation it answers (the run's history holds
// the answer, not the reservation: a local activity's marker keeps no input).
func answered(r Reservation, v Verdict) Verdict {
	v.Call, v.Tool, v.Stage, v.Entry = cut(r.CallID, MaxToolBytes), cut(r.Tool, MaxToolBytes), cut(r.Stage, 16), keyID(r.Key)
	if checkReservation(r) == nil {
		for _, k := range r.Commits {
			v.Commits = append(v.Commits, keyID(k))
		}
	}
	return v
}

// settledAs names, in s, the key it settles.
func settledAs(k Settlement, s Settled) Settled {
	s.Entry = keyID(k.Key)
	return s
}

// settle commits or releases the entry of s.Key.
func (b *book) settle(now time.Time, s Settlement) Settled {
	if s.Key == "" || len(s.Key) > MaxKeyBytes {
		return Settled{}
	}
	b.prune(now)
	i := b.find(keyID(s.Key))
	if i < 0 {
		return Settled{}
	}
	e := &b.st.Entries[i]
	if s.Workflow != "" && e.Run != "" && keyID(s.Workflow) != e.Run {
		return Settled{Found: true, Committed: e.Committed, Refused: "the settlement comes from another run than the one that reserved the call: refused"}
	}
	switch {
	case s.Commit:
		e.Committed, e.Released = true, false
	case !e.Committed: // a call that ran stays spent
		e.Released = true
	}
	return Settled{Found: true, Committed: e.Committed}
}

// checkPause says why p is not a pause a ledger keeps, or nil.
func checkPause(p Pause) error {
	switch {
	case p.Tool == "":
		return errors.New("the pause names no tool")
	case len(p.Tool) > MaxToolBytes:
		return fmt.Errorf("the pause's tool is %d bytes, at most %d", len(p.Tool), MaxToolBytes)
	case p.Reason == "":
		return errors.New("the pause gives no reason")
	case len(p.Reason) > MaxReasonSize:
		return fmt.Errorf("the pause's reason is %d bytes, at most %d", len(p.Reason), MaxReasonSize)
	case len(p.By) > MaxKeyBytes:
		return fmt.Errorf("the pause's author is %d bytes, at most %d", len(p.By), MaxKeyBytes)
	}
	return nil
}

// canPause says why p could not be kept, or nil: it replaces a pause of
// the same tool, or is one more, at most MaxPauses.
func (b *book) canPause(p Pause) error {
	if err := checkPause(p); err != nil {
		return err
	}
	if slices.ContainsFunc(b.st.Pauses, func(q Pause) bool { return q.Tool == p.Tool }) {
		return nil
	}
	if n := len(b.st.Pauses); n >= MaxPauses {
		return fmt.Errorf("%d tools are paused already, at most %d: unpause one first", n, MaxPauses)
	}
	return nil
}

// pause keeps p, replacing a pause of the same tool.
func (b *book) pause(p Pause) error {
	if err := b.canPause(p); err != nil {
		return err
	}
	if i := slices.IndexFunc(b.st.Pauses, func(q Pause) bool { return q.Tool == p.Tool }); i >= 0 {
		b.st.Pauses[i] = p
		return nil
	}
	b.st.Pauses = append(b.st.Pauses, p)
	return nil
}

// paused reports whether tool (or AllTools) is paused.
func (b *book) paused(tool string) bool {
	return slices.ContainsFunc(b.st.Pauses, func(p Pause) bool { return p.Tool == tool })
}

// unpause lifts tool's pause; false if it was not paused.
func (b *book) unpause(tool string) bool {
	n := len(b.st.Pauses)
	b.st.Pauses = slices.DeleteFunc(b.st.Pauses, func(p Pause) bool { return p.Tool == tool })
	return len(b.st.Pauses) < n
}

// view is what the guards query answers. It changes nothing (a query
// handler calls it).
func (b *book) view(now time.Time) View {
	v := View{Guards: []GuardView{}, Pauses: slices.Clone(b.st.Pauses), Entries: len(b.st.Entries), Leases: len(b.st.Leases), Policy: b.eng != nil}
	if v.Pauses == nil {
		v.Pauses = []Pause{}
	}
	var latest int64
	for _, p := range b.st.Pauses {
		latest = max(latest, p.At.UnixMilli())
	}
	for _, l := range b.st.Leases {
		if latest > 0 && l.Renewed < latest && l.Until >= now.UnixMilli() {
			v.Unseen = append(v.Unseen, l.ID)
		}
	}
	if b.role == countsPause && b.eng != nil { // each guard's use is its own ledger's
		v.Sharded, v.Entries = true, 0
		for _, g := range b.eng.Guards() {
			v.Guards = append(v.Guards, guardView(g))
		}
		return v
	}
	for _, g := range b.guards() {
		gv := guardView(g)
		cutoff := now.UnixMilli() - g.WindowDuration().Milliseconds()
		for _, e := range b.st.Entries {
			if e.At <= cutoff || e.Released {
				continue
			}
			for _, h := range e.Holds {
				if h.Guard != g.ID {
					continue
				}
				if e.Committed {
					gv.scope(h.Scope).Committed += h.Amount
				} else {
					gv.scope(h.Scope).Reserved += h.Amount
				}
			}
		}
		for _, u := range b.st.Used {
			if u.Guard == g.ID && u.At > cutoff {
				gv.scope(u.Scope).Committed += u.Amount
			}
		}
		for _, l := range b.st.Leases {
			for _, h := range l.Holds {
				switch {
				case h.Guard != g.ID:
				case l.Until < now.UnixMilli(): // lapsed: spent, as the next update will count it
					gv.scope(h.Scope).Committed += h.Amount
				default:
					gv.scope(h.Scope).Leased += h.Amount
				}
			}
		}
		v.Guards = append(v.Guards, gv)
	}
	return v
}

// guardView is g as a view shows it, with no use yet.
func guardView(g policy.Guard) GuardView {
	return GuardView{ID: g.ID, Kind: string(g.Kind), Limit: g.Limit, Window: g.Window, Per: g.PerOrAll(), Exceed: string(g.ExceedOrDeny())}
}

// scope is gv's view of scope sc, added when it has none.
func (gv *GuardView) scope(sc string) *ScopeView {
	i := slices.IndexFunc(gv.Scopes, func(s ScopeView) bool { return s.Scope == sc })
	if i < 0 {
		gv.Scopes = append(gv.Scopes, ScopeView{Scope: sc})
		i = len(gv.Scopes) - 1
	}
	return &gv.Scopes[i]
}
