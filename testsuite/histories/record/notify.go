package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The notified flow (rules version 8; _v9 since) runs under fixturePolicy
// with a via_key and alice reached by e-mail and Slack, who may decide
// through them (via): the worker notifies two webhooks — ops, a receiver
// here that answers 200, and down, one that answers 500 — and (from _v9) a
// Slack incoming webhook here, team; alice approves c-2 by link, her
// decision signed with the listener's via key as the confirm page signs it.
// From rules version 9 a decision by link carries the secret of a link the
// run sent: alice's click carries the Slack message's, as the listener's
// Slack handler sends it (notified_v8 was recorded deciding by e-mail with
// no link, before links had secrets).

// notifyFlow is the notified flow.
func notifyFlow() flow {
	return flow{
		name:   "notified",
		in:     workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("closed TKT-3", rewindSteps...)},
		policy: true,
		notify: true,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			it, err := waitPending(ctx, cl, id, "c-2", workflows.KindGate)
			if err != nil {
				return err
			}
			secret, err := s.slack.secret(ctx, s.linkKey)
			if err != nil {
				return err
			}
			now := time.Now()
			tok, err := signed.Sign(s.keys[linkSigner], signed.Claims{Approver: "alice", WorkflowID: id, Action: signed.ActionApprove,
				CallID: it.CallID, ArgsDigest: it.ArgsDigest, Kind: string(it.Kind), Asked: it.RequestedAt.UnixNano(), Via: policy.ViaSlack,
				Link: secret, Note: "approved by link", IssuedAt: now.Unix(), Expiry: now.Add(5 * time.Minute).Unix()})
			if err != nil {
				return err
			}
			res, err := tgclient.New(cl).Decide(ctx, id, true, workflows.DecisionInput{CallID: it.CallID, ArgsDigest: it.ArgsDigest,
				Kind: it.Kind, Via: policy.ViaSlack, Token: tok})
			return wantDecision(res, err, workflows.TraceApproved)
		},
		status: workflows.StatusCompleted,
		trace: []string{"c-1 ok", "c-2 blocked", "c-2 notified", "c-2 notified", "c-2 notify_failed", "c-2 approved", "c-2 ok",
			"c-2 notified"},
		unordered: true, // deliveries are recorded as they finish
		approvers: []string{"alice"},
	}
}

// linkSigner is the key name the via key (the listener's, which signs
// decisions by link) has in signers.keys.
const linkSigner = "via-signer"

// notifyWorker sets up the notified flow's worker: the via key in s and s's
// policy, the two receivers (stopped by the returned func), and the
// notifier over them, with a link key of its own.
func notifyWorker(dir string, s *signers, opts *worker.Options) (func(), error) {
	viaPub, viaPriv, err := signed.GenerateKey()
	if err != nil {
		return nil, err
	}
	s.keys[linkSigner] = viaPriv
	s.policy.ViaKey = signed.FormatPublicKey(viaPub)
	_, priv, err := signed.GenerateKey()
	if err != nil {
		return nil, err
	}
	alice := s.policy.Approvers["alice"]
	alice.Email, alice.Slack, alice.Via = "alice@example.com", "U0ALICE", []string{policy.ViaEmail, policy.ViaSlack}
	s.policy.Approvers["alice"] = alice
	if err := s.policy.Validate(); err != nil {
		return nil, err
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	s.slack = &slackFake{got: make(chan []byte, 4)}
	team := httptest.NewServer(s.slack)
	stop := func() { ok.Close(); down.Close(); team.Close() }
	s.linkKey = priv
	keyFile := filepath.Join(dir, "link.key")
	if err := signed.WritePrivateKey(keyFile, priv); err != nil {
		stop()
		return nil, err
	}
	cfg, err := notify.Parse(fmt.Appendf(nil, `
targets:
  - {name: ops, webhook: "%s/hook", secret: fixture-secret, events: [waiting, decided]}
  - {name: down, webhook: "%s/hook", secret: fixture-secret, events: [waiting]}
  - {name: team, slack: "%s/incoming", signing_secret: fixture-signing-secret, events: [waiting]}
link_base: "http://127.0.0.1:8080"
link_key_file: "%s"
`, ok.URL, down.URL, team.URL, keyFile), func(string) (string, bool) { return "", false })
	if err != nil {
		stop()
		return nil, err
	}
	cfg.SetLinkKey(priv)
	opts.Notify = notify.NewSender(cfg)
	return stop, nil
}

// slackFake is a Slack incoming webhook: it keeps each message posted.
type slackFake struct{ got chan []byte }

func (f *slackFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	select {
	case f.got <- b:
	default:
	}
}

// secret waits for the first message posted and returns the secret of the
// link its Approve button carries, as the listener reads it from a click.
func (f *slackFake) secret(ctx context.Context, key ed25519.PrivateKey) (string, error) {
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("no Slack message: %w", ctx.Err())
	case b := <-f.got:
		var msg struct {
			Blocks []struct {
				Elements []struct {
					ActionID string `json:"action_id"`
					Value    string `json:"value"`
				} `json:"elements"`
			} `json:"blocks"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			return "", err
		}
		for _, bl := range msg.Blocks {
			for _, e := range bl.Elements {
				if e.ActionID != notify.SlackActionApprove {
					continue
				}
				l, err := notify.VerifyLink(key.Public().(ed25519.PublicKey), e.Value, time.Now())
				if err != nil {
					return "", err
				}
				return l.Secret, nil
			}
		}
		return "", fmt.Errorf("the Slack message has no Approve button: %s", b)
	}
}
