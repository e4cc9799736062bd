package client

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/workflows"
)

// This file reads the records workers make in the authority namespace:
// a rewind carried out (rewind.go), a link a delivery sent.

// lookup reads the record wid from the authority namespace. Only where
// there is no authority namespace at all (workers that keep none record in
// the runs' namespace) is the runs' namespace read: where one exists, a
// record in the runs' namespace — which any client of the runs may start —
// counts for nothing.
func (c *Client) lookup(ctx context.Context, wid string, v any) error {
	ac, err := c.authorityClient(ctx)
	if err == nil {
		err = authority.Lookup(ctx, ac, "", wid, v)
	}
	if nf := (*serviceerror.NamespaceNotFound)(nil); errors.As(err, &nf) {
		return authority.Lookup(ctx, c.tc, "", wid, v)
	}
	return err
}

// LinkRecord reads the record a worker made of the link whose secret is
// secret, before it sent it (workflows.LinkRecord), from the authority
// namespace: authority.ErrNoRecord when no worker sent such a link.
func (c *Client) LinkRecord(ctx context.Context, secret string) (workflows.LinkRecord, error) {
	var rec workflows.LinkRecord
	err := c.lookup(ctx, workflows.LinkRecordPrefix+workflows.LinkDigest(secret), &rec)
	return rec, err
}
