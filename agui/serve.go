package agui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/workflows"
)

// sendTimeout bounds a start, a message or a resume's updates. They are sent
// on a context the client's going away does not cancel, so that a resume is
// not cut half-applied.
const sendTimeout = 30 * time.Second

// serve decides what a checked request does to its thread's run (start it,
// send it a message, resume its waiting calls, or nothing: a reconnect),
// does it, and streams the turn.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, req *request, caller Caller) {
	ctx := r.Context()
	thread := req.in.ThreadID
	unlock, ok := h.threads.lock(thread, ctx.Done())
	if !ok {
		return
	}
	s := &streamer{h: h, req: req, wfid: WorkflowID(thread), thread: thread, w: w, caller: caller}
	s.act(ctx)
	unlock() // what changes the run is done: following it needs no lock
	if s.out != nil && s.out.err == nil && s.turn > 0 {
		s.follow(ctx)
	}
}

// act does what the request asks of the run, and sets the turn to follow
// (0: the stream has ended, with a refusal).
func (s *streamer) act(ctx context.Context) {
	h, thread, req := s.h, s.thread, s.req
	info, err := h.b.Describe(ctx, s.wfid)
	exists := !errors.Is(err, client.ErrUnknownRun)
	switch {
	case !exists:
	case err != nil:
		h.opts.Logger.Warn("agui: describing a thread's run", "thread", thread, "err", err)
		s.failNow(failf("backend", "reading thread %s's run: %s", thread, text.Clip(err.Error(), 300)))
		return
	case info.Door != Door:
		s.failNow(failf("foreign_thread", "thread %s names a run this endpoint did not start: it serves only the threads it started", thread))
		return
	case !info.Running:
		why := ""
		if info.Failure != "" {
			why = " (" + info.Failure + ")"
		}
		s.failNow(failf("run_closed", "thread %s's run has closed%s: start a new thread", thread, why))
		return
	}
	users := len(req.users)
	if !exists {
		switch {
		case len(req.resume) > 0:
			s.failNow(failf("no_run", "thread %s has no run: there is nothing to resume", thread))
		case users == 0:
			s.failNow(failf("no_run", "thread %s has no run yet: send a user message to start one", thread))
		case users > 1:
			s.failNow(failf("too_many_messages", "thread %s has no run yet, and the messages hold %d user messages: a new thread starts with one", thread, users))
		default:
			s.start(ctx, req.users[0])
		}
		return
	}
	st, err := h.b.State(ctx, s.wfid)
	if err != nil {
		s.failNow(failf(refusalCode(err), "reading thread %s's run: %s", thread, text.Clip(err.Error(), 300)))
		return
	}
	if rerr := requester(st, thread); rerr != nil {
		s.failNow(rerr)
		return
	}
	seen := st.Turn + st.Queued
	switch {
	case len(req.resume) > 0 && users > seen:
		s.failNow(failf("resume_with_message", "a resume and a new user message in one request: send the resume first, then the message"))
	case len(req.resume) > 0:
		s.resume(ctx, st)
	case users > seen+1:
		s.failNow(failf("too_many_messages", "the run of thread %s has seen %d user messages and the messages hold %d: send one new message at a time", thread, seen, users))
	case users == seen+1:
		s.message(ctx, st, req.users[users-1])
	default: // a reconnect
		s.openStarted()
		s.turn = followTurn(users, st)
	}
}

// followTurn is the turn a post without a new message follows: that of its
// last user message if the run has seen it, else the run's current one.
func followTurn(users int, st workflows.State) int {
	if users >= 1 && users <= st.Turn+st.Queued {
		return users
	}
	return st.Turn
}

