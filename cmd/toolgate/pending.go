package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/workflows"
)

// defaultPendingPage is the number of runs `toolgate pending` lists unless
// told otherwise.
const defaultPendingPage = 50

// queuesFlag is a repeatable --task-queue: the task queues whose runs are
// listed (the default until the flag is given).
type queuesFlag struct {
	queues []string
	set    bool
}

func (q *queuesFlag) String() string { return strings.Join(q.queues, ",") }

func (q *queuesFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("a task queue has a name")
	}
	if !q.set {
		q.queues, q.set = nil, true
	}
	q.queues = append(q.queues, v)
	return nil
}

// servedQueuesFlag adds a repeatable --task-queue (default workflows.TaskQueue):
// the queues this deployment's workers poll, whose runs are listed.
func servedQueuesFlag(fs *flag.FlagSet) *queuesFlag {
	q := &queuesFlag{queues: []string{workflows.TaskQueue}}
	fs.Var(q, "task-queue", "list runs of this task queue, one a toolgate worker of this deployment polls (repeat for several; runs of any other queue are never listed nor queried)")
	return q
}

// queryTimeoutFlag adds --query-timeout: the per-run deadline while listing.
func queryTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("query-timeout", tgclient.DefaultQueryTimeout, "how long each listed run's queries may take; a run that does not answer in time is named as failed, and costs no other run its place")
}

// pending is `toolgate pending`: the calls waiting for a decision across
// runs, a page of runs at a time (--all: every page).
//
// A run whose state query fails (a wedged run, a run whose worker is gone)
// does not hide the others: their calls are listed as usual (stdout; with
// --json the same array as ever, of this page's calls), and each run that
// could not be queried is named on stderr (with --json as one line
// {"failed":[{"run":…,"error":…}]}). When more runs wait than the page
// holds, how to ask for the next page is printed (stdout; with --json on
// stderr as one line {"next_page":TOKEN}). The exit code is 0 then; it is 1
// when listing the runs fails or when no run that was found could be queried.
func (c *cli) pending(ctx context.Context, args []string) error {
	fs := c.flags("pending")
	cn := c.connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	queues := servedQueuesFlag(fs)
	timeout := queryTimeoutFlag(fs)
	size := fs.Int("page-size", defaultPendingPage, fmt.Sprintf("runs per page (at most %d)", tgclient.MaxPageSize))
	pageToken := fs.String("page", "", "the page to list: the token the previous page printed")
	all := fs.Bool("all", false, "list every page")
	toolName := fs.String("tool", "", "only the calls of this tool")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *size < 1 || *size > tgclient.MaxPageSize {
		return fmt.Errorf("--page-size %d: want 1 to %d runs", *size, tgclient.MaxPageSize)
	}
	opts := tgclient.PendingOptions{PageSize: *size, TaskQueues: queues.queues, Tool: *toolName}
	if *pageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(*pageToken)
		if err != nil || len(tok) == 0 {
			return fmt.Errorf("--page %q is not a page token (toolgate pending prints one when more runs wait)", *pageToken)
		}
		opts.PageToken = tok
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	cl := tgclient.New(tc, tgclient.WithConnection(conn), tgclient.WithQueryTimeout(*timeout))
	var res tgclient.PendingPage
	if *all {
		res, err = cl.AllPendingWith(ctx, opts)
	} else if res, err = cl.Pending(ctx, opts); err == nil {
		err = tgclient.NoneQueried(res)
	}
	if err := c.printPending(res, err, *asJSON, pendingAgain(args, res.NextPageToken)); err != nil {
		return err
	}
	return c.printFleetPauses(ctx, cl, queues.queues, *asJSON)
}

// printFleetPauses names the tools paused fleet-wide on the queues (the
// kill switch: calls of them are refused whatever their approvals): on
// stdout, or with --json on stderr as one line {"paused":[…]}.
func (c *cli) printFleetPauses(ctx context.Context, cl *tgclient.Client, queues []string, asJSON bool) error {
	type queuePause struct {
		TaskQueue string `json:"task_queue"`
		ledger.Pause
	}
	var all []queuePause
	for _, q := range queues {
		v, ok, err := cl.Guards(ctx, q)
		if err != nil {
			fmt.Fprintf(c.stderr, "the fleet ledger of task queue %s did not answer: tools paused on it are not shown: %s\n", oneLine(q), multiLine(err.Error()))
			continue
		}
		if !ok {
			continue
		}
		for _, p := range v.Pauses {
			all = append(all, queuePause{TaskQueue: q, Pause: p})
		}
	}
	if len(all) == 0 {
		return nil
	}
	if asJSON {
		return json.NewEncoder(c.stderr).Encode(struct {
			Paused []queuePause `json:"paused"`
		}{all})
	}
	for _, p := range all {
		what := oneLine(p.Tool)
		if p.Tool == ledger.AllTools {
			what = "every destructive tool"
		}
		fmt.Fprintf(c.stdout, "PAUSED fleet-wide on task queue %s: %s, by %s at %s: %s (approvals of its calls are refused until toolgate unpause)\n",
			oneLine(p.TaskQueue), what, oneLine(p.By), p.At.UTC().Format(time.RFC3339), oneLine(p.Reason))
	}
	return nil
}

// pendingAgain is the command that lists the page after the one with
// next as its token ("" on the last page): args with --page replaced.
func pendingAgain(args []string, next []byte) string {
	if len(next) == 0 {
		return ""
	}
	out := []string{"toolgate", "pending"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--page" || a == "-page" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--page=") || strings.HasPrefix(a, "-page=") {
			continue
		}
		out = append(out, shellQuote(a))
	}
	return strings.Join(append(out, "--page", base64.RawURLEncoding.EncodeToString(next)), " ")
}

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printPending prints a page of waiting calls; again is the command for the
// next page ("" on the last).
func (c *cli) printPending(res tgclient.PendingPage, err error, asJSON bool, again string) error {
	if len(res.Failed) > 0 {
		if asJSON {
			enc := json.NewEncoder(c.stderr)
			if err := enc.Encode(struct {
				Failed []tgclient.RunFailure `json:"failed"`
			}{res.Failed}); err != nil {
				return err
			}
		} else {
			for _, f := range res.Failed {
				advice := ""
				if f.Unreadable && !errors.Is(err, tgclient.ErrUnreadable) { // else the error says it
					advice = ". " + unreadableAdvice
				}
				fmt.Fprintf(c.stderr, "run %s not listed: its state query failed: %s%s\n", oneLine(f.RunID), multiLine(f.Error), advice)
			}
		}
	}
	if err != nil {
		return keyAdvice(err)
	}
	if asJSON {
		if err := c.json(res.Calls); err != nil {
			return err
		}
		if again != "" {
			return json.NewEncoder(c.stderr).Encode(struct {
				NextPage string `json:"next_page"`
			}{base64.RawURLEncoding.EncodeToString(res.NextPageToken)})
		}
		return nil
	}
	if len(res.Calls) == 0 && again != "" {
		fmt.Fprintln(c.stdout, "no call waits in the runs of this page")
	} else {
		printInbox(c.stdout, res.Calls)
	}
	if again != "" {
		fmt.Fprintf(c.stdout, "more runs wait: the next page is\n  %s\n(--all lists every page)\n", again)
	}
	return nil
}
