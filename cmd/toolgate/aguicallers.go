package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/agui"
	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// aguiCallers are the AG-UI endpoint's callers: the bearer tokens of a
// tokens file (`toolgate mcp token new NAME [--key NAME.key] --tokens FILE`,
// the file MCP clients use too), each with its key file's key. Under pol
// (the worker's policy, nil: none) a caller with a key must be an approver
// of it with that key, or every start of theirs would be refused by the run.
func aguiCallers(tokensFile string, pol *policy.Policy) (func(string) (agui.Caller, bool), error) {
	if tokensFile == "" {
		return nil, nil
	}
	toks, err := mcpserve.LoadTokens(tokensFile)
	if err != nil {
		return nil, fmt.Errorf("AG-UI callers: %w", err)
	}
	keys := map[string]ed25519.PrivateKey{}
	for _, e := range toks.Entries() {
		if e.KeyFile == "" {
			continue
		}
		key, err := signed.ReadPrivateKey(e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("AG-UI callers: token %s's key_file: %w", e.Name, err)
		}
		if pol != nil {
			if err := sameKey(pol, e.Name, key); err != nil {
				return nil, fmt.Errorf("AG-UI callers: token %s of %s: %w", e.Name, tokensFile, err)
			}
		}
		keys[e.Name] = key
	}
	return func(token string) (agui.Caller, bool) {
		e, ok := toks.Lookup(token)
		if !ok {
			return agui.Caller{}, false
		}
		return agui.Caller{Name: e.Name, Key: keys[e.Name]}, true
	}, nil
}

// sameKey says what is wrong if key is not approver name's key in pol.
func sameKey(pol *policy.Policy, name string, key ed25519.PrivateKey) error {
	a, ok := pol.Approvers[name]
	if !ok {
		return fmt.Errorf("the policy names no approver %s, so the runs it starts would be refused (give the token the name of one of its approvers)", name)
	}
	pub, err := signed.ParsePublicKey(a.Key)
	if err != nil {
		return fmt.Errorf("the policy's key of %s: %w", name, err)
	}
	if !bytes.Equal(pub, key.Public().(ed25519.PublicKey)) {
		return fmt.Errorf("its key_file is not the key the policy gives %s, so the runs it starts would be refused", name)
	}
	return nil
}

// warnAGUIPolicy says, under a policy, who may start threads.
func warnAGUIPolicy(w io.Writer, policy bool, callers func(string) (agui.Caller, bool)) {
	if policy && callers == nil {
		fmt.Fprintln(w, "WARNING: AG-UI: the worker has an approval policy and the endpoint has no callers (bearer tokens with keys): it refuses to start threads, "+
			"since their runs would have no verified requester; give it --agui-tokens FILE (`toolgate mcp token new NAME --key NAME.key --tokens FILE`)")
	}
}
