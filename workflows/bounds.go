package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// Bounds on every byte a run keeps or carries, so that nothing a client, an
// operator, the planner or a tool sends can push the run's state, its
// queries, its result or its continue-as-new past Temporal's payload limit
// (2 MiB by default) and wedge it.
const (
	// MaxInputBytes bounds a RunInput as a client sends it (the carry aside).
	MaxInputBytes = 1 << 20
	// MaxGoalBytes bounds the goal.
	MaxGoalBytes = 16 << 10
	// MaxArgsBytes bounds one call's arguments (canonical JSON). A larger call
	// is answered with an error and never reaches the gate.
	MaxArgsBytes = 16 << 10
	// MaxValueBytes bounds a result or an answer as the trace, the transcript
	// and state keep it; a larger one is kept as a marker with its size, its
	// SHA-256 and its first bytes.
	MaxValueBytes = 16 << 10
	// MaxTextBytes bounds a note, a reason, an interrupt's message and an
	// error as a run keeps them; longer text is cut with a marker.
	MaxTextBytes = 1 << 10
	// MaxNameBytes bounds an approver's name and a call id in a decision.
	MaxNameBytes = 128
	// MaxMessageBytes bounds one session message; MaxQueuedMessages bounds
	// the messages waiting for their turn. More are refused.
	MaxMessageBytes   = 8 << 10
	MaxQueuedMessages = 16
	// MaxMemoBytes and MaxMemoEntries bound memo_bytes and memo_entries.
	MaxMemoBytes   = 1 << 20
	MaxMemoEntries = 10000
	// MaxHistoryLimit bounds history_limit, well under Temporal's hard limit
	// of 51,200 events.
	MaxHistoryLimit = 40000
	// TraceBytes bounds the kept trace (and so the trace query and the result).
	TraceBytes = 512 << 10
	// TraceFloorBytes of the newest trace records are the last thing a carry
	// gives up to fit its budget.
	TraceFloorBytes = 128 << 10
	// TranscriptBytes bounds the transcript a planner is shown and a run carries.
	TranscriptBytes = 256 << 10
	// CarryBudget bounds the input of the next run at continue-as-new; the
	// oldest trace records go first (down to TraceFloorBytes), then the oldest
	// transcript entries, then the least recently used memo entries.
	CarryBudget = 1536 << 10
)

// This file holds the byte bounds of what a run keeps (see the Max* constants
// in api.go): text is cut with a marker, oversized JSON values are replaced by
// a marker, and the trace, the transcript and the carry are trimmed oldest first.

// clip cuts s to at most n bytes, marker included (at a rune boundary), and
// says how much it cut. Clipping clipped text changes nothing.
func clip(s string, n int) string { return text.Clip(s, n) }

// Truncated is what a run keeps instead of a JSON value over MaxValueBytes
// (the same marker a worker reports for a result over tool.MaxResultBytes).
type Truncated = tool.Truncated

