package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// start is `toolgate run`: start an AgentRun, wait for the worker to take
// it (or refuse it: then it fails), and with --wait, follow it.
func (c *cli) start(ctx context.Context, args []string) error {
	fs := c.flags("run")
	cn := c.connFlags(fs)
	tq := taskQueueFlag(fs)
	id := fs.String("id", "", "workflow id of the run (required)")
	planFile := fs.String("plan", "", "file holding a RunInput as JSON")
	goal := fs.String("goal", "", "the goal, for a planner that reads it (support, openai)")
	planner := fs.String("planner", plan.KindSupport, "planner for --goal: support or openai")
	approval := fs.String("approval", "", "approval policy: human (default), deny or always_approve")
	wait := fs.Bool("wait", false, "follow the run until it ends")
	as := fs.String("as", "", "sign the start as this approver of the worker's policy (with --key): the run records who requested it")
	keyFile := fs.String("key", "", "the private key file to sign with (toolgate keys new)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *id == "" || (*planFile == "") == (*goal == "") {
		return errors.New("run needs --id and exactly one of --plan FILE or --goal TEXT")
	}
	in, err := runInput(*planFile, *goal, *planner)
	if err != nil {
		return err
	}
	if *approval != "" {
		in.Approval = *approval
	}
	if (*as == "") != (*keyFile == "") {
		return errors.New("run: --as and --key go together (a signed start names its requester and proves it)")
	}
	if *keyFile != "" {
		key, err := signed.ReadPrivateKey(*keyFile)
		if err != nil {
			return err
		}
		if err := tgclient.SignStart(&in, *id, *as, key, 0); err != nil {
			return err
		}
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	cl := tgclient.New(tc, tgclient.WithTaskQueue(*tq))
	wr, err := cl.Start(ctx, *id, in)
	if err != nil {
		if errors.Is(err, tgclient.ErrRefusedInput) && strings.Contains(err.Error(), "already running") {
			return fmt.Errorf("%w: pick another --id, or look at it with `toolgate status %s`", err, *id)
		}
		return err
	}
	if err := c.awaitStart(ctx, tc, cl, wr, *tq); err != nil {
		return err
	}
	if !*wait {
		return nil
	}
	res, err := c.follow(ctx, tc, conn, *id, nil)
	if err != nil {
		return err
	}
	return resultError(res)
}

// runInput reads --plan, or builds the input for --goal.
func runInput(planFile, goal, planner string) (workflows.RunInput, error) {
	if goal != "" {
		return workflows.RunInput{Goal: goal, Planner: plan.Config{Kind: planner}}, nil
	}
	raw, err := os.ReadFile(planFile)
	if err != nil {
		return workflows.RunInput{}, fmt.Errorf("reading the plan: %w", err)
	}
	in, err := workflows.ParseRunInput(raw)
	if err != nil {
		return workflows.RunInput{}, fmt.Errorf("%s is not a RunInput: %w", planFile, err)
	}
	if in.Carry != nil {
		return workflows.RunInput{}, fmt.Errorf("%s sets carry, which only a run itself may set", planFile)
	}
	if err := in.Planner.Validate(); err != nil {
		return workflows.RunInput{}, fmt.Errorf("%s: %w", planFile, err)
	}
	return in, nil
}

// resultError maps a run's end to the exit code: 0 completed, 2 blocked, 1
// failed, and 3 completed with none of its calls run (each failed, or was
// refused, rejected or expired): a script that waits on the run must not
// take that for success.
func resultError(res workflows.RunResult) error {
	switch res.Status {
	case workflows.StatusCompleted:
		return noneRan(res.Trace)
	case workflows.StatusBlocked:
		return &exitError{code: 2, err: fmt.Errorf("run blocked on %s %s (%s)", res.BlockedOn.Tool, res.BlockedOn.CallArgs, res.BlockedOn.CallID)}
	default:
		return &exitError{code: 1, err: fmt.Errorf("run %s: %s", res.Status, res.Error)}
	}
}

// look reads a run's state and trace, with advice when a query finds no
// worker or what it reads cannot be decoded.
func look(ctx context.Context, cl *tgclient.Client, id string) (tgclient.Snapshot, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := cl.Look(qctx, id)
	if errors.Is(err, tgclient.ErrUnreadable) {
		return s, keyAdvice(err)
	}
	var refusal *tgclient.Error
	if err != nil && !errors.As(err, &refusal) {
		return s, fmt.Errorf("querying run %s (is a toolgate worker running on its task queue?): %w", id, err)
	}
	return s, err
}

// unreadableAdvice is what to do about a run whose state, trace or result
// this client cannot decode (client.ErrUnreadable).
const unreadableAdvice = "If the run's worker encrypts payloads, pass --encryption-key-file FILE (the key file the worker uses), " +
	"or set it in the profile; a run that is not an AgentRun has no state or result toolgate can show"

// keyAdvice is err with unreadableAdvice if it is an ErrUnreadable.
func keyAdvice(err error) error {
	if errors.Is(err, tgclient.ErrUnreadable) {
		return fmt.Errorf("%w. %s", err, unreadableAdvice)
	}
	return err
}

// status is `toolgate status ID`.
func (c *cli) status(ctx context.Context, args []string) error {
	return c.show(ctx, "status", args, c.renderStatus)
}

func (c *cli) renderStatus(s tgclient.Snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.State)
	}
	printState(c.stdout, s.State)
	return nil
}

