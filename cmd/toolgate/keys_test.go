package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
)

func runKeys(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"keys"}, args...), strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestKeysNew(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "keys") // made by the command
	out, _, err := runKeys(t, "new", "bob", "--dir", tmp)
	require.NoError(t, err)

	keyPath, pubPath := filepath.Join(tmp, "bob.key"), filepath.Join(tmp, "bob.pub")
	m := regexp.MustCompile(`^wrote (.+) \(private: keep it; mode 0600\) and (.+)\npolicy line:\n  bob: \{key: "(ed25519:[A-Za-z0-9_-]{43})", roles: \[ROLE\]\}\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, "output:\n%s", out)
	assert.Equal(t, keyPath, m[1])
	assert.Equal(t, pubPath, m[2])

	priv, err := signed.ReadPrivateKey(keyPath)
	require.NoError(t, err)
	printed, err := signed.ParsePublicKey(m[3])
	require.NoError(t, err)
	assert.True(t, printed.Equal(priv.Public()), "printed key is the private key's")

	pubText, err := os.ReadFile(pubPath)
	require.NoError(t, err)
	assert.Equal(t, m[3]+"\n", string(pubText))
	filed, err := signed.ParsePublicKey(string(pubText))
	require.NoError(t, err)
	assert.True(t, filed.Equal(printed))

	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{keyPath: 0o600, pubPath: 0o644, tmp: 0o700} {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, want, fi.Mode().Perm(), path)
		}
	}

	// A key made by the command signs tokens its public key verifies.
	tok, err := signed.Sign(priv, signed.Claims{Approver: "bob", WorkflowID: "w", Action: signed.ActionApprove, IssuedAt: 1, Expiry: 2})
	require.NoError(t, err)
	_, err = signed.Verify(tok, printed)
	assert.NoError(t, err)

	// It never overwrites a key: it keeps it, and prints its policy line.
	keyBefore, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	out, _, err = runKeys(t, "new", "--dir", tmp, "bob")
	require.NoError(t, err)
	assert.Contains(t, out, "kept "+keyPath+" (it exists: a key is never overwritten")
	assert.Contains(t, out, "policy line:\n  bob: {key: \""+m[3]+"\"")
	keyAfter, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	assert.Equal(t, keyBefore, keyAfter)
	pubAfter, err := os.ReadFile(pubPath)
	require.NoError(t, err)
	assert.Equal(t, pubText, pubAfter)

	// A kept key without its public key (as toolgate demo --policy made
	// them) gets it; a public key that is another key's is refused.
	require.NoError(t, os.Remove(pubPath))
	out, _, err = runKeys(t, "new", "--dir", tmp, "bob")
	require.NoError(t, err)
	assert.Contains(t, out, "; wrote "+pubPath)
	pubAfter, err = os.ReadFile(pubPath)
	require.NoError(t, err)
	assert.Equal(t, pubText, pubAfter)
	other, _, err := signed.GenerateKey()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pubPath, []byte(signed.FormatPublicKey(other)+"\n"), 0o644))
	_, _, err = runKeys(t, "new", "--dir", tmp, "bob")
	assert.ErrorContains(t, err, "is not the public key of "+keyPath)
	keyAfter, err = os.ReadFile(keyPath)
	require.NoError(t, err)
	assert.Equal(t, keyBefore, keyAfter)

	// Another name, flags first, in the same directory.
	_, _, err = runKeys(t, "new", "--dir", tmp, "alice.ops-2")
	require.NoError(t, err)
	_, err = signed.ReadPrivateKey(filepath.Join(tmp, "alice.ops-2.key"))
	assert.NoError(t, err)
}

func TestKeysNewDefaultDir(t *testing.T) {
	t.Chdir(t.TempDir())
	out, _, err := runKeys(t, "new", "carol")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "wrote "+filepath.Join(".toolgate", "keys", "carol.key")+" "), out)
	_, err = signed.ReadPrivateKey(filepath.Join(".toolgate", "keys", "carol.key"))
	assert.NoError(t, err)
}

func TestKeysNewRefuses(t *testing.T) {
	tmp := t.TempDir()
	for _, name := range []string{
		"", "Bob", "-bob", ".bob", "_bob", "..", "../bob", "a/b", "bob\n", "bob key", "bób",
		strings.Repeat("a", 65),
	} {
		_, _, err := runKeys(t, "new", name, "--dir", tmp)
		assert.Error(t, err, "name %q", name)
	}
	_, _, err := runKeys(t, "new", strings.Repeat("a", 64), "--dir", tmp)
	assert.NoError(t, err, "64 characters")
	_, _, err = runKeys(t, "new", "0.b_c-d", "--dir", tmp)
	assert.NoError(t, err)

	for _, args := range [][]string{{}, {"old", "bob"}, {"new"}, {"new", "a", "b", "--dir", tmp}} {
		_, _, err := runKeys(t, args...)
		assert.Error(t, err, "%q", args)
	}
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{strings.Repeat("a", 64) + ".key", strings.Repeat("a", 64) + ".pub", "0.b_c-d.key", "0.b_c-d.pub"}, names)
}
