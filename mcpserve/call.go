package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Names in a request's or result's _meta, and the run header.
const (
	MetaRun            = "toolgate/run"
	MetaIdempotencyKey = "toolgate/idempotency_key"
	MetaCallID         = "toolgate/call_id"
	MetaStatus         = "toolgate/status"
	MetaNote           = "toolgate/note"
	HeaderRun          = "Toolgate-Run"
)

// StatusWaiting and StatusRunning are the statuses of a call not finished
// when a tools/call answers.
const (
	StatusWaiting = "waiting_for_approval"
	StatusRunning = "running"
)

// maxMessageBytes bounds a refusal's text quoted back to a client.
const maxMessageBytes = 2000

// backoff is a delay that doubles up to max.
type backoff struct{ d, max time.Duration }

func (b *backoff) next() time.Duration {
	d := b.d
	if b.d *= 2; b.d > b.max {
		b.d = b.max
	}
	return d
}

// callTool proposes a tools/call to the caller's run and answers how it
// ends, or that it waits; fixed is the stdio caller (nil: the token's).
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest, fixed *caller) (*mcp.CallToolResult, error) {
	if req.Params == nil {
		return refusal("tools/call without params"), nil
	}
	who, runName, err := s.identify(req, fixed)
	if err != nil {
		return refusal(err.Error()), nil
	}
	id := WorkflowID(who, runName)
	p, err := proposal(req.Params)
	if err != nil {
		return refusal(err.Error()), nil
	}
	if req.Session != nil {
		if !s.enter(req.Session) {
			return refusal(fmt.Sprintf("refused: this session has %d tools/call requests open, at most %d; wait for one to answer", s.opts.MaxWaitingPerSession, s.opts.MaxWaitingPerSession)), nil
		}
		defer s.leave(req.Session)
	}
	in, err := s.startInput(id, who, runName)
	if err != nil {
		s.opts.Logger.Error("signing a run's start", "run", id, "err", err)
		return refusal(err.Error()), nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, s.opts.Wait)
	defer cancel()
	pr := s.progress(waitCtx, req, fmt.Sprintf("call of %s proposed to run %s", p.Tool, id))
	defer pr.stop()

	var st workflows.CallStatus
	if callID, ok := req.Params.Meta[MetaCallID]; ok {
		st, err = s.attach(waitCtx, id, callID, p)
	} else {
		st, err = s.propose(waitCtx, id, in, p)
	}
	asked := map[string]bool{} // the waits asked of the client's user (waitKey), each once
	note := ""                 // why the last wait was not asked by elicitation, if it was not
	stopAsking := func() {}    // withdraws the question of a wait that is over
	defer func() { stopAsking() }()
	for err == nil && !st.Done {
		if st.Waiting != nil {
			msg := fmt.Sprintf("call %s (%s) waits for approval: toolgate approve %s %s", st.CallID, st.Tool, id, st.CallID)
			if q := waitKey(st.Waiting); s.opts.ElicitApprovals && !asked[q] && canElicit(req.Session) {
				asked[q] = true
				stopAsking()
				var ask string
				if ask, note = question(id, *st.Waiting); note == "" {
					stopAsking = s.startElicit(waitCtx, req.Session, id, who, ask, *st.Waiting)
				}
			}
			if note != "" {
				msg += "; " + note
			}
			pr.set(msg)
		} else {
			stopAsking()
			pr.set(fmt.Sprintf("call %s (%s) runs in run %s", st.CallID, st.Tool, id))
		}
		var next workflows.CallStatus
		if next, err = s.poll(waitCtx, id, st); err == nil {
			st = next
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the client is gone or cancelled; the call is durable and goes on
	}
	switch {
	case err == nil:
		return done(id, st, note), nil
	case errors.Is(err, client.ErrBusy):
		return refusal(fmt.Sprintf("refused for now: %v; call again in a moment", err)), nil
	case errors.Is(err, context.DeadlineExceeded) && st.CallID != "":
		return notYet(id, st, s.opts.Wait, note), nil
	case errors.Is(err, context.DeadlineExceeded):
		return refusal(fmt.Sprintf("not finished yet: the call of %s was not answered by run %s within %s. Call again with the same arguments (or the same %s) to wait for its result",
			p.Tool, id, s.opts.Wait, MetaIdempotencyKey)), nil
	}
	s.opts.Logger.Warn("tools/call refused", "run", id, "tool", p.Tool, "err", err)
	return refusal(err.Error()), nil
}

// identify is who calls and the name of the run the call goes to.
func (s *Server) identify(req *mcp.CallToolRequest, fixed *caller) (string, string, error) {
	var who, runName string
	from := ""
	if fixed != nil {
		who, runName, from = fixed.name, fixed.run, "the stdio run"
	} else {
		if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
			return "", "", errors.New("refused: the request carries no caller (serve HTTP through Handler, which checks the bearer token)")
		}
		who = req.Extra.TokenInfo.UserID
		if req.Session != nil {
			runName, from = req.Session.ID(), "the MCP session id"
		}
	}
	if v, ok := req.Params.Meta[MetaRun]; ok {
		name, isString := v.(string)
		if !isString {
			return "", "", fmt.Errorf("refused: _meta %q must be a string, the run's name", MetaRun)
		}
		runName, from = name, "_meta "+MetaRun
	}
	if fixed == nil && req.Extra.Header != nil {
		if h := req.Extra.Header.Get(HeaderRun); h != "" {
			runName, from = h, "the "+HeaderRun+" header"
		}
	}
	if runName == "" {
		return "", "", fmt.Errorf("refused: no run to call: send the %s header or _meta %q with the run's name", HeaderRun, MetaRun)
	}
	if err := checkRunName(runName, from); err != nil {
		return "", "", fmt.Errorf("refused: %w", err)
	}
	return who, runName, nil
}