// start starts the thread's run with its first message.
func (s *streamer) start(ctx context.Context, textMsg string) {
	h := s.h
	in := workflows.RunInput{Goal: textMsg, Planner: h.opts.Planner, Session: true,
		ApprovalTimeout: workflows.Duration(h.opts.ApprovalTimeout), IdleTimeout: workflows.Duration(h.opts.IdleTimeout)}
	if rerr := h.signedStart(&in, s.wfid, s.thread, s.caller); rerr != nil {
		s.failNow(rerr)
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if err := h.b.Start(sctx, s.wfid, in); err != nil {
		h.opts.Logger.Warn("agui: starting a thread's run", "thread", s.thread, "err", err)
		s.failNow(failf(refusalCode(err), "starting thread %s's run: %s", s.thread, text.Clip(err.Error(), 300)))
		return
	}
	s.openStarted()
	// A signed start has taken once the run names its requester (or the
	// run refused it, and has closed: waitFor says why).
	var seen workflows.State
	if !s.waitFor(ctx, func(st workflows.State) bool {
		seen = st
		return st.Turn >= 1 && (in.RequestToken == "" || st.RequestedBy != "")
	}) {
		return
	}
	if rerr := requester(seen, s.thread); rerr != nil {
		_ = s.out.fail(rerr.code, rerr.msg)
		return
	}
	s.turn = 1
}

// message sends the run the new user message; the stream follows its turn.
func (s *streamer) message(ctx context.Context, st workflows.State, textMsg string) {
	h := s.h
	if rerr := mayMessage(st, s.thread, s.caller); rerr != nil {
		s.failNow(rerr)
		return
	}
	switch {
	case len(st.Interrupts) > 0:
		s.failNow(failf("interrupts_open", "%d calls wait for a decision: resume them first (answer every interrupt of the last RUN_FINISHED)", len(st.Interrupts)))
		return
	case st.Queued >= workflows.MaxQueuedMessages:
		s.failNow(failf("busy", "%d messages already wait for their turn: post again once the run has taken them", st.Queued))
		return
	}
	want := st.Turn + st.Queued + 1
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if err := h.b.Message(sctx, s.wfid, textMsg); err != nil {
		h.opts.Logger.Warn("agui: sending a message", "thread", s.thread, "err", err)
		s.failNow(failf(refusalCode(err), "sending thread %s's run the message: %s", s.thread, text.Clip(err.Error(), 300)))
		return
	}
	s.openStarted()
	if s.waitFor(ctx, func(st workflows.State) bool { return st.Turn+st.Queued >= want }) {
		s.turn = want
	}
}

// resume validates every answer, applies them all, and follows the turn.
func (s *streamer) resume(ctx context.Context, st workflows.State) {
	h := s.h
	trace, err := h.b.Trace(ctx, s.wfid)
	if err != nil {
		s.failNow(failf(refusalCode(err), "reading thread %s's trace: %s", s.thread, text.Clip(err.Error(), 300)))
		return
	}
	answers, rerr := planResume(s.thread, s.req, st, trace, h.opts.Now())
	if rerr != nil {
		s.failNow(rerr)
		return
	}
	s.openStarted()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if rerr := h.applyResume(sctx, s.wfid, answers); rerr != nil {
		_ = s.out.fail(rerr.code, rerr.msg)
		return
	}
	s.turn = followTurn(len(s.req.users), st)
}

// waitFor polls the run's state until ok says it shows what was sent, for
// at most h.reflect; then the stream fails saying why (with the run's last
// refusal of a message, if it has one).
func (s *streamer) waitFor(ctx context.Context, ok func(workflows.State) bool) bool {
	h := s.h
	deadline := time.Now().Add(h.reflect)
	var last workflows.State
	var lastErr error
	for {
		st, err := h.b.State(ctx, s.wfid)
		if err == nil && ok(st) {
			return true
		}
		if err == nil {
			last = st
		}
		lastErr = err
		if errors.Is(err, client.ErrUnknownRun) || time.Now().After(deadline) {
			break
		}
		if info, derr := h.b.Describe(ctx, s.wfid); derr == nil && !info.Running {
			why := ""
			if info.Failure != "" {
				why = ": " + info.Failure
			}
			_ = s.out.fail("run_closed", text.Clip(fmt.Sprintf("the run of thread %s has closed%s", s.thread, why), 1000))
			return false
		}
		if !pause.For(ctx, h.opts.Poll) {
			return false
		}
	}
	why := ""
	for i := len(last.Refused) - 1; i >= 0; i-- {
		if last.Refused[i].Signal == workflows.SignalMessage {
			why = ": the run refused a message: " + last.Refused[i].Error
			break
		}
	}
	if why == "" && lastErr != nil {
		why = ": " + lastErr.Error()
	}
	_ = s.out.fail("not_taken", text.Clip(fmt.Sprintf("the run of thread %s has not shown the message within %s%s", s.thread, h.reflect, why), 1000))
	return false
}
