package agui

import (
	"crypto/ed25519"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// This file is who calls the endpoint, and what that means under a worker
// policy: there a thread's run is started signed by its caller, who is its
// verified requester — the policy's rules see them, and they may decide none
// of its calls — and only they send it messages.

// Caller is who sends a request, as Options.Callers tells it.
type Caller struct {
	// Name is the caller (a bearer token's name): the requester of the
	// runs it starts under a policy.
	Name string
	// Key signs the starts of Name's runs under a policy; nil: Name cannot
	// start one there.
	Key ed25519.PrivateKey
}

// fixTokens says how to give callers what a signed start needs.
const fixTokens = "give each caller a bearer token with its approver key — `toolgate mcp token new NAME --key NAME.key --tokens FILE`, " +
	"NAME an approver of the policy — serve the endpoint with it (`toolgate agui --policy FILE --agui-tokens FILE`, `toolgate dev --agui-tokens FILE`) " +
	"and send `Authorization: Bearer TOKEN` (HttpAgent's headers)"

// authenticate finds the request's caller by its bearer token, if the
// endpoint has callers; without Options.Callers every caller is nobody.
func (h *Handler) authenticate(r *http.Request) (Caller, *badRequest) {
	if h.opts.Callers == nil {
		return Caller{}, nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Caller{}, refuse(http.StatusUnauthorized, "no bearer token: this endpoint takes requests from its callers only; send Authorization: Bearer TOKEN")
	}
	c, ok := h.opts.Callers(strings.TrimSpace(token))
	if !ok || c.Name == "" {
		return Caller{}, refuse(http.StatusUnauthorized, "the bearer token is not one of this endpoint's callers")
	}
	return c, nil
}

// signedStart signs in as the caller's, under a policy: the run then names
// them its requester. Without a policy, in starts unsigned.
func (h *Handler) signedStart(in *workflows.RunInput, wfid, thread string, c Caller) *runErr {
	if !h.opts.Policy {
		return nil
	}
	switch {
	case h.opts.Callers == nil:
		return failf("unsigned_start", "thread %s's run is not started: the worker has an approval policy, and this endpoint does not know who calls it, "+
			"so the run would have no verified requester and whoever started it could approve its calls; %s", thread, fixTokens)
	case c.Key == nil:
		return failf("unsigned_start", "thread %s's run is not started: the worker has an approval policy, and caller %s has no signing key here, "+
			"so the run would have no verified requester and %s could approve its calls; %s", thread, c.Name, c.Name, fixTokens)
	}
	if err := client.SignStart(in, wfid, c.Name, c.Key, 0); err != nil {
		return failf("unsigned_start", "thread %s's run is not started: %s", thread, err.Error())
	}
	return nil
}

// requester refuses a thread whose run is held to a policy but has no
// verified requester (it was started unsigned: whoever asked could approve
// its calls): the endpoint serves it no more.
func requester(st workflows.State, thread string) *runErr {
	if st.Policy && st.RequestedBy == "" {
		return failf("no_requester", "thread %s's run is held to the worker's approval policy but has no verified requester (it was started unsigned, "+
			"so whoever asked could approve its calls); this endpoint serves it no more. Start a new thread once the endpoint signs starts: %s", thread, fixTokens)
	}
	return nil
}

// mayMessage refuses a new user message to a run held to a policy from
// anyone but its requester: its turns are theirs. (A resume is open to any
// caller — each decision is signed, and the run checks who made it — and so
// is a reconnect.)
func mayMessage(st workflows.State, thread string, c Caller) *runErr {
	if st.Policy && st.RequestedBy != c.Name {
		return failf("foreign_thread", "thread %s's run was requested by %s: under the worker's policy only they send it messages", thread, st.RequestedBy)
	}
	return nil
}
