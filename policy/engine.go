package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/toolgate/toolgate/internal/sorted"
)

// Engine is a compiled policy. It is used inside Temporal workflows, so it
// is deterministic: no clock, no randomness, no I/O, no goroutines, and no
// result or message depends on Go's map order. It is never modified after
// Compile, so one Engine may serve any number of calls concurrently.
type Engine struct {
	policy *Policy
	tools  map[string]compiledTool
	guards []cel.Program // each budget's amount (guards.go)
}

type compiledTool struct {
	rules []compiledRule
	need  Approvers // the tool's approvers, normalized
}

type compiledRule struct {
	rule Rule
	prg  cel.Program
}

// Verdict is the policy's answer for one call.
type Verdict struct {
	Rule    string    // id of the deciding rule; "" when no rule matched
	Decide  Decide    // allow | ask | deny
	Need    Approvers // for Ask: who may decide; Count >= 1 (zero for Allow and Deny)
	Shadows []Shadow  // shadow rules that held (or failed) before the deciding rule, in order
	Error   string    // set when a rule could not be evaluated: the verdict was reached by failing closed
	// FailedClosed: a rule could not be evaluated, so the verdict is the
	// strictest one any rule that could still apply gives (Evaluate). A grant
	// never answers such a verdict.
	FailedClosed bool
}

// Shadow is a shadow rule met by a call: what it would have decided. Error
// is set (and Decide is what the rule would decide had it held) when the
// rule could not be evaluated: a shadow rule is never enforced, not even by
// failing closed.
type Shadow struct {
	Rule   string
	Decide Decide
	Error  string
}

// Compile validates a policy and compiles every rule. The Engine keeps its
// own copy of the policy.
func Compile(p *Policy) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.clone()
	e := &Engine{policy: p, tools: make(map[string]compiledTool, len(p.Tools))}
	for _, name := range sorted.Keys(p.Tools) {
		t := p.Tools[name]
		ct := compiledTool{need: p.ToolApprovers(name)}
		for i, r := range t.Rules {
			prg, err := compileCEL(r.When)
			if err != nil {
				return nil, fmt.Errorf("tools.%s.rules[%d] (%s).when: %w", name, i, r.ID, err)
			}
			ct.rules = append(ct.rules, compiledRule{rule: r, prg: prg})
		}
		e.tools[name] = ct
	}
	guards, err := compileGuards(p)
	if err != nil {
		return nil, err
	}
	e.guards = guards
	return e, nil
}

// Policy returns the engine's policy. It is shared: do not modify it.
func (e *Engine) Policy() *Policy { return e.policy }

// Evaluate applies the tool's rules to one call; args is the call's JSON
// object. Rules are tried in order: the first non-shadow rule that holds
// decides; a shadow rule that holds is appended to Shadows and the next
// rule is tried. When no rule decides (or the policy does not name the
// tool), a destructive call is Ask with the tool's approvers (else any
// approver) and any other call is Allow, with Rule "". An Ask rule without
// approvers of its own uses the tool's (else any approver).
//
// Evaluate fails closed, to the strictest verdict still possible: when a
// (non-shadow) rule cannot be evaluated (args that are not a JSON object, a
// missing field read without has(), the cost limit...), it might hold or
// not, so every later rule is evaluated too, up to the first that surely
// holds (the rules after it can never decide this call). Of the verdicts
// that could then decide — each rule that could not be evaluated, the first
// rule that surely holds after them, or the tool's default when none does —
// the strictest is taken: a deny denies; else the ask with the largest
// quorum (the earliest of equals); and when every one of them would allow,
// the call is allowed (by the rule that surely holds, or the tool's default
// for a read, Rule ""). FailedClosed is set,
// Rule names the rule whose verdict was taken ("" for the tool's default),
// and Error says which rule could not be evaluated and why.
func (e *Engine) Evaluate(tool string, destructive bool, args []byte, requestedBy string) Verdict {
	return e.evaluate(tool, destructive, args, requestedBy, true)
}

