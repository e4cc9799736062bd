// Command record records the replay fixtures under testsuite/histories: it
// starts the embedded Temporal server on a temporary directory, runs one
// AgentRun per flow against toolgate's own demo worker (demo.Options with
// AllowAutoApprove and SearchAttributes), drives each run (approvals,
// rejections, messages) until it has closed, and writes its history as JSON in
// the format of `temporal workflow show --output json` (protojson of
// history.v1.History, payloads not in shorthand), which
// worker.WorkflowReplayer.ReplayWorkflowHistoryFromJSONFile reads. Every file
// written is replayed once before the command ends.
//
// The policy_* flows run on a worker with an approval policy (rules version
// 4): fixturePolicy, with keys generated afresh for each flow. The public
// keys end up in the recorded config (the toolgate.config marker); the
// private keys live only in memory, long enough to sign the flow's
// decisions, grants and starts.
//
// The guarded flow (guards.go, rules version 10) runs under a policy with
// guards on a task queue of its own, and also writes the history of that
// queue's fleet ledger (ledger_SUFFIX.json), taken while it runs.
//
// Run it from anywhere in the module:
//
//	go run ./testsuite/histories/record              # every flow
//	go run ./testsuite/histories/record -only expire # some flows
//
//	go run ./testsuite/histories/record -out /tmp/h   # somewhere else, to look
//
// With -encryption-key-file FILE every payload is encrypted with the key
// file's newest key, as on a worker with --encryption-key-file (the fixtures
// under testsuite/histories/encrypted, with its test key).
//
// Re-record only on purpose: the point of the fixtures is that they were made
// by an older version of the workflow code. When one of them stops replaying
// (go test ./replay), the change would break runs in flight: guard
// it with workflow.GetVersion rather than re-recording the fixture.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/replay"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory to write the histories to (default: testsuite/histories of this module)")
	only := flag.String("only", "", "comma-separated flows to record (default: all)")
	suffix := flag.String("suffix", "", `added to each file's name ("_v3": approve_v3.json), so a new rules version gets fixtures of its own beside the old ones`)
	keyFile := flag.String("encryption-key-file", "", "encrypt every payload with this key file's newest key (client and worker), as a worker with --encryption-key-file does; the check that each history replays decrypts with it (mode 0600)")
	flag.Parse()
	if *out == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		*out = filepath.Join(root, "testsuite", "histories")
	}
	selected := map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			selected[name] = true
		}
	}
	for name := range selected {
		if !slices.ContainsFunc(allFlows(), func(f flow) bool { return f.name == name }) {
			return fmt.Errorf("unknown flow %q", name)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "toolgate-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	srv, err := devserver.Start(ctx, devserver.Options{
		DataDir: filepath.Join(tmp, "server"),
		Nexus:   true, // the nexus flow's calls
		SearchAttributes: map[string]enumspb.IndexedValueType{
			workflows.SearchAttrStatus:       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			workflows.SearchAttrPendingTools: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
			workflows.SearchAttrForkedFrom:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		},
	})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	// Through connect, as a worker with --encryption-key-file connects: with
	// a key file the client's (and so the worker's) data and failure
	// converters are the keyring's. Isolated: no profile or TEMPORAL_*
	// variable may point the recorder elsewhere.
	cl, conn, err := connect.Dial(ctx, connect.Settings{Address: srv.Address(), Namespace: srv.Namespace(),
		EncryptionKeyFile: *keyFile, Isolated: true}, func(o *client.Options) {
		o.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	var replayOpts []replay.Option
	if conn.Keyring != nil {
		replayOpts = append(replayOpts, replay.WithKeyring(conn.Keyring))
		fmt.Printf("payloads encrypted with %s, key %s\n", *keyFile, conn.Keyring.Newest())
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range allFlows() {
		if len(selected) > 0 && !selected[f.name] {
			continue
		}
		files, err := record(ctx, cl, filepath.Join(tmp, f.name), *out, *suffix, f)
		if err != nil {
			return fmt.Errorf("flow %s: %w", f.name, err)
		}
		for _, file := range files {
			if err := replay.File(file, replayOpts...); err != nil {
				return fmt.Errorf("flow %s: the history just recorded does not replay: %w", f.name, err)
			}
			st, _ := os.Stat(file)
			fmt.Printf("wrote %s (%d bytes), replays\n", file, st.Size())
		}
	}
	return nil
}

// moduleRoot is the directory holding go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the toolgate module, or pass -out")
		}
		dir = parent
	}
}

