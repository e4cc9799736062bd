package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/confirm"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// replies is what an inbox listener answers notifications with: the
// links' confirm page and Slack's interactivity endpoint (package confirm),
// from the workers' notify file and policy.
type replies struct {
	notify *notify.Config
	policy *policy.Policy
	// viaKey signs the decisions approvers make by link (--via-key; the
	// policy's via_key is its public key): the listener's alone.
	viaKey ed25519.PrivateKey
	// only: serve the confirm page and the Slack endpoint alone, not the
	// inbox (`toolgate inbox --replies-only`: a listener the internet reaches).
	only bool
}

// around is h with the confirm page and the Slack endpoint beside it (rp
// nil: h alone).
func (rp *replies) around(h http.Handler, cl *tgclient.Client, hosts []string) http.Handler {
	if rp == nil {
		return h
	}
	cf := confirm.New(cl, confirm.Options{Notify: rp.notify, Policy: rp.policy, ViaKey: rp.viaKey, Hosts: hosts})
	paths := confirm.Paths() // every other path is the inbox's
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case slices.Contains(paths, r.URL.Path):
			cf.ServeHTTP(w, r)
		case rp.only:
			http.Error(w, "this listener serves only the links' confirm page (/confirm) and Slack's interactivity endpoint (/slack/interactions): the inbox is not served here (--replies-only)", http.StatusNotFound)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// say tells where links and Slack clicks are answered.
func (rp *replies) say(w io.Writer, inboxURL string) {
	if rp == nil {
		return
	}
	base := strings.TrimRight(inboxURL, "/")
	slack := "refused: no Slack target has a signing_secret"
	if len(rp.notify.SlackSigningSecrets()) > 0 {
		slack = base + "/slack/interactions"
	}
	linkBase := rp.notify.LinkBase
	if linkBase == "" {
		linkBase = "none: notifications carry no link"
	}
	fmt.Fprintf(w, "notification links answered at %s/confirm (link_base: %s); Slack clicks: %s\n", base, linkBase, slack)
}

// loadReplies loads `toolgate inbox`'s --notify and --policy files (nil
// without --notify).
func loadReplies(notifyFile, policyFile, viaKeyFile string, only bool, stderr io.Writer) (*replies, error) {
	if notifyFile == "" {
		switch {
		case policyFile != "":
			return nil, fmt.Errorf("--policy goes with --notify: the inbox needs the policy only to answer notifications")
		case only:
			return nil, fmt.Errorf("--replies-only goes with --notify: without it there is nothing to serve")
		case viaKeyFile != "":
			return nil, fmt.Errorf("--via-key goes with --notify and --policy")
		}
		return nil, nil
	}
	n, err := notify.Load(notifyFile)
	if err != nil {
		return nil, err
	}
	rp := &replies{notify: n, only: only}
	if policyFile != "" {
		if rp.policy, err = policy.Load(policyFile); err != nil {
			return nil, err
		}
		warnPolicy(stderr, policyFile, rp.policy)
	}
	if rp.viaKey, err = loadViaKey(viaKeyFile, n, rp.policy); err != nil {
		return nil, err
	}
	return rp, nil
}

// loadViaKey reads --via-key (nil without one): the key that signs
// decisions by link, which must not be the link key the workers hold and
// should be the policy's via_key.
func loadViaKey(file string, n *notify.Config, pol *policy.Policy) (ed25519.PrivateKey, error) {
	if file == "" {
		return nil, nil
	}
	if pol == nil {
		return nil, errors.New("--via-key goes with --policy: decisions by link exist only under a policy (its via_key and its approvers' via)")
	}
	k, err := signed.ReadPrivateKey(file)
	if err != nil {
		return nil, fmt.Errorf("--via-key: %w", err)
	}
	if lk := n.LinkKey(); lk != nil && lk.Equal(k) {
		return nil, errors.New("--via-key is notify's link key: the workers hold that one, and a key they hold must not sign decisions as approvers; make one for this listener alone (toolgate keys new via)")
	}
	if pub, ok := pol.ViaPublicKey(); !ok || !pub.Equal(k.Public()) {
		return nil, fmt.Errorf("--via-key is not the policy's via_key (%s): set via_key to %s, or no decision by link will count", orUnset(pol.ViaKey), signed.FormatPublicKey(k.Public().(ed25519.PublicKey)))
	}
	return k, nil
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// notifierOf is the worker's notifier over a --notify file (nil: none),
// with the end-to-end suite's fault injection when built with it.
func notifierOf(c *notify.Config) worker.Notifier {
	if c == nil {
		return nil
	}
	var n worker.Notifier = notify.NewSender(c)
	if hook := faultBeforeNotify(); hook != nil {
		n = faultyNotifier{n, hook}
	}
	return n
}

// faultyNotifier calls hook with each delivery's target before delivering.
type faultyNotifier struct {
	worker.Notifier
	hook func(target string)
}

func (f faultyNotifier) Deliver(ctx context.Context, n workflows.Notification) (workflows.Delivery, error) {
	f.hook(n.Target)
	return f.Notifier.Deliver(ctx, n)
}