// proposal is the call a tools/call asks for.
func proposal(p *mcp.CallToolParamsRaw) (workflows.Proposal, error) {
	out := workflows.Proposal{Tool: p.Name}
	switch {
	case len(p.Name) > workflows.MaxNameBytes:
		return out, fmt.Errorf("refused: a tool's name has at most %d bytes", workflows.MaxNameBytes)
	case len(p.Arguments) > workflows.MaxArgsBytes:
		return out, fmt.Errorf("refused: the arguments have %d bytes, a call's at most %d", len(p.Arguments), workflows.MaxArgsBytes)
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	out.Args = json.RawMessage(args)
	if v, ok := p.Meta[MetaIdempotencyKey]; ok {
		key, isString := v.(string)
		switch {
		case !isString || key == "":
			return out, fmt.Errorf("refused: _meta %q must be a non-empty string", MetaIdempotencyKey)
		case len(key) > workflows.MaxKeyBytes:
			return out, fmt.Errorf("refused: _meta %q has %d bytes, at most %d", MetaIdempotencyKey, len(key), workflows.MaxKeyBytes)
		}
		out.Key = key
	}
	return out, nil
}

// startInput is the input a call's run starts with, if it is not running:
// signed by who with its token's key, if the worker has a policy.
func (s *Server) startInput(id, who, runName string) (*workflows.RunInput, error) {
	in := &workflows.RunInput{Goal: "MCP session " + who + "/" + runName, Planner: plan.Config{Kind: plan.KindExternal},
		IdleTimeout: workflows.Duration(s.opts.IdleTimeout)}
	if !s.opts.Policy {
		return in, nil
	}
	key, ok := s.keys[who]
	if !ok {
		return nil, fmt.Errorf("refused: the worker has an approval policy, and %s has no signing key here, so its run would have no verified requester "+
			"(the policy's rules and its self-approval rule could not hold it): give the token one with `toolgate mcp token new %s --key %s.key --tokens FILE` "+
			"(over stdio: --as %s --key FILE), the key of an approver the policy names", who, who, who, who)
	}
	if err := client.SignStart(in, id, who, key, 0); err != nil {
		return nil, err
	}
	return in, nil
}

// propose proposes p, again while the run is busy, until ctx is done.
func (s *Server) propose(ctx context.Context, id string, in *workflows.RunInput, p workflows.Proposal) (workflows.CallStatus, error) {
	b := backoff{100 * time.Millisecond, time.Second}
	for {
		st, err := s.opts.Runs.Propose(ctx, id, in, p)
		if !errors.Is(err, client.ErrBusy) {
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			return st, err
		}
		if !pause.For(ctx, b.next()) {
			return workflows.CallStatus{}, fmt.Errorf("run %s stayed busy: %w (%w)", id, ctx.Err(), err)
		}
	}
}

// attach reads how call callID (the _meta toolgate/call_id of a request)
// stands, instead of proposing p: a client reaches the outcome of a call it
// was told waits, even once it has finished (a proposal without a key
// attaches only to an unfinished call). The call must be p's tool and
// arguments.
func (s *Server) attach(ctx context.Context, id string, v any, p workflows.Proposal) (workflows.CallStatus, error) {
	callID, ok := v.(string)
	if !ok || callID == "" || len(callID) > workflows.MaxNameBytes {
		return workflows.CallStatus{}, fmt.Errorf("refused: _meta %q must be the id of a call of run %s, such as c-3", MetaCallID, id)
	}
	st, err := s.opts.Runs.Call(ctx, id, callID)
	if err != nil {
		return st, err
	}
	if digest, derr := tool.Digest(p.Tool, p.Args); st.Tool != p.Tool || derr != nil || digest != st.ArgsDigest {
		return workflows.CallStatus{}, fmt.Errorf("refused: call %s of run %s is %s with args_digest %s, not this call of %s; call it with its own tool and arguments",
			st.CallID, id, st.Tool, st.ArgsDigest, text.Clip(p.Tool, workflows.MaxNameBytes))
	}
	return st, nil
}

// poll reads how call st stands until it has changed (done, or it waits
// now, or waits no more, or waits on another question: waitKey) or ctx is
// done. A query that fails is tried again, but for a run or call that is
// not there.
func (s *Server) poll(ctx context.Context, id string, st workflows.CallStatus) (workflows.CallStatus, error) {
	b := backoff{200 * time.Millisecond, 2 * time.Second}
	waiting := waitKey(st.Waiting)
	for {
		if !pause.For(ctx, b.next()) {
			return st, ctx.Err()
		}
		next, err := s.opts.Runs.Call(ctx, id, st.CallID)
		switch {
		case errors.Is(err, client.ErrUnknownRun), errors.Is(err, client.ErrUnknownCall):
			return st, err
		case err != nil:
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			s.opts.Logger.Warn("reading a call", "run", id, "call", st.CallID, "err", err)
		case next.Done || waitKey(next.Waiting) != waiting:
			return next, nil
		}
	}
}

// done is the answer of a finished call; elicited, if not "", says why a
// wait of it was not asked by elicitation (in _meta toolgate/note).
func done(id string, st workflows.CallStatus, elicited string) *mcp.CallToolResult {
	meta := mcp.Meta{MetaCallID: st.CallID, MetaStatus: st.Status, MetaRun: id}
	if n := joinNotes(st.Note, elicited); n != "" {
		meta[MetaNote] = text.Clip(n, maxMessageBytes)
	}
	switch st.Status {
	case workflows.TraceOK, workflows.TraceCacheHit:
	case workflows.TraceResponded: // a human's answer in the tool's place: the result, and the note says whose
	default: // rejected, cancelled, expired, blocked, error
		msg := st.Error
		if msg == "" {
			msg = fmt.Sprintf("call %s (%s) ended %s", st.CallID, st.Tool, st.Status)
		}
		return &mcp.CallToolResult{IsError: true, Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: text.Clip(msg, maxMessageBytes)}}}
	}
	if st.ResultDropped {
		return &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("call %s (%s) ended %s; run %s no longer keeps its result", st.CallID, st.Tool, st.Status, id)}}}
	}
	res := bytes.TrimSpace(st.Result)
	if len(res) == 0 {
		res = []byte("null")
	}
	out := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: string(res)}}}
	if res[0] == '{' && json.Valid(res) {
		out.StructuredContent = json.RawMessage(res)
	}
	return out
}

