package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.temporal.io/sdk/client"
	"gopkg.in/yaml.v3"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// demoSigners are the keys `toolgate demo --policy` holds: one per approver
// of the policy, made by the demo, so a newcomer sees roles and rules at work
// without making keys first.
type demoSigners struct {
	policy *policy.Policy
	dir    string
	keys   map[string]ed25519.PrivateKey
}

// loadDemoPolicy reads a policy file whose approvers may leave key empty:
// the demo gives each such approver a key pair under dir (NAME.key, reused on
// the next demo) and fills in the public key. `toolgate dev` and `toolgate
// worker` take no such file: there every approver brings their own key.
func loadDemoPolicy(path, dir string) (*demoSigners, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the policy: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ds := &demoSigners{dir: dir, keys: map[string]ed25519.PrivateKey{}}
	approvers := mappingValue(doc.Content, "approvers")
	if approvers == nil {
		return nil, fmt.Errorf("%s: no approvers", path)
	}
	for i := 0; i+1 < len(approvers.Content); i += 2 {
		name, entry := approvers.Content[i].Value, approvers.Content[i+1]
		key := mappingValue([]*yaml.Node{entry}, "key")
		if key == nil || key.Value != "" {
			continue // a key of the approver's own: the demo cannot sign for them
		}
		priv, err := ds.keyFor(name)
		if err != nil {
			return nil, err
		}
		key.Value = signed.FormatPublicKey(priv.Public().(ed25519.PublicKey))
		ds.keys[name] = priv
	}
	filled, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	if ds.policy, err = policy.Parse(filled); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ds, nil
}

// mappingValue is the value of key in the first mapping among nodes (a
// document node is looked into).
func mappingValue(nodes []*yaml.Node, key string) *yaml.Node {
	for _, n := range nodes {
		if n.Kind == yaml.DocumentNode {
			return mappingValue(n.Content, key)
		}
		if n.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return nil
}

// keyFor reads name's demo key, or makes it.
func (ds *demoSigners) keyFor(name string) (ed25519.PrivateKey, error) {
	file := ds.keyFile(name)
	priv, err := signed.ReadPrivateKey(file)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return priv, err
	}
	if _, priv, err = signed.GenerateKey(); err != nil {
		return nil, err
	}
	if err := signed.WritePrivateKey(file, priv); err != nil {
		return nil, err
	}
	// Its public key beside it, as `toolgate keys new` writes one: a
	// policy of one's own names it (docs/policy.md).
	pub := signed.FormatPublicKey(priv.Public().(ed25519.PublicKey))
	return priv, writePublicKey(filepath.Join(ds.dir, name+".pub"), pub)
}

func (ds *demoSigners) keyFile(name string) string { return filepath.Join(ds.dir, name+".key") }

// deciders are the demo's approvers who may decide it (the roles it needs),
// as many as it needs, in name order.
func (ds *demoSigners) deciders(it workflows.Interrupt) []string {
	names := make([]string, 0, len(ds.keys))
	for n := range ds.keys {
		names = append(names, n)
	}
	slices.Sort(names)
	need := policy.Approvers{Count: 1}
	if it.Needs != nil {
		need = *it.Needs
	}
	var out []string
	for _, n := range names {
		if len(out) < max(need.Count, 1) && ds.policy.Eligible(n, need) == nil && !slices.Contains(it.ApprovedBy, n) {
			out = append(out, n)
		}
	}
	return out
}

// decide signs and sends the demo approvers' decision on it.
func (c *cli) demoDecide(ctx context.Context, ds *demoSigners, cl client.Client, id string, approve bool, reason string, it workflows.Interrupt) error {
	names := ds.deciders(it)
	if len(names) == 0 {
		return fmt.Errorf("none of the demo's approvers may decide %s (%s): the policy names no key-less approver with the role it needs", it.CallID, it.Tool)
	}
	if !approve {
		names = names[:1] // one "no" is enough
	}
	tg := tgclient.New(cl)
	for _, name := range names {
		who := tgclient.Decider{Approver: name, Text: reason, Key: ds.keys[name]}
		decide := tg.Approve
		if !approve {
			decide = tg.Reject
		}
		outs, err := decide(ctx, id, who, it.CallID)
		if err != nil {
			return err
		}
		if outs[0].Err != nil {
			return fmt.Errorf("%s as %s: %w", it.CallID, name, outs[0].Err)
		}
		printDecision(c.stdout, outs[0].Result)
	}
	fmt.Fprintln(c.stdout)
	return nil
}
