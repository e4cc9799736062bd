package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/workflows"
)

// keepaliveEvery is how often an idle stream writes a comment.
const keepaliveEvery = 15 * time.Second

// streamer is one response: the stream of a thread's turn.
type streamer struct {
	h            *Handler
	req          *request
	wfid, thread string
	w            http.ResponseWriter
	out          *sse
	turn         int             // the turn followed
	started      map[string]bool // calls announced (by the input or this stream)
	resulted     map[string]bool // calls whose result was sent (by the input or this stream)
	added        []json.RawMessage
	lastWrite    time.Time
	failingSince time.Time
	caller       Caller // who sent the request (Options.Callers)
}

// failNow ends the stream with RUN_ERROR (its only event if none was sent).
func (s *streamer) failNow(e *runErr) {
	if s.out == nil {
		s.out = openSSE(s.w)
	}
	_ = s.out.fail(e.code, e.msg)
	s.turn = 0
}

// openStarted opens the stream with RUN_STARTED.
func (s *streamer) openStarted() {
	if s.out != nil {
		return
	}
	s.out = openSSE(s.w)
	in := s.req.in
	_ = s.out.send(runStarted{Type: evRunStarted, ThreadID: in.ThreadID, RunID: in.RunID, ParentRunID: in.ParentRunID})
	s.lastWrite = time.Now()
}

// follow streams the followed turn until it ends: its calls and their
// outcomes as the trace grows, then the answer, the snapshots and
// RUN_FINISHED (or RUN_ERROR). It stops when the client goes away, and
// after Options.MaxStream.
func (s *streamer) follow(ctx context.Context) {
	h := s.h
	s.started, s.resulted = map[string]bool{}, map[string]bool{}
	for id := range s.req.calls {
		s.started[id] = true
	}
	for id := range s.req.results {
		s.resulted[id] = true
	}
	deadline := time.Now().Add(h.opts.MaxStream)
	for {
		done, err := s.poll(ctx)
		if done || err != nil || ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			_ = s.out.fail("stream_timeout", fmt.Sprintf("turn %d is still going after %s: post again without a new message to follow it", s.turn, h.opts.MaxStream))
			return
		}
		if time.Since(s.lastWrite) >= keepaliveEvery {
			if s.out.keepalive() != nil {
				return
			}
			s.lastWrite = time.Now()
		}
		if !pause.For(ctx, h.opts.Poll) {
			return
		}
	}
}

// poll reads the run's state, then its trace (so the trace holds at least
// what the state says happened), sends what is new, and says whether the
// stream has ended.
func (s *streamer) poll(ctx context.Context) (bool, error) {
	h := s.h
	st, err := h.b.State(ctx, s.wfid)
	var trace []workflows.TraceRecord
	if err == nil {
		trace, err = h.b.Trace(ctx, s.wfid)
	}
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		if s.failingSince.IsZero() {
			s.failingSince = time.Now()
		}
		if errors.Is(err, client.ErrUnknownRun) || time.Since(s.failingSince) > h.errGrace {
			h.opts.Logger.Warn("agui: reading a thread's run", "thread", s.thread, "err", err)
			return true, s.out.fail(refusalCode(err), "reading thread "+s.thread+"'s run: "+text.Clip(err.Error(), 300))
		}
		return false, nil
	}
	s.failingSince = time.Time{}
	end := s.endOf(st)
	// Each call in the order it came: announced when it first shows, its
	// result once it has one.
	for _, c := range callsOf(trace, st, s.turn) {
		if !s.started[c.id] {
			if err := s.announce(c); err != nil {
				return true, err
			}
		}
		if s.resulted[c.id] {
			continue
		}
		rec := c.final
		if rec == nil && end == endSuccess && !c.waiting && c.last != nil {
			rec = c.last // the turn is over: a call's last record is its end (a block the deny policy made final)
		}
		if rec != nil {
			if err := s.result(c.id, outcomeText(rec)); err != nil {
				return true, err
			}
		}
	}
	switch end {
	case endNone:
		return false, nil
	case endFailed:
		return true, s.out.fail("run_failed", "the run failed: "+text.Clip(st.Error, 2000))
	case endBlocked:
		msg := "the run stopped: a call was blocked"
		if b := st.BlockedOn; b != nil {
			msg = fmt.Sprintf("the run stopped: %s %s was blocked (%s)", b.Tool, b.CallID, text.Clip(string(b.CallArgs), 500))
		}
		return true, s.out.fail("run_blocked", msg)
	case endLost:
		return true, s.out.fail("not_taken", fmt.Sprintf("the run is %s at turn %d and has not taken the message of turn %d", st.Status, st.Turn, s.turn))
	case endSuccess:
		if st.Turn == s.turn && st.Answer != "" && !s.req.ids[answerMessageID(s.turn)] {
			if err := s.answer(st.Answer); err != nil {
				return true, err
			}
		}
		return true, s.finish(st, outcome{Type: "success"})
	}
	return true, s.finish(st, outcome{Type: "interrupt", Interrupts: interruptsOf(st)})
}