// clipValue keeps v if it has at most n bytes, and otherwise a marker
// {"truncated":{"bytes","sha256","head"}} that is valid JSON (tool.ClipResult).
func clipValue(v json.RawMessage, n int) json.RawMessage {
	return tool.ClipResult(v, n)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// jsonSize is the size of v as the data converter writes it.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// clipRecord bounds the parts of a trace record that come from outside.
func clipRecord(rec TraceRecord) TraceRecord {
	rec.Result = clipValue(rec.Result, MaxValueBytes)
	rec.Args = clipValue(rec.Args, MaxArgsBytes)
	rec.Error = clip(rec.Error, MaxTextBytes)
	rec.Reason = clip(rec.Reason, MaxTextBytes)
	rec.Approver = clip(rec.Approver, MaxNameBytes)
	rec.OriginalArgs = clipValue(rec.OriginalArgs, MaxArgsBytes)
	return rec
}

// clipEntry bounds the parts of a transcript entry that come from outside.
func clipEntry(e plan.Entry) plan.Entry {
	e.Result = clipValue(e.Result, MaxValueBytes)
	e.Error = clip(e.Error, MaxTextBytes)
	e.Note = clip(e.Note, MaxTextBytes+MaxArgsBytes)
	e.Text = clip(e.Text, MaxValueBytes)
	if len(e.Calls) > 0 {
		calls := make([]tool.Call, len(e.Calls))
		for i, c := range e.Calls {
			c.Args = clipValue(c.Args, MaxArgsBytes)
			calls[i] = c
		}
		e.Calls = calls
	}
	return e
}

// appendTrace appends a record and keeps the trace within its bounds: at
// most 2×TraceKeep records and TraceBytes bytes. It trims in chunks, oldest
// first, so a long run does not copy the trace on every call.
func (r *run) appendTrace(rec TraceRecord) {
	size := jsonSize(rec) + 1
	r.Trace = append(r.Trace, rec)
	r.traceSizes = append(r.traceSizes, size)
	r.traceBytes += size
	if len(r.Trace) < 2*TraceKeep && r.traceBytes <= TraceBytes {
		return
	}
	over := 0
	if len(r.Trace) >= 2*TraceKeep {
		over = len(r.Trace) - TraceKeep
	}
	kept := r.traceBytes
	for _, s := range r.traceSizes[:over] {
		kept -= s
	}
	// Down to three quarters of the byte budget, so the next trim is not the next call.
	for ; over < len(r.Trace)-1 && kept > TraceBytes*3/4; over++ {
		kept -= r.traceSizes[over]
	}
	r.Trace = append([]TraceRecord(nil), r.Trace[over:]...)
	r.traceSizes = append([]int(nil), r.traceSizes[over:]...)
	r.traceBytes = kept
	r.TraceDropped += over
}

// recent keeps the goal and the newest transcript entries: at most n of them
// and maxBytes in all, starting the kept tail at a user or assistant entry so
// no call outcome is cut from its proposal.
func recent(t []plan.Entry, n, maxBytes int) []plan.Entry {
	if len(t) == 0 {
		return t
	}
	budget := maxBytes - jsonSize(t[0])
	from := len(t)
	for from > 1 && len(t)-from < n-1 {
		size := jsonSize(t[from-1]) + 1
		if size > budget {
			break
		}
		budget -= size
		from--
	}
	for from < len(t) && t[from].Role == plan.RoleTool {
		from++
	}
	if from == 1 {
		return t
	}
	return append([]plan.Entry{t[0]}, t[from:]...)
}

// fit trims a carry so that the next run's whole input stays within
// CarryBudget: the oldest trace records first, down to the newest
// TraceFloorBytes of them; then the oldest transcript entries (the goal
// stays); then the least recently used memo entries; and only then the rest
// of the trace. What else a carry holds is bounded on its own (messages,
// refusals, the answer).
//
// sizes are the JSON sizes of c.Trace's records, as appendTrace measured them.
func fit(next RunInput, c *Carry, sizes []int) {
	next.Carry = nil
	excess := jsonSize(next) + jsonSize(c) - CarryBudget
	if excess <= 0 {
		return
	}
	floor, keep := 0, len(c.Trace)
	for i := len(c.Trace) - 1; i >= 0; i-- {
		if floor+sizes[i] <= TraceFloorBytes {
			floor += sizes[i]
			keep = i
		}
	}
	drop := func(limit int) {
		n := 0
		for ; n < limit && excess > 0; n++ {
			excess -= sizes[n]
		}
		c.Trace, sizes, c.TraceDropped = c.Trace[n:], sizes[n:], c.TraceDropped+n
	}
	drop(keep)
	if excess > 0 && len(c.Transcript) > 1 {
		n := 1
		for ; n < len(c.Transcript) && excess > 0; n++ {
			excess -= jsonSize(c.Transcript[n]) + 1
		}
		for n < len(c.Transcript) && c.Transcript[n].Role == plan.RoleTool {
			n++
		}
		c.Transcript = append(c.Transcript[:1:1], c.Transcript[n:]...)
	}
	n := 0
	for ; n < len(c.Memo) && excess > 0; n++ {
		excess -= jsonSize(c.Memo[n]) + 1
	}
	c.Memo = c.Memo[n:]
	drop(len(c.Trace))
}