// EvaluateFirstError is Evaluate as runs of rules version 4 and older took
// it: the first (non-shadow) rule that cannot be evaluated decides Ask with
// its own approvers (the tool's for an allow or deny rule), and no later
// rule is tried. It lowers the bar when a later rule would deny or ask for
// a quorum; it is kept only so those runs replay unchanged.
func (e *Engine) EvaluateFirstError(tool string, destructive bool, args []byte, requestedBy string) Verdict {
	return e.evaluate(tool, destructive, args, requestedBy, false)
}

// candidate is a verdict that could decide a call once a rule could not be
// evaluated.
type candidate struct {
	rule   string
	decide Decide
	need   Approvers
}

// strictness orders candidates: a deny above every ask, an ask by its
// quorum, an allow below both.
func (c candidate) strictness() int {
	switch c.decide {
	case Deny:
		return math.MaxInt
	case Ask:
		return c.need.Count
	}
	return -1
}

func (e *Engine) evaluate(tool string, destructive bool, args []byte, requestedBy string, strictest bool) Verdict {
	t, ok := e.tools[tool]
	if !ok {
		t = compiledTool{need: Approvers{Count: 1}}
	}
	var v Verdict
	var act activation
	var argsErr error
	var failed []candidate // set once a rule could not be evaluated
	for i, cr := range t.rules {
		r := cr.rule
		if i == 0 { // args are decoded once, and only when a rule reads them
			act, argsErr = newActivation(tool, args, requestedBy)
		}
		held, err := false, argsErr
		if err == nil {
			held, err = evalCEL(cr.prg, act)
		}
		switch {
		case err != nil && r.Shadow:
			v.Shadows = append(v.Shadows, Shadow{Rule: r.ID, Decide: r.Decide,
				Error: fmt.Sprintf("rule %s could not be evaluated: %v", r.ID, err)})
		case err != nil && !strictest:
			v.Rule, v.Decide, v.Need = r.ID, Ask, t.need.clone()
			if r.Decide == Ask {
				v.Need = t.ruleNeed(r)
			}
			v.Error = fmt.Sprintf("rule %s could not be evaluated (failing closed: ask): %v", r.ID, err)
			return v
		case err != nil:
			if failed == nil {
				v.Error = fmt.Sprintf("rule %s could not be evaluated: %v", r.ID, err)
			}
			failed = append(failed, candidate{r.ID, r.Decide, t.ruleNeed(r)})
		case !held:
		case r.Shadow:
			v.Shadows = append(v.Shadows, Shadow{Rule: r.ID, Decide: r.Decide})
		case failed != nil: // it decides if none of the failed rules held
			return failClosed(v, append(failed, candidate{r.ID, r.Decide, t.ruleNeed(r)}))
		default:
			v.Rule, v.Decide = r.ID, r.Decide
			if r.Decide == Ask {
				v.Need = t.ruleNeed(r)
			}
			return v
		}
	}
	if failed != nil {
		def := candidate{decide: Allow}
		if destructive {
			def = candidate{decide: Ask, need: t.need.clone()}
		}
		return failClosed(v, append(failed, def))
	}
	if destructive {
		v.Decide, v.Need = Ask, t.need.clone()
	} else {
		v.Decide = Allow
	}
	return v
}

// failClosed is the strictest of the verdicts that could decide a call a
// rule of which could not be evaluated: a deny; else the ask with the
// largest quorum (the earliest of equals); else — every one of them allows,
// so the call is allowed whichever holds — the last, the one that surely
// applies when the others do not (a rule that surely holds, or the tool's
// default).
func failClosed(v Verdict, could []candidate) Verdict {
	pick := -1
	for i, c := range could {
		if c.decide != Allow && (pick < 0 || c.strictness() > could[pick].strictness()) {
			pick = i
		}
	}
	if pick < 0 {
		pick = len(could) - 1
	}
	v.FailedClosed = true
	c := could[pick]
	v.Rule, v.Decide = c.rule, c.decide
	by := "the tool's default"
	if c.rule != "" {
		by = "rule " + c.rule
	}
	switch c.decide {
	case Deny:
		v.Error += "; failing closed to the strictest verdict a rule that could apply gives: " + by + " denies"
	case Ask:
		v.Need = c.need
		v.Error += "; failing closed to the strictest verdict a rule that could apply gives: " + by + " asks for " + v.Need.Describe()
	default:
		v.Error += "; every rule that could apply allows the call: " + by + " allows it"
	}
	return v
}

