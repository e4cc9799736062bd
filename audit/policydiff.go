package audit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policy"
)

// This file compares the policy a run recorded with one kept apart (the
// file `toolgate audit --policy` is given): a run whose recorded policy is
// not the given one was not held to it, whatever its signatures say — its
// first workflow task could have been answered by someone else's worker,
// which recorded a policy of its own.

// policyDiff says how the policy a run recorded differs from the given one:
// one line per difference, none when they are the same (as JSON, the form
// a worker records and compares them in). A run that recorded no policy
// differs from any given one.
func policyDiff(recorded, given *policy.Policy) []string {
	if given == nil {
		return nil
	}
	if recorded == nil {
		return []string{"the run recorded no policy: it was held to none (its decisions were unauthenticated)"}
	}
	if same(recorded, given) {
		return nil
	}
	var out []string
	for _, name := range sortedKeys(recorded.Approvers, given.Approvers) {
		r, inR := recorded.Approvers[name]
		g, inG := given.Approvers[name]
		switch {
		case !inG:
			out = append(out, fmt.Sprintf("approver %q is in the recorded policy only", name))
		case !inR:
			out = append(out, fmt.Sprintf("approver %q is in the given policy only", name))
		case r.Key != g.Key:
			out = append(out, fmt.Sprintf("approver %q has another key in the recorded policy (%s, given %s)", name, clipKey(r.Key), clipKey(g.Key)))
		case !same(r, g):
			out = append(out, fmt.Sprintf("approver %q has other roles, channels or addresses in the recorded policy", name))
		}
	}
	for _, name := range sortedKeys(recorded.Tools, given.Tools) {
		r, inR := recorded.Tools[name]
		g, inG := given.Tools[name]
		switch {
		case !inG:
			out = append(out, fmt.Sprintf("tool %q has rules or approvers in the recorded policy only", name))
		case !inR:
			out = append(out, fmt.Sprintf("tool %q has rules or approvers in the given policy only", name))
		case !same(r, g):
			out = append(out, fmt.Sprintf("tool %q has other rules or approvers in the recorded policy", name))
		}
	}
	for _, f := range []struct {
		name string
		r, g any
	}{
		{"require_signed_start", recorded.RequireSignedStart, given.RequireSignedStart},
		{"max_token_lifetime", recorded.MaxTokenLifetime, given.MaxTokenLifetime},
		{"operators", recorded.Operators, given.Operators},
		{"via_key", recorded.ViaKey, given.ViaKey},
		{"guards", recorded.Guards, given.Guards},
	} {
		if !same(f.r, f.g) {
			out = append(out, fmt.Sprintf("%s differs", f.name))
		}
	}
	if len(out) == 0 { // the same fields, encoded otherwise
		out = append(out, "the recorded policy is not the given one")
	}
	return out
}

// same says whether a and b encode to the same JSON.
func same(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// sortedKeys are the keys of both maps, sorted.
func sortedKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// clipKey is a public key as a message shows it: "ed25519:AbCdEfGh…".
func clipKey(k string) string {
	if len(k) > 20 {
		return k[:20] + "…"
	}
	return strings.TrimSpace(k)
}
