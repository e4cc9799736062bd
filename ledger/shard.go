package ledger

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policy"
)

// This file shards a task queue's ledger per guard. The queue's own ledger,
// ID(taskQueue) (the home ledger), keeps the pauses: it takes operators'
// signed pauses and unpauses, publishes them to the workers (its memo, and
// every lease grant) and answers whether a call is paused. Each guard is
// counted by a ledger of its own, ShardID(taskQueue, guard): its entries,
// leases and spent slices, and nothing else. A call covered by two guards
// is reserved with both; one that either refuses is released by the other.
// So no one workflow serves the fleet: a worker renews one lease per guard
// it spends from, and a call a lease cannot answer (a repeat, a call let
// past a limit by approvers) goes to its guards' ledgers alone.
//
// Which ledger counts a guard is its id: a guard keeps its counts across
// policy changes as long as it keeps its id. A guard's ledger started for
// the first time takes what the home ledger counted of that guard before
// (a ledger that counted every guard, before shards), so an upgrade does
// not start the guard's window anew.

// ShardSep separates the home ledger's id from a guard's in a shard's id.
const ShardSep = "/guard/"

// shardChange versions shards in the ledger's history: a run recorded
// before shards counts every guard itself.
const shardChange = "ledger-shards"

// ShardID is the workflow id of the ledger that counts guard on taskQueue
// (the home ledger, ID(taskQueue), for guard "").
func ShardID(taskQueue, guard string) string {
	if guard == "" {
		return ID(taskQueue)
	}
	return ID(taskQueue) + ShardSep + guard
}

// shardOf is the guard the ledger of workflow id wid on taskQueue counts
// ("" for the home ledger, and for a ledger of any other id, which keeps
// the ledger's behaviour before shards).
func shardOf(wid, taskQueue string) string {
	guard, ok := strings.CutPrefix(wid, ID(taskQueue)+ShardSep)
	if !ok {
		return ""
	}
	return guard
}

// role is what a ledger run counts.
type role int

const (
	countsAll   role = iota // before shards: every guard, and the pauses
	countsPause             // the home ledger: the pauses, no guard
	countsGuard             // a guard's ledger: that guard (book.only), no pause
)

// coveringGuards are the ids of eng's guards that count r, in the policy's
// order.
func coveringGuards(eng *policy.Engine, tool string, destructive bool) []string {
	if eng == nil {
		return nil
	}
	var out []string
	for _, g := range eng.Guards() {
		if g.Covers(tool, destructive) {
			out = append(out, g.ID)
		}
	}
	return out
}

// stateOf is what st holds of guard: its entries (with only their holds of
// guard), leases and spent slices; no pause and no spent token (the home
// ledger keeps those).
func stateOf(st State, guard string) State {
	var out State
	its := func(holds []Hold) []Hold { // guard's holds of holds, a copy
		return slices.DeleteFunc(slices.Clone(holds), func(h Hold) bool { return h.Guard != guard })
	}
	for _, e := range st.Entries {
		if e.Holds = its(e.Holds); len(e.Holds) > 0 {
			out.Entries = append(out.Entries, e)
		}
	}
	for _, l := range st.Leases {
		if l.Holds = its(l.Holds); len(l.Holds) > 0 {
			out.Leases = append(out.Leases, l)
		}
	}
	for _, u := range st.Used {
		if u.Guard == guard {
			out.Used = append(out.Used, u)
		}
	}
	return bounded(out)
}

// unshardedReason is why the home ledger refuses a reservation that a
// guard counts: the worker that sent it predates shards, and its guards'
// ledgers would not count the call.
func unshardedReason(guards []string) string {
	return fmt.Sprintf("the fleet ledger counts guard %s in a ledger of its own now (shards), and this reservation came to the task queue's "+
		"ledger, as workers before shards send them: the call is refused so that no guard misses it; upgrade the worker that sent it", guards[0])
}
