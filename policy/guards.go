package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// GuardKind is what a guard counts.
type GuardKind string

// The kinds of guard.
const (
	// GuardBudget sums a CEL amount (Guard.Amount) over the calls it covers.
	GuardBudget GuardKind = "budget"
	// GuardRate counts the calls it covers.
	GuardRate GuardKind = "rate"
	// GuardRepeat counts proposals of the same call (tool and arguments'
	// digest): a looping agent is stopped at the limit.
	GuardRepeat GuardKind = "repeat"
)

// What a guard counts each call toward (Guard.Per).
const (
	PerAll       = "all"       // every run of the task queue together
	PerTool      = "tool"      // each tool apart
	PerRequester = "requester" // each run's verified requester apart
	PerRun       = "run"       // each run chain apart
)

// Bounds on guards.
const (
	MaxGuards      = 64
	MinGuardWindow = time.Second
	MaxGuardWindow = 7 * 24 * time.Hour
	MaxGuardLimit  = 1_000_000_000_000_000 // 1e15: a budget's limit and any amount
	MaxGuardReason = 500                   // bytes of a guard's reason
)

// Guard is a limit kept across every run of a worker's task queue, in the
// fleet ledger (package ledger), not in any one run: no run, rewind or
// restart rolls it back. Past its limit within its window, a call it
// covers is denied (the planner is told Reason) or, with Exceed ask, waits
// for Approvers.
type Guard struct {
	ID   string    `json:"id" yaml:"id"`
	Kind GuardKind `json:"kind" yaml:"kind"`
	// Tools are the tools it covers; none: every destructive tool.
	Tools []string `json:"tools,omitempty" yaml:"tools"`
	// Amount (budget) is a CEL expression over args, requested_by and tool
	// giving the call's amount: a whole number from 0 to MaxGuardLimit.
	Amount string `json:"amount,omitempty" yaml:"amount"`
	// Limit: the most a budget's amounts may sum to, or calls a rate (or the
	// same call a repeat) may count, within Window.
	Limit int64 `json:"limit" yaml:"limit"`
	// Window ("1h") is how far back the ledger counts.
	Window string `json:"window" yaml:"window"`
	// Per (all, tool, requester, run; default all) is what each count is
	// kept for.
	Per string `json:"per,omitempty" yaml:"per"`
	// Exceed (deny, the default, or ask) is what happens past the limit.
	Exceed    Decide     `json:"exceed,omitempty" yaml:"exceed"`
	Approvers *Approvers `json:"approvers,omitempty" yaml:"approvers"`
	// Reason is told to the planner and the approvers past the limit.
	Reason string `json:"reason,omitempty" yaml:"reason"`
}

// Covers reports whether g counts calls of tool (destructive tells whether
// the tool is registered so).
func (g Guard) Covers(tool string, destructive bool) bool {
	if len(g.Tools) == 0 {
		return destructive
	}
	return slices.Contains(g.Tools, tool)
}

// WindowDuration is g's window (0 when it does not parse: Validate refuses it).
func (g Guard) WindowDuration() time.Duration {
	d, err := time.ParseDuration(g.Window)
	if err != nil {
		return 0
	}
	return d
}

// PerOrAll is g.Per, "all" when empty.
func (g Guard) PerOrAll() string {
	if g.Per == "" {
		return PerAll
	}
	return g.Per
}

// ExceedOrDeny is g.Exceed, deny when empty.
func (g Guard) ExceedOrDeny() Decide {
	if g.Exceed == "" {
		return Deny
	}
	return g.Exceed
}

// GuardNeed is who may let a call past g (Exceed ask): g's approvers, else
// the tool's.
func (p *Policy) GuardNeed(g Guard, tool string) Approvers {
	if g.Approvers != nil {
		return g.Approvers.normalized()
	}
	return p.ToolApprovers(tool)
}

// HasLedger reports whether runs under p consult the fleet ledger: p has
// guards, or operators (who may pause a tool fleet-wide).
func (p *Policy) HasLedger() bool {
	return p != nil && (len(p.Guards) > 0 || len(p.Operators) > 0)
}

// Guarded reports whether a call of tool consults the fleet ledger under
// p: a guard covers it, or it is destructive and p has operators (a pause
// may stop it).
func (p *Policy) Guarded(tool string, destructive bool) bool {
	if p == nil {
		return false
	}
	if destructive && len(p.Operators) > 0 {
		return true
	}
	for _, g := range p.Guards {
		if g.Covers(tool, destructive) {
			return true
		}
	}
	return false
}

