package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/encryption"
)

// keysEncryption is `toolgate keys encryption FILE`: it creates the payload
// encryption key file FILE (mode 0600) with one key, or adds a new newest
// key to it (the older ones still decrypt). It never prints a key.
func (c *cli) keysEncryption(ctx context.Context, args []string) error {
	fs := c.flags("keys encryption")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return errors.New("usage: toolgate keys encryption FILE")
	}
	path := pos[0]
	id, _, err := encryption.AddKey(path)
	if err != nil {
		return err
	}
	k, err := encryption.LoadKeyring(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %s: key %s (newest of %d; mode 0600)\n", path, id, len(k.IDs()))
	return nil
}
