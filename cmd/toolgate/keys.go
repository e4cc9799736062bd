package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolgate/toolgate/signed"
)

// keyName is what an approver's key file may be called: the approver's name
// in a policy file.
var keyName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// keysUsage lists the kinds of key `toolgate keys` makes.
const keysUsage = `usage: toolgate keys new NAME [--dir DIR]
       toolgate keys tls DIR [--host H]...
       toolgate keys encryption FILE`

// keys is `toolgate keys KIND ...`: it makes a key of that kind.
func (c *cli) keys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(keysUsage)
	}
	switch args[0] {
	case "new":
		return c.keysNew(ctx, args[1:])
	case "encryption":
		return c.keysEncryption(ctx, args[1:])
	case "tls":
		return c.keysTLS(args[1:])
	default:
		return fmt.Errorf("toolgate keys %.40q: no such kind of key\n%s", args[0], keysUsage)
	}
}

// keysNew is `toolgate keys new NAME [--dir DIR]`: an approver's signing key pair.
func (c *cli) keysNew(ctx context.Context, args []string) error {
	fs := c.flags("keys new")
	dir := fs.String("dir", filepath.Join(".toolgate", "keys"), "directory to write NAME.key and NAME.pub in")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: toolgate keys new NAME [--dir DIR]")
	}
	name := pos[0]
	if !keyName.MatchString(name) {
		return fmt.Errorf("key name %.80q: want 1 to 64 of a-z 0-9 . _ - starting with a letter or digit (the approver's name in the policy)", name)
	}
	keyPath := filepath.Join(*dir, name+".key")
	pubPath := filepath.Join(*dir, name+".pub")
	if _, err := os.Lstat(keyPath); err == nil {
		return c.keepKey(name, keyPath, pubPath)
	}
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		return err
	}
	if err := signed.WritePrivateKey(keyPath, priv); err != nil {
		return err
	}
	line := signed.FormatPublicKey(pub)
	if err := writePublicKey(pubPath, line); err != nil {
		os.Remove(keyPath) // ours, just made: no half-made pair left behind
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %s (private: keep it; mode 0600) and %s\npolicy line:\n  %s: {key: %q, roles: [ROLE]}\n",
		keyPath, pubPath, name, line)
	return nil
}

// keepKey is `keys new` for a name whose key exists (made by an earlier
// `keys new`, or by `toolgate demo --policy`): it never overwrites a key. It
// keeps it, writes its public key beside it when that is missing, and prints
// its policy line, so a page that makes the key runs after one that made it.
// A public key file that is not the key's is refused, never replaced.
func (c *cli) keepKey(name, keyPath, pubPath string) error {
	priv, err := signed.ReadPrivateKey(keyPath)
	if err != nil {
		return fmt.Errorf("%s exists and is not a key this command can keep (%w): remove it first if you mean to replace %s's key", keyPath, err, name)
	}
	line := signed.FormatPublicKey(priv.Public().(ed25519.PublicKey))
	wrote := ""
	switch text, err := os.ReadFile(pubPath); {
	case errors.Is(err, os.ErrNotExist):
		if err := writePublicKey(pubPath, line); err != nil {
			return err
		}
		wrote = "; wrote " + pubPath
	case err != nil:
		return fmt.Errorf("reading %s: %w", pubPath, err)
	case strings.TrimSpace(string(text)) != line:
		return fmt.Errorf("%s is not the public key of %s: move one of them away (the key is never overwritten)", pubPath, keyPath)
	}
	fmt.Fprintf(c.stdout, "kept %s (it exists: a key is never overwritten; remove it first to replace %s's key)%s\npolicy line:\n  %s: {key: %q, roles: [ROLE]}\n",
		keyPath, name, wrote, name, line)
	return nil
}

// writePublicKey writes a public key's text form, one line, mode 0644.
func writePublicKey(path, line string) error {
	if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask: it is public
		return fmt.Errorf("write public key: %w", err)
	}
	return nil
}