// validateGuards checks p.Guards; errors name their place ("guards[1].window").
func (p *Policy) validateGuards(fail func(place, format string, a ...any)) {
	if n := len(p.Guards); n > MaxGuards {
		fail("guards", "%d declared, at most %d", n, MaxGuards)
	}
	seen := map[string]string{}
	for i, g := range p.Guards {
		place := fmt.Sprintf("guards[%d]", i)
		switch {
		case g.ID == "":
			fail(place+".id", "missing; every guard needs an id (its refusals name it)")
		case !nameRE.MatchString(g.ID):
			fail(place+".id", "%q must match %s", g.ID, nameRE)
		case seen[g.ID] != "":
			fail(place+".id", "%q is also the id of %s; guard ids are unique", g.ID, seen[g.ID])
		default:
			seen[g.ID] = place
		}
		switch g.Kind {
		case GuardBudget:
			if g.Amount == "" {
				fail(place+".amount", "missing; a budget sums an amount (e.g. \"args.amount_cents\")")
			} else if _, err := compileAmount(g.Amount); err != nil {
				fail(place+".amount", "%v", err)
			}
		case GuardRate, GuardRepeat:
			if g.Amount != "" {
				fail(place+".amount", "only a budget has an amount (this guard is a %s: it counts calls)", g.Kind)
			}
		case "":
			fail(place+".kind", "missing; want budget, rate or repeat")
		default:
			fail(place+".kind", "%q, want budget, rate or repeat", g.Kind)
		}
		if g.Limit < 1 || g.Limit > MaxGuardLimit {
			fail(place+".limit", "%d, want from 1 to %d", g.Limit, int64(MaxGuardLimit))
		}
		if d, err := time.ParseDuration(g.Window); err != nil || d < MinGuardWindow || d > MaxGuardWindow {
			fail(place+".window", "%q: want a duration such as \"1h\", from %s to %s", g.Window, MinGuardWindow, MaxGuardWindow)
		}
		switch g.Per {
		case "", PerAll, PerTool, PerRequester, PerRun:
		default:
			fail(place+".per", "%q, want all, tool, requester or run", g.Per)
		}
		switch g.Exceed {
		case "", Deny:
			if g.Approvers != nil {
				fail(place+".approvers", "only a guard whose exceed is ask names approvers")
			}
		case Ask:
			if g.Approvers != nil {
				p.checkApprovers(place+".approvers", *g.Approvers, fail)
			}
		default:
			fail(place+".exceed", "%q, want deny or ask", g.Exceed)
		}
		if len(g.Tools) > MaxTools {
			fail(place+".tools", "%d tools, at most %d", len(g.Tools), MaxTools)
		}
		for j, t := range g.Tools {
			if strings.TrimSpace(t) == "" {
				fail(fmt.Sprintf("%s.tools[%d]", place, j), "a tool name must not be empty")
			}
		}
		if len(g.Reason) > MaxGuardReason {
			fail(place+".reason", "%d bytes, at most %d", len(g.Reason), MaxGuardReason)
		}
	}
}

// guardTools are the tools p's guards name, for CheckTools.
func (p *Policy) guardTools() []string {
	var out []string
	for _, g := range p.Guards {
		for _, t := range g.Tools {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// compileAmount compiles a budget's amount expression: a number (int, uint,
// double or dyn, checked when it runs).
func compileAmount(src string) (cel.Program, error) {
	return compileTyped(src, "a number", cel.IntType, cel.UintType, cel.DoubleType, cel.DynType)
}

// Guards returns the policy's guards. They are shared: do not modify them.
func (e *Engine) Guards() []Guard { return e.policy.Guards }

// GuardAmount is what a call counts toward guard i (an index of Guards): 1
// for a rate or repeat, the amount expression's value for a budget. It
// fails closed: an amount that cannot be evaluated, or is negative,
// fractional or over MaxGuardLimit, is an error, and the ledger refuses the
// call.
func (e *Engine) GuardAmount(i int, tool string, args []byte, requestedBy string) (int64, error) {
	if i < 0 || i >= len(e.guards) {
		return 0, fmt.Errorf("no guard %d", i)
	}
	g := e.policy.Guards[i]
	if g.Kind != GuardBudget {
		return 1, nil
	}
	act, err := newActivation(tool, args, requestedBy)
	if err != nil {
		return 0, fmt.Errorf("guard %s: %w", g.ID, err)
	}
	out, _, err := e.guards[i].Eval(map[string]any(act))
	if err != nil {
		return 0, fmt.Errorf("guard %s: amount %q: %w", g.ID, g.Amount, err)
	}
	var f float64
	switch v := out.(type) {
	case types.Int:
		f = float64(v)
	case types.Uint:
		f = float64(v)
	case types.Double:
		f = float64(v)
	default:
		return 0, fmt.Errorf("guard %s: amount %q is of type %s, want a number", g.ID, g.Amount, out.Type().TypeName())
	}
	switch {
	case math.IsNaN(f) || f < 0:
		return 0, fmt.Errorf("guard %s: amount %q is %v: an amount is never negative", g.ID, g.Amount, f)
	case f != math.Trunc(f):
		return 0, fmt.Errorf("guard %s: amount %q is %v: want a whole number (count in cents)", g.ID, g.Amount, f)
	case f > MaxGuardLimit:
		return 0, fmt.Errorf("guard %s: amount %q is %v, over %d", g.ID, g.Amount, f, int64(MaxGuardLimit))
	}
	return int64(f), nil
}

// compileGuards compiles each budget's amount (nil for other kinds).
func compileGuards(p *Policy) ([]cel.Program, error) {
	out := make([]cel.Program, len(p.Guards))
	for i, g := range p.Guards {
		if g.Kind != GuardBudget {
			continue
		}
		prg, err := compileAmount(g.Amount)
		if err != nil {
			return nil, fmt.Errorf("guards[%d] (%s).amount: %w", i, g.ID, err)
		}
		out[i] = prg
	}
	return out, nil
}