// Describe says who a call waits for: "2 distinct approvers with role finance".
func (n Approvers) Describe() string {
	who := "approver"
	if n.Count > 1 {
		who = "distinct approvers"
	}
	if len(n.Roles) == 0 {
		return fmt.Sprintf("%d %s", max(n.Count, 1), who)
	}
	return fmt.Sprintf("%d %s with role %s", max(n.Count, 1), who, strings.Join(n.Roles, " or "))
}

// ruleNeed is who may decide an Ask of rule r: its approvers, else the tool's.
func (t compiledTool) ruleNeed(r Rule) Approvers {
	if r.Approvers != nil {
		return r.Approvers.normalized()
	}
	return t.need.clone()
}

// Expr is a compiled standalone condition, such as a grant's
// "allow refund while args.amount_cents < 1000".
type Expr struct {
	src string
	prg cel.Program
}

// CompileExpr compiles a condition in the environment and limits of rules.
func (e *Engine) CompileExpr(src string) (*Expr, error) {
	prg, err := compileCEL(src)
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", cut(src, 80), err)
	}
	return &Expr{src: src, prg: prg}, nil
}

// String returns the condition's source.
func (x *Expr) String() string { return x.src }

// Match evaluates the condition on one call. An error (args that are not a
// JSON object, a missing field...) means the condition cannot be said to
// hold: callers must treat it as not matching.
func (x *Expr) Match(tool string, args []byte, requestedBy string) (bool, error) {
	act, err := newActivation(tool, args, requestedBy)
	if err != nil {
		return false, fmt.Errorf("condition %q: %w", cut(x.src, 80), err)
	}
	ok, err := evalCEL(x.prg, act)
	if err != nil {
		return false, fmt.Errorf("condition %q: %w", cut(x.src, 80), err)
	}
	return ok, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (a Approvers) normalized() Approvers {
	a = a.clone()
	if a.Count < 1 {
		a.Count = 1
	}
	return a
}

func (a Approvers) clone() Approvers {
	a.Roles = slices.Clone(a.Roles)
	return a
}

// clone is a deep copy of the policy.
func (p *Policy) clone() *Policy {
	c := &Policy{Approvers: make(map[string]Approver, len(p.Approvers)),
		RequireSignedStart: p.RequireSignedStart, MaxTokenLifetime: p.MaxTokenLifetime, Operators: slices.Clone(p.Operators), ViaKey: p.ViaKey}
	//workflowcheck:ignore (copies into another map: order does not matter)
	for name, a := range p.Approvers {
		a.Roles, a.Via = slices.Clone(a.Roles), slices.Clone(a.Via)
		c.Approvers[name] = a
	}
	if p.Tools != nil {
		c.Tools = make(map[string]Tool, len(p.Tools))
	}
	//workflowcheck:ignore (copies into another map: order does not matter)
	for name, t := range p.Tools {
		if t.Approvers != nil {
			a := t.Approvers.clone()
			t.Approvers = &a
		}
		rules := make([]Rule, len(t.Rules))
		for i, r := range t.Rules {
			if r.Approvers != nil {
				a := r.Approvers.clone()
				r.Approvers = &a
			}
			rules[i] = r
		}
		if t.Rules == nil {
			rules = nil
		}
		t.Rules = rules
		c.Tools[name] = t
	}
	for _, g := range p.Guards {
		g.Tools = slices.Clone(g.Tools)
		if g.Approvers != nil {
			a := g.Approvers.clone()
			g.Approvers = &a
		}
		c.Guards = append(c.Guards, g)
	}
	return c
}
