package policy

import (
	"fmt"
	"slices"

	"github.com/google/cel-go/cel"
)

// Engine is a compiled policy. It is used inside Temporal workflows, so it
// is deterministic: no clock, no randomness, no I/O, no goroutines, and no
// result or message depends on Go's map order. It is never modified after
// Compile, so one Engine may serve any number of calls concurrently.
type Engine struct {
	policy *Policy
	tools  map[string]compiledTool
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
	Error   string    // set when a rule could not be evaluated: the verdict is then Ask
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
	for _, name := range sortedKeys(p.Tools) {
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
// Evaluate fails closed: when a (non-shadow) rule cannot be evaluated (args
// that are not a JSON object, a missing field read without has(), the cost
// limit...), the verdict is Ask, Rule is that rule's id, Need is that rule's
// approvers (the tool's for an allow or deny rule), and Error says what
// failed; no later rule is tried.
func (e *Engine) Evaluate(tool string, destructive bool, args []byte, requestedBy string) Verdict {
	t, ok := e.tools[tool]
	if !ok {
		t = compiledTool{need: Approvers{Count: 1}}
	}
	var v Verdict
	var act activation
	var argsErr error
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
		case err != nil:
			v.Rule, v.Decide, v.Need = r.ID, Ask, t.need.clone()
			if r.Decide == Ask {
				v.Need = t.ruleNeed(r)
			}
			v.Error = fmt.Sprintf("rule %s could not be evaluated (failing closed: ask): %v", r.ID, err)
			return v
		case !held:
		case r.Shadow:
			v.Shadows = append(v.Shadows, Shadow{Rule: r.ID, Decide: r.Decide})
		default:
			v.Rule, v.Decide = r.ID, r.Decide
			if r.Decide == Ask {
				v.Need = t.ruleNeed(r)
			}
			return v
		}
	}
	if destructive {
		v.Decide, v.Need = Ask, t.need.clone()
	} else {
		v.Decide = Allow
	}
	return v
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
	c := &Policy{Approvers: make(map[string]Approver, len(p.Approvers))}
	//workflowcheck:ignore (copies into another map: order does not matter)
	for name, a := range p.Approvers {
		a.Roles = slices.Clone(a.Roles)
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
	return c
}
