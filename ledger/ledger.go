package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/policy"
)

// Registry is where Register registers the ledger: a worker.Worker, or a
// test's workflow environment.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers all of the ledger on r: its workflow (RegisterLedger)
// and what runs call it with (RegisterCalls). A worker with an authority
// namespace registers the first on its worker of that namespace and the
// second on its worker of the runs.
func Register(r Registry, cfg Config) {
	RegisterLedger(r, cfg)
	RegisterCalls(r, cfg)
}

// RegisterLedger registers the ledger's workflow (WorkflowName) with cfg,
// the local activities it loads cfg.Policy with (PolicyActivity) and
// rebuilds a closed ledger's state with (RecoverActivity). The worker
// registers the marker workflow a pause's use is claimed with
// (MarkerWorkflow) beside it.
func RegisterLedger(r Registry, cfg Config) {
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) error { return run(ctx, cfg, in) },
		workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(func(context.Context) (*policy.Policy, error) { return cfg.Policy, nil },
		activity.RegisterOptions{Name: PolicyActivity})
	r.RegisterActivityWithOptions(recoverActivity, activity.RegisterOptions{Name: RecoverActivity})
}

// RegisterCalls registers what runs call the ledger with (ReserveActivity,
// SettleActivity, through cfg.Client or cfg.Backend) and what carries an
// operator's act to it (ActWorkflow, ActActivity).
func RegisterCalls(r Registry, cfg Config) {
	calls := &caller{client: cfg.Client, tools: cfg.Tools}
	if cfg.Policy != nil {
		calls.eng, _ = policy.Compile(cfg.Policy) // one that does not compile leases nothing; the ledger says why
	}
	r.RegisterWorkflowWithOptions(actWorkflow, workflow.RegisterOptions{Name: ActWorkflow})
	r.RegisterActivityWithOptions(calls.act, activity.RegisterOptions{Name: ActActivity})
	if cfg.Backend != nil {
		r.RegisterActivityWithOptions(cfg.Backend.Reserve, activity.RegisterOptions{Name: ReserveActivity})
		r.RegisterActivityWithOptions(cfg.Backend.Settle, activity.RegisterOptions{Name: SettleActivity})
		return
	}
	r.RegisterActivityWithOptions(calls.reserve, activity.RegisterOptions{Name: ReserveActivity})
	r.RegisterActivityWithOptions(calls.settle, activity.RegisterOptions{Name: SettleActivity})
}

// Ledger is the ledger's workflow with the default Config (its policy comes
// from PolicyActivity whatever the Config); Register registers it with the
// worker's.
func Ledger(ctx workflow.Context, in Input) error { return run(ctx, Config{}, in) }

// ledger is one run of the ledger's workflow.
type ledger struct {
	st      State
	book    book
	engine  *policy.Engine // nil: no policy (or one that did not compile)
	ready   bool           // the policy is loaded
	closing bool           // the run continues as new: it takes no more updates
	updates int            // updates taken by this run
	// claiming are the tokens whose use is being claimed on the server.
	claiming map[string]bool
	// memo: the run keeps its pauses in its memo (pausememo.go).
	memo bool
}