// How a poll finds the followed turn.
const (
	endNone      = iota // still going
	endSuccess          // done: answered, or the run has moved past it
	endInterrupt        // calls wait for a decision
	endFailed           // the run failed
	endBlocked          // the run stopped at a blocked call
	endLost             // the run waits and has not taken the turn's message
)

func (s *streamer) endOf(st workflows.State) int {
	switch {
	case st.Status == workflows.StatusFailed:
		return endFailed
	case st.Status == workflows.StatusBlocked:
		return endBlocked
	case st.Turn > s.turn:
		return endSuccess
	case st.Turn < s.turn:
		if st.Queued == 0 && (st.Status == workflows.StatusWaitingForInput || st.Status == workflows.StatusCompleted) {
			return endLost
		}
		return endNone
	case st.Status == workflows.StatusWaitingForInput || st.Status == workflows.StatusCompleted:
		return endSuccess
	case st.Status == workflows.StatusWaitingForApproval && len(st.Interrupts) > 0:
		return endInterrupt
	}
	return endNone
}

// announce sends a call's START, ARGS (its exact arguments) and END.
func (s *streamer) announce(c *callView) error {
	s.started[c.id] = true
	parent := callsMessageID(c.id)
	args := argsText(c.args)
	for _, ev := range []any{
		toolCallStart{Type: evToolCallStart, ToolCallID: c.id, ToolCallName: c.tool, ParentMessageID: parent},
		toolCallArgs{Type: evToolCallArgs, ToolCallID: c.id, Delta: args},
		toolCallEnd{Type: evToolCallEnd, ToolCallID: c.id},
	} {
		if err := s.send(ev); err != nil {
			return err
		}
	}
	return s.add(outAssistant{ID: parent, Role: "assistant",
		ToolCalls: []outToolCall{{ID: c.id, Type: "function", Function: outFunction{Name: c.tool, Arguments: args}}}})
}

// result sends a call's TOOL_CALL_RESULT.
func (s *streamer) result(callID, content string) error {
	s.resulted[callID] = true
	id := resultMessageID(callID)
	if err := s.send(toolCallResult{Type: evToolCallResult, MessageID: id, ToolCallID: callID, Content: content, Role: "tool"}); err != nil {
		return err
	}
	return s.add(outTool{ID: id, Role: "tool", Content: content, ToolCallID: callID})
}

// answer sends the planner's answer as one text message.
func (s *streamer) answer(answer string) error {
	id := answerMessageID(s.turn)
	for _, ev := range []any{
		textStart{Type: evTextStart, MessageID: id, Role: "assistant"},
		textContent{Type: evTextContent, MessageID: id, Delta: answer},
		textEnd{Type: evTextEnd, MessageID: id},
	} {
		if err := s.send(ev); err != nil {
			return err
		}
	}
	return s.add(outAssistant{ID: id, Role: "assistant", Content: answer})
}

// finish sends the snapshots and RUN_FINISHED.
func (s *streamer) finish(st workflows.State, o outcome) error {
	msgs := make([]json.RawMessage, 0, len(s.req.in.Messages)+len(s.added))
	msgs = append(append(msgs, s.req.in.Messages...), s.added...)
	in := s.req.in
	for _, ev := range []any{
		stateSnapshot{Type: evStateSnapshot, Snapshot: snapshotOf(st)},
		messagesSnapshot{Type: evMessagesSnapshot, Messages: msgs},
		runFinished{Type: evRunFinished, ThreadID: in.ThreadID, RunID: in.RunID, Outcome: o},
	} {
		if err := s.send(ev); err != nil {
			return err
		}
	}
	return nil
}

func (s *streamer) send(ev any) error {
	s.lastWrite = time.Now()
	return s.out.send(ev)
}

// add keeps a message this stream made, for MESSAGES_SNAPSHOT.
func (s *streamer) add(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	s.added = append(s.added, b)
	return nil
}