// joinNotes joins the notes that are not "".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// notYet is the answer of a call still waiting for a human (or still
// running) when the tools/call has waited long enough; elicited as done's.
func notYet(id string, st workflows.CallStatus, waited time.Duration, elicited string) *mcp.CallToolResult {
	status, msg := StatusRunning, fmt.Sprintf("not finished yet: call %s (%s) still runs after %s. ", st.CallID, st.Tool, waited)
	if st.Waiting != nil {
		status = StatusWaiting
		msg = fmt.Sprintf("not run yet: call %s (%s) waits for a human's approval (args_digest %s). Approve: toolgate approve %s %s. ",
			st.CallID, st.Tool, st.ArgsDigest, id, st.CallID)
	}
	if elicited != "" {
		msg += elicited + ". "
	}
	msg += fmt.Sprintf("Call again with the same arguments and _meta {%q: %q} (or the same %s) to wait for its result", MetaCallID, st.CallID, MetaIdempotencyKey)
	sc := map[string]any{"status": status, "call_id": st.CallID, "args_digest": st.ArgsDigest, "run": id, "tool": st.Tool}
	meta := mcp.Meta{MetaCallID: st.CallID, MetaStatus: status, MetaRun: id}
	if elicited != "" {
		meta[MetaNote] = elicited
	}
	return &mcp.CallToolResult{IsError: true, StructuredContent: sc, Meta: meta,
		Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// refusal is an error result saying why.
func refusal(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text.Clip(msg, maxMessageBytes)}}}
}

// progress sends req's progress notifications (if the client sent a
// progress token) every Options.Progress until stopped, each saying the
// message last set.
type progress struct {
	mu   sync.Mutex
	msg  string
	stop func()
}

func (s *Server) progress(ctx context.Context, req *mcp.CallToolRequest, msg string) *progress {
	p := &progress{msg: msg, stop: func() {}}
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return p
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(s.opts.Progress)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.mu.Lock()
			m := p.msg
			p.mu.Unlock()
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: m}); err != nil && ctx.Err() == nil {
				s.opts.Logger.Debug("progress notification", "err", err)
			}
		}
	})
	p.stop = func() { cancel(); wg.Wait() }
	return p
}

func (p *progress) set(msg string) {
	p.mu.Lock()
	p.msg = msg
	p.mu.Unlock()
}
