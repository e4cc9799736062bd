package signed

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same claims signed twice are the same token (Ed25519 is
// deterministic); with a fresh ID each, they are two tokens, and the ID
// round-trips as jti.
func TestTokenIDsMakeTokensUnique(t *testing.T) {
	pub, priv := key(t)
	a, err := Sign(priv, claims())
	require.NoError(t, err)
	b, err := Sign(priv, claims())
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same claims make the same token")

	ca, cb := claims(), claims()
	ca.ID, cb.ID = NewID(), NewID()
	require.Len(t, ca.ID, 32, "16 random bytes in hex")
	require.NotEqual(t, ca.ID, cb.ID)
	a, err = Sign(priv, ca)
	require.NoError(t, err)
	b, err = Sign(priv, cb)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	got, err := Verify(a, pub)
	require.NoError(t, err)
	assert.Equal(t, ca, got)
	assert.Contains(t, payloadJSON(t, ca), `"jti":"`+ca.ID+`"`)
}
