package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// nexusSignStart is `toolgate nexus sign-start --run NAME --as APPROVER --key
// FILE`: the input of the run nexus-NAME signed by APPROVER (its
// request_token), printed as one line of JSON, for a Nexus caller to pass
// where the worker's policy wants a signed start: a call's start (a session
// run, planner external), or with --plan the run operation's input.
func (c *cli) nexusSignStart(args []string) error {
	fs := c.flags("nexus sign-start")
	name := fs.String("run", "", "the run's name as the Nexus caller gives it (the call's run, the run operation's id): the token binds the workflow id "+
		nexusserve.RunPrefix+"NAME (required)")
	as := fs.String("as", "", "the approver of the worker's policy who requests the run: it records them, and they may approve none of its calls (required)")
	keyFile := fs.String("key", "", "their private key file (toolgate keys new) (required)")
	goal := fs.String("goal", "", "the session run's goal (empty: \"Nexus session NAME\")")
	idle := fs.Duration("idle-timeout", nexusserve.DefaultIdleTimeout, "how long the session run waits for its next call before it ends")
	planFile := fs.String("plan", "", "sign this RunInput file instead (any planner; no --goal, no --idle-timeout): "+
		"the run operation's input is {\"id\": NAME, \"input\": what this prints}")
	validFor := fs.Duration("valid-for", tgclient.DefaultValidFor, fmt.Sprintf("how long the token is valid: the run must start within it; at most %s "+
		"(a run refuses a token valid for longer; a policy's max_token_lifetime may lower that)", signed.MaxLifetime))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case len(pos) > 0:
		return fmt.Errorf("nexus sign-start takes no arguments (got %.80q): the run's name goes after --run", pos[0])
	case *name == "" || *as == "" || *keyFile == "":
		return errors.New("nexus sign-start needs --run NAME, --as APPROVER and --key FILE: a signed start names its run and its requester, and proves who that is")
	case nexusserve.CheckRunName(*name) != nil:
		return fmt.Errorf("--run: %w (the name the Nexus caller gives)", nexusserve.CheckRunName(*name))
	case *validFor <= 0 || *validFor > signed.MaxLifetime:
		return fmt.Errorf("--valid-for %s: want more than 0 and at most %s (a run refuses a token valid for longer)", *validFor, signed.MaxLifetime)
	case *planFile != "" && (given["goal"] || given["idle-timeout"]):
		return errors.New("--plan FILE is the whole input: --goal and --idle-timeout go without it (set goal and idle_timeout in the file)")
	case *idle <= 0:
		return fmt.Errorf("--idle-timeout %s: want a positive duration", *idle)
	}
	in, err := nexusStartInput(*name, *goal, *idle, *planFile)
	if err != nil {
		return err
	}
	key, err := signed.ReadPrivateKey(*keyFile)
	if err != nil {
		return err
	}
	id := nexusserve.RunID(*name)
	if err := tgclient.SignStart(&in, id, *as, key, *validFor); err != nil {
		return err
	}
	raw, err := tgclient.CheckInput(in)
	if err != nil {
		return fmt.Errorf("the signed input: %w", err)
	}
	fmt.Fprintf(c.stdout, "%s\n", raw)
	use := "the call operation's start"
	if in.Planner.Kind != plan.KindExternal {
		use = "the run operation's input"
	}
	fmt.Fprintf(c.stderr, "signed by %s for run %s, valid until %s (%s): pass it as %s; it starts that run once\n",
		oneLine(*as), id, time.Now().Add(*validFor).Format(time.TimeOnly), *validFor, use)
	return nil
}

// nexusStartInput is the input sign-start signs: planFile's, or a session
// run's (planner external) with goal (empty: "Nexus session NAME") and the
// idle timeout.
func nexusStartInput(name, goal string, idle time.Duration, planFile string) (workflows.RunInput, error) {
	if planFile == "" {
		if goal == "" {
			goal = "Nexus session " + name
		}
		return workflows.RunInput{Goal: goal, Planner: plan.Config{Kind: plan.KindExternal}, IdleTimeout: workflows.Duration(idle)}, nil
	}
	return runInput(planFile, "", "") // a fork's input has no planner: refused
}
