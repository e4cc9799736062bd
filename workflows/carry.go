package workflows

import (
	"time"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// Carry is the state a run hands to its next run when it continues as new;
// the run holds it as its own state (run embeds it).
type Carry struct {
	Config WorkerConfig `json:"config"`
	// Calls numbered so far: the next call id is c-<Calls+1>.
	Calls int `json:"calls"`
	// Steps: planner steps taken so far.
	Steps int `json:"steps"`
	// Turn is the current user turn (1 for the goal).
	Turn int `json:"turn"`
	// TurnSteps: planner steps taken in the current user turn.
	TurnSteps  int           `json:"turn_steps"`
	Memo       []MemoEntry   `json:"memo"`
	MemoHits   int64         `json:"memo_hits"`
	MemoMisses int64         `json:"memo_misses"`
	Transcript []plan.Entry  `json:"transcript"`
	Trace      []TraceRecord `json:"trace"`
	TraceSeq   int           `json:"trace_seq"`
	// TraceDropped counts the records older than the carried trace.
	TraceDropped int `json:"trace_dropped,omitempty"`
	// Messages are user messages received and not yet started as a turn.
	Messages []string `json:"messages,omitempty"`
	// Ended: the end signal has been received.
	Ended bool `json:"ended,omitempty"`
	// AwaitingInput: the run was waiting for the next message (session runs).
	AwaitingInput bool      `json:"awaiting_input,omitempty"`
	IdleSince     time.Time `json:"idle_since,omitempty"`
	Answer        string    `json:"answer,omitempty"`
	Refused       []Refusal `json:"refused,omitempty"`
	// RequestedBy is the run chain's verified requester (a signed start);
	// a fork keeps its source's (rules version 9).
	RequestedBy string `json:"requested_by,omitempty"`
	// ForkedBy are the operators who forked this run and the forks it came
	// from (rules version 9): like the requester, they decide none of its calls.
	ForkedBy []string `json:"forked_by,omitempty"`
	// Grants made in the run chain; a grant never outlives it.
	Grants []Grant `json:"grants,omitempty"`
	// Spent are the tokens the run chain has taken and that have not expired:
	// each is taken once.
	Spent []SpentToken `json:"spent_tokens,omitempty"`
	// Parked are the calls that waited for a human when the run continued
	// as new, and CarriedBlockedOn the call a deny-policy step stopped at
	// meanwhile: the next run finishes that step first (park.go).
	Parked           []ParkedCall               `json:"parked,omitempty"`
	CarriedBlockedOn *tool.ConfirmationRequired `json:"blocked_on,omitempty"`
	// External are the calls an external planner proposed that the run
	// chain remembers (external.go); in use, they are the run's ext.
	External []ExternalCall `json:"external,omitempty"`
}

// restore takes up the state a previous run handed over (or a fresh one).
func (r *run) restore(c Carry) {
	r.Carry = c
	r.memo = newMemo(r.in.MemoEntries, r.in.MemoBytes, c.Memo)
	r.memo.hits, r.memo.misses = c.MemoHits, c.MemoMisses
	r.Memo, r.MemoHits, r.MemoMisses = nil, 0, 0 // in use, the memo is r.memo
	r.ext = nil
	for _, e := range c.External {
		r.ext = append(r.ext, &e)
	}
	r.External = nil
	r.Trace = nil
	for _, rec := range c.Trace {
		r.appendTrace(rec) // and measure it
	}
}

// carryOver is what this run hands to next: its state, with the memo in its
// carried form and the transcript a planner is shown, fitted to CarryBudget.
func (r *run) carryOver(next RunInput) *Carry {
	c := r.Carry
	c.Memo, c.MemoHits, c.MemoMisses = r.memo.snapshot(), r.memo.hits, r.memo.misses
	c.Transcript = recent(r.Transcript, TranscriptKeep, TranscriptBytes)
	c.External = nil
	for _, e := range r.ext {
		c.External = append(c.External, *e)
	}
	if r.parked != nil { // parked in this step: the waits as they stand now
		c.Parked = r.parkedCarry()
	}
	fit(next, &c, r.traceSizes)
	return &c
}
