package confirm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/workflows"
)

// SlackMaxSkew is how far a Slack request's timestamp may be from the clock.
const SlackMaxSkew = 5 * time.Minute

// interaction is the part of a Slack block_actions payload the handler reads.
type interaction struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"user"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
		ActionTS string `json:"action_ts"`
	} `json:"actions"`
	ResponseURL string `json:"response_url"`
}

// slack is POST /slack/interactions: a click on a Slack message's button.
// Slack's signature is checked before anything else; an Approve or Reject
// click then decides as the clicker, and the message is updated through the
// click's response_url.
func (h *Handler) slack(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the request (at most %d bytes): %v", MaxBodyBytes, err), http.StatusRequestEntityTooLarge)
		return
	}
	if err := h.verifySlack(r.Header, body); err != nil {
		http.Error(w, "refused: "+err.Error()+"; nothing was decided", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	var in interaction
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &in)
	}
	if err != nil {
		http.Error(w, "not a Slack interaction payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	if in.Type != "block_actions" || len(in.Actions) == 0 {
		w.WriteHeader(http.StatusOK) // nothing a toolgate button sends
		return
	}
	a := in.Actions[0]
	if a.ActionID != notify.SlackActionApprove && a.ActionID != notify.SlackActionReject {
		w.WriteHeader(http.StatusOK) // the Open button, or another app's
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), SlackDecideTimeout)
	msg := h.slackDecide(ctx, in, a.Value, a.ActionTS, a.ActionID == notify.SlackActionApprove)
	cancel()
	w.WriteHeader(http.StatusOK)
	h.reply(in.ResponseURL, msg)
}

// verifySlack checks Slack's signature of a request: a timestamp within
// SlackMaxSkew and "v0=" + HMAC-SHA256 of "v0:TS:BODY" under one of the
// configured signing secrets. With none configured, every request fails.
func (h *Handler) verifySlack(hd http.Header, body []byte) error {
	var secrets []string
	if h.opts.Notify != nil {
		secrets = h.opts.Notify.SlackSigningSecrets()
	}
	if len(secrets) == 0 {
		return errors.New("no Slack signing secret is configured (notify's signing_secret), so every click is refused")
	}
	ts, sig := hd.Get("X-Slack-Request-Timestamp"), hd.Get("X-Slack-Signature")
	if ts == "" || sig == "" {
		return errors.New("no X-Slack-Request-Timestamp or X-Slack-Signature header: not a request Slack signed")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("X-Slack-Request-Timestamp %s: not unix seconds", quote(ts))
	}
	if d := h.opts.Now().Sub(time.Unix(n, 0)); d > SlackMaxSkew || d < -SlackMaxSkew {
		return fmt.Errorf("X-Slack-Request-Timestamp is %s off this server's clock (at most %s): a replayed or delayed request", d.Round(time.Second), SlackMaxSkew)
	}
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write([]byte("v0:" + ts + ":"))
		mac.Write(body)
		if hmac.Equal([]byte("v0="+hex.EncodeToString(mac.Sum(nil))), []byte(sig)) {
			return nil
		}
	}
	return errors.New("bad X-Slack-Signature: the request is not signed with a configured Slack app's signing secret")
}

// slackDecide decides a click's call as the clicker and says what to post.
func (h *Handler) slackDecide(ctx context.Context, in interaction, value, actionTS string, approve bool) slackReply {
	l, ref := h.verifyLink(value)
	if ref == nil && l.Channel != notify.ViaSlack {
		ref = refuse(http.StatusBadRequest, "the button's link was sent by %s, not Slack", l.Channel)
	}
	if ref != nil {
		return ephemeral(ref.msg)
	}
	f, ref := h.find(ctx, value, l)
	if ref != nil {
		return ephemeral(ref.msg)
	}
	dec := workflows.DecisionInput{CallID: f.it.CallID, ArgsDigest: f.it.ArgsDigest, Kind: f.it.Kind, Via: notify.ViaSlack}
	var by string
	if f.state.Policy {
		if h.opts.Policy == nil {
			return ephemeral("refused: " + h.mayClick("", notify.ViaSlack).Error())
		}
		name, ok := h.opts.Policy.BySlack(in.User.ID)
		if !ok {
			return ephemeral(fmt.Sprintf("refused: Slack user %s is not an approver of this deployment's policy (none has slack: %s), so the click decides nothing: "+
				"open the link and sign the decision with your key", quote(in.User.ID), quote(in.User.ID)))
		}
		if err := h.mayClick(name, notify.ViaSlack); err != nil {
			return ephemeral(fmt.Sprintf("refused: %v (the click decided nothing; open the link to sign it)", err))
		}
		tok, err := h.signVia(f, name, notify.ViaSlack, approve, rejectReason(approve, name))
		if err != nil {
			return ephemeral("refused: " + err.Error())
		}
		by, dec.Token = name, tok
	} else {
		by = in.User.Username
		if by == "" {
			by = in.User.ID
		}
		if by == "" {
			return ephemeral("refused: the click names no Slack user")
		}
		by = "slack:" + by
		dec.Approver, dec.Reason, dec.Link = by, rejectReason(approve, by), f.link.Secret
	}
	res, err := h.b.Decide(ctx, l.WorkflowID, approve, dec, client.WithUpdateID(updateID("slack-", in.User.ID, actionTS, value)))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ephemeral(fmt.Sprintf("the run did not answer within %s, so the decision may or may not be taken: look at run %s before you click again", SlackDecideTimeout, l.WorkflowID))
	case errors.Is(err, client.ErrAlreadyDecided), errors.Is(err, client.ErrUnknownRun), errors.Is(err, client.ErrRunClosed), errors.Is(err, client.ErrDigestMismatch):
		// The call (or its run) no longer waits as the message shows it: no button of it can decide.
		return h.outcomeMessage(f, "refused: "+err.Error())
	case err != nil:
		// Who clicked may not decide, or the run could not answer: the
		// buttons stay for the right person, and for a second try.
		return ephemeral(fmt.Sprintf("refused: %v", err))
	case res.Decision == workflows.DecisionCounted:
		return ephemeral(outcome(res, f.it, by, notify.ViaSlack))
	}
	return h.outcomeMessage(f, fmt.Sprintf("%s by %s via slack", res.Decision, by))
}

// rejectReason is the reason of a rejection made in Slack ("" for an approval).
func rejectReason(approve bool, by string) string {
	if approve {
		return ""
	}
	return "rejected in Slack by " + by
}
