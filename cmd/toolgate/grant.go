package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// grant is `toolgate grant ID TOOL --as NAME --key FILE`: allow TOOL for the
// rest of the run chain (calls a rule would ask one approver about).
func (c *cli) grant(ctx context.Context, args []string) error {
	fs := c.flags("grant")
	cn := c.connFlags(fs)
	as := fs.String("as", "", "the approver who grants (required)")
	keyFile := fs.String("key", "", "their private key file (required)")
	when := fs.String("when", "", "only calls whose arguments match this CEL expression (e.g. \"args.amount_cents < 10000\")")
	uses := fs.Int("uses", 0, "how many calls it lets through (0: no limit)")
	dur := fs.Duration("for", 0, "how long it lasts (0: the rest of the run chain)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("grant needs a run id and a tool name")
	}
	g := signed.Grant{Tool: pos[1], When: *when, Uses: *uses}
	if *dur > 0 {
		g.Until = time.Now().Add(*dur).Unix()
	}
	return c.grantOrRevoke(ctx, cn, *as, *keyFile, func(cl *tgclient.Client, key ed25519.PrivateKey) (workflows.Grant, error) {
		return cl.Grant(ctx, pos[0], *as, key, g)
	}, "granted")
}

// revoke is `toolgate revoke ID GRANT_ID --as NAME --key FILE`.
func (c *cli) revoke(ctx context.Context, args []string) error {
	fs := c.flags("revoke")
	cn := c.connFlags(fs)
	as := fs.String("as", "", "the approver who revokes: the grant's or one who shares a role with them (required)")
	keyFile := fs.String("key", "", "their private key file (required)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("revoke needs a run id and a grant id (toolgate status lists them)")
	}
	return c.grantOrRevoke(ctx, cn, *as, *keyFile, func(cl *tgclient.Client, key ed25519.PrivateKey) (workflows.Grant, error) {
		return cl.Revoke(ctx, pos[0], *as, key, pos[1])
	}, "revoked")
}

func (c *cli) grantOrRevoke(ctx context.Context, cn *connect.Settings, as, keyFile string, send func(*tgclient.Client, ed25519.PrivateKey) (workflows.Grant, error), done string) error {
	if as == "" || keyFile == "" {
		return errors.New("--as NAME and --key FILE are required: a grant is a signed decision")
	}
	key, err := signed.ReadPrivateKey(keyFile)
	if err != nil {
		return err
	}
	tc, _, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	g, err := send(tgclient.New(tc), key)
	if err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	fmt.Fprintf(c.stdout, "%s ", done)
	printGrant(c.stdout, g)
	return nil
}