// run is the ledger's workflow.
func run(ctx workflow.Context, cfg Config, in Input) error {
	log := workflow.GetLogger(ctx)
	l := &ledger{claiming: map[string]bool{}}
	if in.Carry != nil {
		if workflow.GetInfo(ctx).ContinuedExecutionRunID == "" {
			log.Warn("toolgate ledger: a client started the ledger with a state; it is ignored (only the ledger's own continue-as-new carries one)")
		} else {
			l.st = bounded(*in.Carry)
		}
	}
	l.book.st = &l.st
	if err := l.register(ctx); err != nil {
		return err
	}
	// From shardChange the task queue's ledger keeps the pauses, and each
	// guard's ledger counts that guard (shard.go).
	info := workflow.GetInfo(ctx)
	guard := shardOf(info.WorkflowExecution.ID, info.TaskQueueName)
	if workflow.GetVersion(ctx, shardChange, workflow.DefaultVersion, 1) >= 1 {
		switch {
		case guard != "":
			l.book.role, l.book.only = countsGuard, guard
		case info.WorkflowExecution.ID == ID(info.TaskQueueName):
			l.book.role = countsPause
		}
	}
	if st, err := recoverState(ctx, l.book.role, guard); err != nil {
		return err
	} else if st != nil {
		l.st = *st
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	var p *policy.Policy
	if err := workflow.ExecuteLocalActivity(lctx, PolicyActivity).Get(ctx, &p); err != nil {
		return fmt.Errorf("toolgate ledger: loading the policy: %w", err)
	}
	if p != nil {
		eng, err := policy.Compile(p)
		if err != nil {
			log.Error("toolgate ledger: the worker's policy does not compile; the ledger runs with no guards and nobody may pause a tool", "error", err)
		} else {
			l.engine = eng
		}
	}
	l.book.eng = l.engine
	l.ready = true
	l.memo = workflow.GetVersion(ctx, pauseMemoChange, workflow.DefaultVersion, 1) >= 1
	l.publishPauses(ctx)
	// Settlements come by signal. They are taken here, in the run's one
	// loop, never by a goroutine blocked on the channel: a value handed to a
	// blocked receiver that has not run yet when the run continues as new
	// would be lost with it.
	settles := workflow.GetSignalChannel(ctx, SignalSettle)
	drain := func() {
		for {
			var raw converter.RawValue
			if !settles.ReceiveAsync(&raw) {
				return
			}
			l.settleSignal(ctx, raw)
		}
	}

	limit := cfg.UpdatesPerRun
	if limit <= 0 {
		limit = UpdatesPerRun
	}
	// From pageChange the run continues as new before its history needs a
	// second page (PageEvents): a worker that must fetch a busy ledger's
	// whole history then reads one page (temporalio/temporal#7741).
	paged := workflow.GetVersion(ctx, pageChange, workflow.DefaultVersion, 1) >= 1
	due := func() bool {
		info := workflow.GetInfo(ctx)
		return l.updates >= limit || info.GetContinueAsNewSuggested() || (paged && info.GetCurrentHistoryLength() >= PageEvents)
	}
	for drain(); !due(); drain() {
		if err := workflow.Await(ctx, func() bool { return settles.Len() > 0 || due() }); err != nil {
			return err
		}
	}
	l.closing = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	drain() // the settlements signalled before the run closes are its own
	return workflow.NewContinueAsNewError(ctx, WorkflowName, Input{Carry: &l.st})
}

// settleSignal takes a settlement signalled by a run (SignalSettle). A
// signal nobody can refuse: one that does not decode, or has no key, is
// logged and dropped.
func (l *ledger) settleSignal(ctx workflow.Context, raw converter.RawValue) {
	var s Settlement
	p := raw.Payload()
	if p == nil || len(p.GetData()) > MaxKeyBytes+64 || json.Unmarshal(p.GetData(), &s) != nil || s.Key == "" || len(s.Key) > MaxKeyBytes {
		workflow.GetLogger(ctx).Warn("toolgate ledger: a settle signal that is no settlement, dropped")
		return
	}
	l.updates++
	out := l.book.settle(workflow.Now(ctx), s)
	metrics := workflow.GetMetricsHandler(ctx)
	switch {
	case out.Refused != "":
		workflow.GetLogger(ctx).Warn("toolgate ledger: "+out.Refused, "entry", keyID(s.Key))
	case out.Found && s.Commit:
		metrics.Counter("toolgate_ledger_committed").Inc(1)
	case out.Found && !out.Committed:
		metrics.Counter("toolgate_ledger_released").Inc(1)
	}
}

// bounded is a carried state within the ledger's bounds (it always is:
// the ledger carries only what it kept).
func bounded(s State) State {
	if n := len(s.Entries); n > MaxEntries {
		s.Entries = s.Entries[n-MaxEntries:]
	}
	if len(s.Pauses) > MaxPauses {
		s.Pauses = s.Pauses[:MaxPauses]
	}
	if n := len(s.Spent); n > MaxSpent {
		s.Spent = s.Spent[n-MaxSpent:]
	}
	if len(s.Leases) > MaxLeases {
		s.Leases = s.Leases[:MaxLeases]
	}
	for i := range s.Leases {
		if len(s.Leases[i].Holds) > MaxLeaseHolds {
			s.Leases[i].Holds = s.Leases[i].Holds[:MaxLeaseHolds]
		}
	}
	if n := len(s.Used); n > 2*MaxUsed {
		s.Used = s.Used[n-2*MaxUsed:]
	}
	return s
}

// closingError refuses an update while the run continues as new.
func closingError() error {
	return temporal.NewApplicationError("the fleet ledger is continuing as new: send the update again, to its next run", ClosingError)
}

// refused is the error an update handler or validator refuses with (nil
// for nil).
func refused(err error) error {
	if err == nil {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "ToolgateLedgerRefused", nil)
}

// register sets the ledger's update and query handlers.
func (l *ledger) register(ctx workflow.Context) error {
	metrics := workflow.GetMetricsHandler(ctx)
	wait := func(ctx workflow.Context) error {
		return workflow.Await(ctx, func() bool { return l.ready })
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReserve,
		func(ctx workflow.Context, r Reservation) (Verdict, error) {
			if err := wait(ctx); err != nil {
				return Verdict{}, err
			}
			l.updates++
			v := answered(r, l.book.reserve(workflow.Now(ctx), r))
			if v.Decide == Reserved {
				if !v.Again {
					metrics.Counter("toolgate_ledger_reserved").Inc(1)
				}
			} else {
				metrics.WithTags(map[string]string{"decide": v.Decide}).Counter("toolgate_ledger_refused").Inc(1)
			}
			return v, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, r Reservation) error {
			if l.closing {
				return closingError()
			}
			if err := checkReservation(r); err != nil {
				return refused(err)
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSettle,
		func(ctx workflow.Context, s Settlement) (Settled, error) {
			if err := wait(ctx); err != nil {
				return Settled{}, err
			}
			l.updates++
			out := settledAs(s, l.book.settle(workflow.Now(ctx), s))
			switch {
			case out.Refused != "":
				workflow.GetLogger(ctx).Warn("toolgate ledger: "+out.Refused, "entry", out.Entry)
			case out.Found && s.Commit:
				metrics.Counter("toolgate_ledger_committed").Inc(1)
			case out.Found && !out.Committed:
				metrics.Counter("toolgate_ledger_released").Inc(1)
			}
			return out, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, s Settlement) error {
			switch {
			case l.closing:
				return closingError()
			case s.Key == "":
				return refused(errors.New("the settlement has no key"))
			case len(s.Key) > MaxKeyBytes:
				return refused(fmt.Errorf("the settlement's key is %d bytes, at most %d", len(s.Key), MaxKeyBytes))
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateLease,
		func(ctx workflow.Context, q LeaseRequest) (LeaseGrant, error) {
			if err := wait(ctx); err != nil {
				return LeaseGrant{}, err
			}
			l.updates++
			out := l.book.renew(workflow.Now(ctx), q)
			metrics.Counter("toolgate_ledger_leases").Inc(1)
			return out, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, q LeaseRequest) error {
			if l.closing {
				return closingError()
			}
			return refused(checkLease(q))
		}}); err != nil {
		return err
	}
	for _, u := range []struct {
		name  string
		pause bool
	}{{UpdatePause, true}, {UpdateUnpause, false}} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, sw Switch) (View, error) {
				if err := wait(ctx); err != nil {
					return View{}, err
				}
				l.updates++
				if err := l.toggle(ctx, u.pause, sw.Token); err != nil {
					return View{}, refused(err)
				}
				if u.pause {
					metrics.Counter("toolgate_ledger_paused").Inc(1)
				}
				return l.book.view(workflow.Now(ctx)), nil
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, sw Switch) error {
				if l.closing {
					return closingError()
				}
				if !l.ready { // the handler checks it all once the policy is loaded
					return refused(checkSize(u.pause, sw.Token))
				}
				if _, err := l.check(ctx, u.pause, sw.Token); err != nil {
					return refused(err)
				}
				return nil
			}}); err != nil {
			return err
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) {
		if !l.ready {
			return State{}, errors.New("the fleet ledger is loading: ask again")
		}
		return l.st, nil
	}); err != nil {
		return err
	}
	return workflow.SetQueryHandler(ctx, QueryGuards, func() (View, error) {
		if !l.ready {
			return View{}, errors.New("the fleet ledger is loading its policy: ask again")
		}
		return l.book.view(workflow.Now(ctx)), nil
	})
}
