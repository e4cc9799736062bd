package main

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// The AG-UI endpoint's callers are a tokens file's tokens, each with its
// key file's key: a token with a key the policy does not give its name (an
// unknown approver, another approver's key) stops the endpoint at start,
// since the run would refuse every start it signs; a token without a key
// is a caller who cannot sign; an unknown token is nobody.
func TestAGUICallersAreCheckedAgainstThePolicy(t *testing.T) {
	dir := t.TempDir()
	keyOf := func(name string) string {
		pub, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		path := filepath.Join(dir, name+".key")
		require.NoError(t, signed.WritePrivateKey(path, priv))
		return signed.FormatPublicKey(pub)
	}
	alicePub, bobPub := keyOf("alice"), keyOf("bob")
	pol, err := policy.Parse([]byte("approvers:\n  alice: {key: \"" + alicePub + "\", roles: [support]}\n  bob: {key: \"" + bobPub + "\", roles: [support]}\n"))
	require.NoError(t, err)
	tokens := func(entries map[string]string) string {
		file := filepath.Join(t.TempDir(), "tokens.json")
		for name, key := range entries {
			_, err := mcpserve.NewToken(file, name, key)
			require.NoError(t, err)
		}
		return file
	}

	good := filepath.Join(t.TempDir(), "tokens.json")
	aliceTok, err := mcpserve.NewToken(good, "alice", filepath.Join(dir, "alice.key"))
	require.NoError(t, err)
	carolTok, err := mcpserve.NewToken(good, "carol", "")
	require.NoError(t, err)
	callers, err := aguiCallers(good, pol)
	require.NoError(t, err)
	c, ok := callers(aliceTok)
	require.True(t, ok)
	assert.Equal(t, "alice", c.Name)
	assert.Equal(t, alicePub, signed.FormatPublicKey(c.Key.Public().(ed25519.PublicKey)))
	c, ok = callers(carolTok)
	assert.True(t, ok)
	assert.Equal(t, "carol", c.Name)
	assert.Nil(t, c.Key, "a token without a key signs nothing")
	_, ok = callers("tg_unknown")
	assert.False(t, ok)

	_, err = aguiCallers(tokens(map[string]string{"dave": filepath.Join(dir, "alice.key")}), pol)
	assert.ErrorContains(t, err, "the policy names no approver dave")
	_, err = aguiCallers(tokens(map[string]string{"alice": filepath.Join(dir, "bob.key")}), pol)
	assert.ErrorContains(t, err, "is not the key the policy gives alice")
	_, err = aguiCallers(tokens(map[string]string{"dave": filepath.Join(dir, "alice.key")}), nil)
	assert.NoError(t, err, "without a policy no key is checked")
}