// growUntilContinued grows the history of run id with refused decisions
// until its current run continues as new, its calls parked.
func growUntilContinued(ctx context.Context, cl client.Client, id string) error {
	desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return err
	}
	firstRun := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for i := 0; i < 40; i++ {
		// Each once the run has taken the one before: 40 refusals, and the history grows by 4 events each.
		in := workflows.DecisionInput{CallID: "c-9", Approver: "x", ArgsDigest: fmt.Sprint(i)}
		raw, _ := json.Marshal(in)
		sum := sha256.Sum256(raw)
		if err := cl.SignalWorkflow(ctx, id, "", workflows.SignalApprove, in); err != nil {
			return err
		}
		if err := waitFor(ctx, cl, id, func(s workflows.State) bool {
			return len(s.Refused) > 0 && s.Refused[len(s.Refused)-1].PayloadSHA256 == hex.EncodeToString(sum[:])
		}); err != nil {
			return err
		}
	}
	for {
		desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		if desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() != firstRun {
			return nil
		}
		if err := cl.SignalWorkflow(ctx, id, "", workflows.SignalApprove, workflows.DecisionInput{CallID: "c-9", Approver: "x"}); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allFlows are every flow the recorder knows.
func allFlows() []flow {
	return append(slices.Clone(flows), externalFlow(), notifyFlow(), guardedFlow(), guardedParkFlow(), nexusFlow(), remoteFlow())
}

// flow is one recorded scenario.
type flow struct {
	name string
	in   workflows.RunInput
	// drive decides what the run waits for; nil: nothing to do.
	drive func(ctx context.Context, cl client.Client, id string) error
	// status and trace ("c-1 ok", …) the run must end with, so a fixture
	// shows what its name says.
	status string
	trace  []string
	// unordered: compare the trace as a set (calls run concurrently).
	unordered bool
	// allRuns: write the first and the last run of a continue-as-new chain.
	allRuns bool
	// policy: the worker has fixturePolicy, with approvers whose keys are
	// generated for this flow; signedDrive (not drive) then decides, and
	// prepare may sign the input (a request_token) before the run starts.
	policy      bool
	prepare     func(s *signers, id string, in *workflows.RunInput) error
	signedDrive func(ctx context.Context, cl client.Client, id string, s *signers) error
	// approvers: who each approved record of the trace names, in order
	// ("rule:small-refunds", "bob, carol", "grant:carol", …); nil: not checked.
	approvers []string
	// edited: the call whose approved record must show original_args.
	edited string
	// operators: the worker's policy is fixturePolicy with dave's role ops
	// as its operators (who may rewind and fork a run), a variant of its own
	// so the flows recorded before there were operators record as they did.
	operators bool
	// notify: the worker notifies two webhooks and alice may decide by
	// e-mail (notify.go).
	notify bool
	// extraPolicy is appended to the flow's policy (guards.go: guards).
	extraPolicy string
	// taskQueue is the worker's and the run's task queue; "":
	// workflows.TaskQueue.
	taskQueue string
	// extra, if set, runs once the run's history is written and writes
	// more histories (file names them: base+suffix+".json"), which are
	// replayed too (guards.go: the fleet ledger's).
	extra func(ctx context.Context, cl client.Client, s *signers, file func(base string) string) ([]string, error)
	// id is the run's workflow id; "": fixture-NAME.
	id string
	// setup, if set, runs before the worker starts: it may change the
	// worker's options and start what the flow needs besides (a worker
	// of other tools, the Nexus service); stop undoes it.
	setup func(ctx context.Context, cl client.Client, opts *worker.Options) (stop func(), err error)
	// then, if set, runs once the run has closed (after drive or
	// signedDrive) and names the run to export and check instead of it —
	// a rewind's new run, a fork — with that run's result.
	then func(ctx context.Context, cl client.Client, id string, s *signers) (exportID, exportRun string, res workflows.RunResult, err error)
}

func proposal(toolName, args string) tool.Proposal {
	return tool.Proposal{Tool: toolName, Args: json.RawMessage(args)}
}

var (
	searchLogin   = proposal("search_tickets", `{"query":"login"}`)
	searchBilling = proposal("search_tickets", `{"query":"billing"}`)
	closeTKT3     = proposal("close_ticket", `{"ticket_id":"TKT-3"}`)
	// seed is the seed's walk-through: search, the same search again (a memo
	// hit), then close the ticket (destructive: held at the gate).
	seed = [][]tool.Proposal{{searchLogin}, {searchLogin}, {closeTKT3}}
)

func scripted(answer string, turns ...[]tool.Proposal) plan.Config {
	return plan.Config{Kind: plan.KindScripted, Turns: turns, Answer: answer}
}

var flows = []flow{
	{
		name:   "cache_hit",
		in:     workflows.RunInput{Goal: "find the login ticket", Planner: scripted("found TKT-3", []tool.Proposal{searchLogin}, []tool.Proposal{searchLogin})},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit"},
	},
	{
		name: "approve",
		in:   workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("closed TKT-3", seed...)},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			return decideByUpdate(ctx, cl, id, "c-3", workflows.KindGate, workflows.UpdateApprove, "alice", "")
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 approved", "c-3 ok"},
	},
	{
		name: "reject",
		in:   workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("left TKT-3 open", seed...)},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			return decideBySignal(ctx, cl, id, "c-3", workflows.KindGate, workflows.SignalReject, "bob", "wrong ticket")
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 rejected"},
	},
	{
		name: "expire",
		in: workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("nobody approved", seed...),
			ApprovalTimeout: workflows.Duration(2 * time.Second)},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 expired"},
	},
	{
		name:   "deny",
		in:     workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("not reached", seed...), Approval: workflows.PolicyDeny},
		status: workflows.StatusBlocked,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked"},
	},
	{
		name: "interrupt",
		in: workflows.RunInput{Goal: "book a room", Planner: scripted("booked",
			[]tool.Proposal{proposal("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--","hotel":"Hotel Aurora","nights":2}`)})},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			if err := decideByUpdate(ctx, cl, id, "c-1", workflows.KindGate, workflows.UpdateApprove, "alice", ""); err != nil {
				return err
			}
			return decideByUpdate(ctx, cl, id, "c-1", workflows.KindInterrupt, workflows.UpdateApprove, "compliance", "")
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 blocked", "c-1 approved", "c-1 interrupted", "c-1 approved", "c-1 ok"},
	},
	{
		name: "retry_fallback",
		in: workflows.RunInput{Goal: "where is ORD-1001", Planner: scripted("in transit (stale)",
			[]tool.Proposal{proposal("carrier_status", `{"order_id":"ORD-1001"}`)})},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 fallback", "c-2 ok"},
	},
	{
		name: "parallel",
		in: workflows.RunInput{Goal: "tidy up", Planner: scripted("done", []tool.Proposal{
			searchLogin, proposal("get_ticket", `{"ticket_id":"TKT-1"}`), proposal("close_ticket", `{"ticket_id":"TKT-2"}`)})},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			return decideBySignal(ctx, cl, id, "c-3", workflows.KindGate, workflows.SignalApprove, "alice", "")
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 ok", "c-2 ok", "c-3 blocked", "c-3 approved", "c-3 ok"},
		unordered: true,
	},
	{
		name: "continue_as_new",
		in: workflows.RunInput{Goal: "search a lot", HistoryLimit: 10,
			Planner: scripted("searched", []tool.Proposal{searchLogin}, []tool.Proposal{searchBilling}, []tool.Proposal{searchLogin})},
		status:  workflows.StatusCompleted,
		trace:   []string{"c-1 ok", "c-2 ok", "c-3 cache_hit"},
		allRuns: true,
	},
	{
		name: "message",
		in: workflows.RunInput{Goal: "find the login ticket", Session: true,
			Planner: scripted("here you are", []tool.Proposal{searchLogin}, nil, []tool.Proposal{searchBilling}, nil, []tool.Proposal{searchLogin}, nil)},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			for turn, text := range []string{"also find the billing one", "and the login one again"} {
				if err := waitFor(ctx, cl, id, func(s workflows.State) bool {
					return s.Status == workflows.StatusWaitingForInput && s.Turn == turn+1
				}); err != nil {
					return err
				}
				if err := cl.SignalWorkflow(ctx, id, "", workflows.SignalMessage, workflows.MessageInput{Text: text}); err != nil {
					return err
				}
			}
			if err := waitFor(ctx, cl, id, func(s workflows.State) bool {
				return s.Status == workflows.StatusWaitingForInput && s.Turn == 3
			}); err != nil {
				return err
			}
			return cl.SignalWorkflow(ctx, id, "", workflows.SignalEnd, struct{}{})
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 ok", "c-3 cache_hit"},
	},
	{
		// Rules version 5: refused signals grow the history of a run that
		// waits at the gate past its history_limit; it continues as new with
		// its call waiting (parked), and the next run takes the approval.
		name: "park",
		in:   workflows.RunInput{Goal: "close TKT-3", HistoryLimit: 20, Planner: scripted("closed", []tool.Proposal{closeTKT3})},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			first, err := waitPending(ctx, cl, id, "c-1", workflows.KindGate)
			if err != nil {
				return err
			}
			if err := growUntilContinued(ctx, cl, id); err != nil {
				return err
			}
			it, err := waitPending(ctx, cl, id, "c-1", workflows.KindGate)
			if err != nil {
				return err
			}
			if !it.RequestedAt.Equal(first.RequestedAt) {
				return fmt.Errorf("c-1 was asked at %s, then at %s: want the same question after continue-as-new", first.RequestedAt, it.RequestedAt)
			}
			return decideByUpdate(ctx, cl, id, "c-1", workflows.KindGate, workflows.UpdateApprove, "alice", "")
		},
		status:  workflows.StatusCompleted,
		trace:   []string{"c-1 blocked", "c-1 approved", "c-1 ok"},
		allRuns: true,
	},
	{
		name: "support_planner",
		in:   workflows.RunInput{Goal: "find the login ticket and close it", Planner: plan.Config{Kind: plan.KindSupport}},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			return decideByUpdate(ctx, cl, id, "c-3", workflows.KindGate, workflows.UpdateApprove, "alice", "")
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 approved", "c-3 ok"},
	},
	{
		// The rules decide: a small refund runs by rule, a test refund is
		// denied by rule, and close_ticket waits for support (alice, signed).
		name: "policy_rule",
		in: workflows.RunInput{Goal: "refund BK-1 a little, try a test refund, close TKT-3", Planner: scripted("done",
			[]tool.Proposal{refund("BK-1", 2500, "")},
			[]tool.Proposal{refund("BK-3", 5000, `,"reason":"a test refund"`)},
			[]tool.Proposal{closeTKT3})},
		policy: true,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			res, err := s.decideSigned(ctx, cl, id, "c-3", signed.ActionApprove, "alice", nil)
			return wantDecision(res, err, workflows.TraceApproved)
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 approved", "c-1 ok", "c-2 blocked", "c-3 blocked", "c-3 approved", "c-3 ok"},
		approvers: []string{"rule:small-refunds", "alice"},
	},
	{
		// A large refund needs two of finance: bob's approval is counted,
		// carol's decides. dave requested the run (a signed start).
		name: "policy_quorum",
		in: workflows.RunInput{Goal: "refund most of BK-2", Planner: scripted("refunded",
			[]tool.Proposal{refund("BK-2", 30000, "")})},
		policy:  true,
		prepare: signStart("dave"),
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			res, err := s.decideSigned(ctx, cl, id, "c-1", signed.ActionApprove, "bob", nil)
			if err := wantDecision(res, err, workflows.DecisionCounted); err != nil {
				return err
			}
			res, err = s.decideSigned(ctx, cl, id, "c-1", signed.ActionApprove, "carol", nil)
			return wantDecision(res, err, workflows.TraceApproved)
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 blocked", "c-1 approved", "c-1 ok"},
		approvers: []string{"bob, carol"},
	},
	{
		// bob approves a 9000 refund edited down to 8000; carol grants
		// refunds up to 5000 once, so the next refund passes by grant:carol.
		name: "policy_edit",
		in: workflows.RunInput{Goal: "refund BK-1 twice", Planner: scripted("refunded",
			[]tool.Proposal{refund("BK-1", 9000, "")},
			[]tool.Proposal{refund("BK-1", 5000, "")})},
		policy: true,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			if _, err := waitPending(ctx, cl, id, "c-1", workflows.KindGate); err != nil {
				return err
			}
			// The grant comes while c-1 waits, so it is in place before c-2.
			if _, err := s.grantSigned(ctx, cl, id, "carol", signed.Grant{Tool: "refund", When: "args.amount_cents <= 5000", Uses: 1}); err != nil {
				return err
			}
			res, err := s.decideSigned(ctx, cl, id, "c-1", signed.ActionApprove, "bob", json.RawMessage(`{"booking_id":"BK-1","amount_cents":8000}`))
			return wantDecision(res, err, workflows.TraceApproved)
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 blocked", "grant", "c-1 edited", "c-1 ok", "c-2 approved", "c-2 ok"},
		approvers: []string{"bob", "grant:carol"},
		edited:    "c-1",
	},
	outcomesFlow(),
	rewoundFlow(),
	forkedFlow(),
}

// record runs one flow on a worker of its own (its own desk database under
// dataDir, so flows never see each other's changes), waits until the run has
// closed and writes its history (and, for allRuns, the last run's) to out.
func record(ctx context.Context, cl client.Client, dataDir, out, suffix string, f flow) ([]string, error) {
	opts, desk, err := demo.Options(dataDir)
	if err != nil {
		return nil, err
	}
	defer desk.Close()
	opts.AllowAutoApprove = true
	opts.SearchAttributes = true
	id := "fixture-" + f.name
	if f.id != "" {
		id = f.id
	}
	in := f.in
	var s *signers
	if f.policy {
		if s, err = newSigners(f.operators, f.extraPolicy); err != nil {
			return nil, err
		}
		if f.notify {
			stop, err := notifyWorker(dataDir, s, &opts)
			if err != nil {
				return nil, err
			}
			defer stop()
		}
		opts.Policy = s.policy
		opts.AllowAutoApprove = false // a worker with a policy refuses it
		if f.prepare != nil {
			if err := f.prepare(s, id, &in); err != nil {
				return nil, err
			}
		}
	}
	if f.setup != nil {
		stop, err := f.setup(ctx, cl, &opts)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	queue := workflows.TaskQueue
	if f.taskQueue != "" {
		queue = f.taskQueue
	}
	w, err := worker.Start(cl, queue, opts)
	if err != nil {
		return nil, err
	}
	defer w.Stop()

	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue,
		WorkflowExecutionTimeout: 2 * time.Minute}, workflows.WorkflowName, in)
	if err != nil {
		return nil, err
	}
	if f.drive != nil {
		if err := f.drive(ctx, cl, id); err != nil {
			return nil, err
		}
	}
	if f.signedDrive != nil {
		if err := f.signedDrive(ctx, cl, id, s); err != nil {
			return nil, err
		}
	}
	firstRun := wr.GetRunID() // before Get: Get moves it to the run it follows to
	var res workflows.RunResult
	if err := wr.Get(ctx, &res); err != nil { // follows continue-as-new to the last run
		return nil, err
	}
	if f.then != nil {
		if id, firstRun, res, err = f.then(ctx, cl, id, s); err != nil {
			return nil, err
		}
	}
	if err := check(f, res); err != nil {
		return nil, err
	}

	runs := []string{firstRun}
	names := []string{f.name + suffix + ".json"}
	if f.allRuns {
		last, err := cl.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return nil, err
		}
		lastRun := last.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		if lastRun == firstRun {
			return nil, errors.New("the run never continued as new: lower history_limit")
		}
		runs = append(runs, lastRun)
		names = []string{f.name + suffix + "_first.json", f.name + suffix + "_last.json"}
	}
	var files []string
	for i, runID := range runs {
		file := filepath.Join(out, names[i])
		if err := export(ctx, cl, id, runID, file); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	if f.extra != nil {
		more, err := f.extra(ctx, cl, s, func(base string) string { return filepath.Join(out, base+suffix+".json") })
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// check compares the run's end with what the flow is meant to show.
func check(f flow, res workflows.RunResult) error {
	var got []string
	for _, r := range res.Trace {
		got = append(got, strings.TrimSpace(r.CallID+" "+r.Status)) // a grant has no call
	}
	want := slices.Clone(f.trace)
	if f.unordered {
		slices.Sort(got)
		slices.Sort(want)
	}
	if res.Status != f.status || !slices.Equal(got, want) {
		var why []string
		for _, r := range res.Trace {
			if r.Error != "" {
				why = append(why, r.CallID+": "+r.Error)
			}
		}
		return fmt.Errorf("run ended %s with trace %q; the flow wants %s with %q (errors: %q)", res.Status, got, f.status, want, why)
	}
	var approvers []string
	for _, r := range res.Trace {
		if r.Status == workflows.TraceApproved || r.Status == workflows.TraceEdited {
			approvers = append(approvers, r.Approver)
			if r.CallID == f.edited && len(r.OriginalArgs) == 0 {
				return fmt.Errorf("call %s was approved without original_args: the edit is not in the trace", r.CallID)
			}
		}
	}
	if f.approvers != nil && !slices.Equal(approvers, f.approvers) {
		return fmt.Errorf("approved by %q; the flow wants %q", approvers, f.approvers)
	}
	return nil
}

// export writes one closed run's full history as `temporal workflow show
// --output json` does. It refuses a run that has not closed: a history taken
// mid-run may end inside a workflow task and does not replay (sdk-go #1670).
func export(ctx context.Context, cl client.Client, id, runID, file string) error {
	desc, err := cl.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return err
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("run %s/%s is still running: export closed runs only", id, runID)
	}
	return writeHistory(ctx, cl, id, runID, file)
}

// writeHistory writes one run's full history as export does, closed or
// not: a running run's only between its workflow tasks (waitIdle).
func writeHistory(ctx context.Context, cl client.Client, id, runID, file string) error {
	hist := &historypb.History{}
	it := cl.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return err
		}
		hist.Events = append(hist.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// waitFor polls the run's state query until ok says yes.
func waitFor(ctx context.Context, cl client.Client, id string, ok func(workflows.State) bool) error {
	var last workflows.State
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		v, err := cl.QueryWorkflow(ctx, id, "", workflows.QueryState)
		if err == nil && v.Get(&last) == nil && ok(last) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("run %s: condition not reached in 30s (state %+v)", id, last)
}

// waitPending waits until callID waits for a decision of the given kind.
func waitPending(ctx context.Context, cl client.Client, id, callID string, kind tool.DecisionKind) (workflows.Interrupt, error) {
	var it workflows.Interrupt
	err := waitFor(ctx, cl, id, func(s workflows.State) bool {
		for _, i := range s.Interrupts {
			if i.CallID == callID && i.Kind == kind {
				it = i
				return true
			}
		}
		return false
	})
	return it, err
}

// decideByUpdate sends approve or reject as an update, bound to the digest.
func decideByUpdate(ctx context.Context, cl client.Client, id, callID string, kind tool.DecisionKind, name, who, reason string) error {
	it, err := waitPending(ctx, cl, id, callID, kind)
	if err != nil {
		return err
	}
	h, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name,
		Args:         []any{workflows.DecisionInput{CallID: callID, Approver: who, Reason: reason, ArgsDigest: it.ArgsDigest, Kind: it.Kind}},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	var res workflows.DecisionResult
	return h.Get(ctx, &res)
}

// decideBySignal sends approve or reject as a signal (as the stock temporal
// CLI would) and waits until the run has taken it.
func decideBySignal(ctx context.Context, cl client.Client, id, callID string, kind tool.DecisionKind, name, who, reason string) error {
	it, err := waitPending(ctx, cl, id, callID, kind)
	if err != nil {
		return err
	}
	if err := cl.SignalWorkflow(ctx, id, "", name, workflows.DecisionInput{CallID: callID, Approver: who, Reason: reason, ArgsDigest: it.ArgsDigest, Kind: it.Kind}); err != nil {
		return err
	}
	return nil
}