// next is `toolgate next ID`: the nodes waiting to run.
func (c *cli) next(ctx context.Context, args []string) error {
	return c.show(ctx, "next", args, c.renderNext)
}

func (c *cli) renderNext(s tgclient.Snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.State.Next)
	}
	for _, n := range s.State.Next {
		fmt.Fprintln(c.stdout, oneLine(n))
	}
	return nil
}

// trace is `toolgate trace ID`.
func (c *cli) trace(ctx context.Context, args []string) error {
	return c.show(ctx, "trace", args, c.renderTrace)
}

func (c *cli) renderTrace(s tgclient.Snapshot, asJSON bool) error {
	if asJSON {
		return c.json(s.Trace)
	}
	printTrace(c.stdout, s.Trace)
	return nil
}

func (c *cli) show(ctx context.Context, name string, args []string, render func(tgclient.Snapshot, bool) error) error {
	fs := c.flags(name)
	cn := c.connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s needs exactly one run id", name)
	}
	tc, _, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	s, err := look(ctx, tgclient.New(tc), pos[0])
	if err != nil {
		return err
	}
	return render(s, *asJSON)
}

func (c *cli) json(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// approve is `toolgate approve ID CALL_ID...`.
func (c *cli) approve(ctx context.Context, args []string) error {
	return c.decide(ctx, "approve", args)
}

// reject is `toolgate reject ID CALL_ID... --reason TEXT [--cancel]`.
func (c *cli) reject(ctx context.Context, args []string) error { return c.decide(ctx, "reject", args) }

// respond is `toolgate respond ID CALL_ID --response JSON`: an answer in
// the tool's place.
func (c *cli) respond(ctx context.Context, args []string) error {
	return c.decide(ctx, "respond", args)
}

// decide sends one update per call id, each bound to the arguments the
// operator is shown (the interrupt's args_digest), and reports each answer.
func (c *cli) decide(ctx context.Context, name string, args []string) error {
	fs := c.flags(name)
	cn := c.connFlags(fs)
	as := fs.String("as", "", "who decides, kept in the trace (default $USER, said on stderr; with --key, an approver of the worker's policy)")
	keyFile := fs.String("key", "", "sign the decision with this private key (toolgate keys new); a worker with a policy takes no other")
	note := fs.String("note", "", "a note kept with the approval (or the response)")
	reason := fs.String("reason", "", "why (required for reject; the planner receives it)")
	var edited, data, response *string
	var cancel *bool
	switch name {
	case "approve":
		edited = fs.String("args", "", "approve the call with these arguments (a JSON object) instead: checked against the tool's schema and the policy's rules")
		data = fs.String("data", "", "answer what the tool asked (an MCP server's elicitation, kind interrupt) with this JSON object")
	case "reject":
		cancel = fs.Bool("cancel", false, "cancel the calls rather than say no to them (the trace and the planner say \"cancelled\")")
	case "respond":
		response = fs.String("response", "", "the answer (JSON) the planner gets in the tool's place: the tool does not run (only for a tool that is not destructive, or where a policy rule says respond: true)")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return fmt.Errorf("%s needs a run id and at least one call id", name)
	}
	if *as, err = c.decider(name, *as); err != nil {
		return err
	}
	if name == "respond" {
		return c.sendResponse(ctx, cn, pos, *as, *keyFile, *note, *response)
	}
	who := tgclient.Decider{Approver: *as, Text: *note}
	if *keyFile != "" {
		if who.Key, err = signed.ReadPrivateKey(*keyFile); err != nil {
			return err
		}
	}
	decide := (*tgclient.Client).Approve
	if name == "reject" {
		if strings.TrimSpace(*reason) == "" {
			return errors.New("reject needs --reason: the planner is told why")
		}
		who.Text, who.Cancel, decide = *reason, *cancel, (*tgclient.Client).Reject
	} else if *edited != "" {
		if len(pos) != 2 {
			return errors.New("approve --args edits one call: name exactly one call id")
		}
		if !json.Valid([]byte(*edited)) {
			return fmt.Errorf("--args is not valid JSON: %s", oneLine(*edited))
		}
		who.EditedArgs = json.RawMessage(*edited)
	}
	if data != nil && *data != "" {
		if len(pos) != 2 || !json.Valid([]byte(*data)) {
			return errors.New("approve --data answers one call with a JSON object: name exactly one call id")
		}
		who.Data = json.RawMessage(*data)
	}
	tc, _, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	cl := tgclient.New(tc)
	outs, err := decide(cl, ctx, pos[0], who, pos[1:]...)
	if err != nil {
		return keyAdvice(err)
	}
	if err := c.reportDecisions(name, outs); err != nil {
		return err
	}
	if name == "approve" {
		return c.reportPauses(ctx, cl, pos[0], outs)
	}
	return nil
}

// reportPauses says of each call approved whether a pause will refuse it
// (exit status 1): the worker refuses a paused tool's call where it is
// about to run, so the approval lets nothing run until the tool is unpaused.
func (c *cli) reportPauses(ctx context.Context, cl *tgclient.Client, id string, outs []tgclient.Outcome) error {
	paused := 0
	for _, o := range outs {
		if o.Err != nil || o.Interrupt.CallID == "" {
			continue
		}
		p, tq, err := cl.PauseOf(ctx, id, o.Interrupt)
		if err != nil {
			fmt.Fprintf(c.stderr, "note: whether %s is paused could not be read (%v); toolgate guards shows the pauses\n", oneLine(o.Interrupt.Tool), err)
			continue
		}
		if p == nil {
			continue
		}
		paused++
		fmt.Fprintf(c.stderr, "%s %s will be refused by the pause, not run: %s (task queue %s)\n", oneLine(o.CallID), oneLine(o.Interrupt.Tool),
			oneLine(ledger.PausedReason(*p, o.Interrupt.Tool)), oneLine(tq))
	}
	if paused > 0 {
		what := "its tool is paused"
		if paused > 1 {
			what = "their tools are paused"
		}
		return &exitError{code: 1, err: fmt.Errorf("%s approved while %s: nothing runs until it is unpaused", text.Count(paused, "call"), what)}
	}
	return nil
}

// decider is who decides: --as, or else $USER, which it says on stderr
// (the trace keeps the name: it is never made up).
func (c *cli) decider(name, as string) (string, error) {
	if as != "" {
		return as, nil
	}
	user := os.Getenv("USER")
	if user == "" {
		return "", fmt.Errorf("%s needs --as NAME: who decides is kept in the trace", name)
	}
	fmt.Fprintf(c.stderr, "deciding as %s ($USER; pass --as NAME to record someone else)\n", oneLine(user))
	return user, nil
}

// sendResponse answers one call in its tool's place.
func (c *cli) sendResponse(ctx context.Context, cn *connect.Settings, pos []string, as, keyFile, note, response string) error {
	if len(pos) != 2 {
		return errors.New("respond answers one call: name a run id and exactly one call id")
	}
	if strings.TrimSpace(response) == "" || !json.Valid([]byte(response)) {
		return fmt.Errorf("respond needs --response with valid JSON (the answer in the tool's place); got %q", oneLine(response))
	}
	who := tgclient.Decider{Approver: as, Text: note}
	if keyFile != "" {
		var err error
		if who.Key, err = signed.ReadPrivateKey(keyFile); err != nil {
			return err
		}
	}
	tc, _, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	out, err := tgclient.New(tc).RespondTo(ctx, pos[0], who, pos[1], json.RawMessage(response))
	if err != nil {
		return keyAdvice(err)
	}
	return c.reportDecisions("respond", []tgclient.Outcome{out})
}

// reportDecisions prints what became of each decision, and fails if any was refused.
func (c *cli) reportDecisions(name string, outs []tgclient.Outcome) error {
	for _, o := range outs {
		if it := o.Interrupt; it.CallID != "" {
			fmt.Fprintf(c.stdout, "%s %s: %s %s\n", name, oneLine(it.CallID), oneLine(it.Tool), oneLineBytes(it.CallArgs))
		}
		if o.Err != nil {
			fmt.Fprintf(c.stderr, "%s %s refused: %s\n", name, oneLine(o.CallID), multiLine(o.Err.Error()))
			continue
		}
		printDecision(c.stdout, o.Result)
	}
	if n := tgclient.Refused(outs); n > 0 {
		return fmt.Errorf("%d of %d decisions refused", n, len(outs))
	}
	return nil
}

// sendDecision sends one decision, bound as given, and waits for its answer.
func sendDecision(ctx context.Context, tc client.Client, id, name string, in workflows.DecisionInput) (workflows.DecisionResult, error) {
	return tgclient.New(tc).Decide(ctx, id, name == "approve", in)
}

// noneRan is the exit error of a completed run none of whose calls ran
// (exit 3), naming the first few and why; nil when one ran, or the run
// made no call.
func noneRan(trace []workflows.TraceRecord) error {
	var calls []string
	last := map[string]workflows.TraceRecord{}
	for _, r := range trace {
		if r.CallID == "" {
			continue // a grant, a message: no call
		}
		if _, seen := last[r.CallID]; !seen {
			calls = append(calls, r.CallID)
		}
		last[r.CallID] = r
		if r.Status == workflows.TraceOK || r.Status == workflows.TraceCacheHit {
			return nil
		}
	}
	if len(calls) == 0 {
		return nil
	}
	var why []string
	for _, id := range calls[:min(len(calls), 3)] {
		r := last[id]
		w := fmt.Sprintf("%s %s %s", oneLine(id), oneLine(r.Tool), oneLine(r.Status))
		if r.Error != "" {
			w += ": " + truncate(oneLine(r.Error), 160)
		}
		why = append(why, w)
	}
	if len(calls) > 3 {
		why = append(why, fmt.Sprintf("and %d more", len(calls)-3))
	}
	return &exitError{code: 3, err: fmt.Errorf("the run completed, but none of its %s ran: %s (toolgate trace ID shows each)",
		text.Count(len(calls), "call"), strings.Join(why, "; "))}
}
