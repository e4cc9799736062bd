package webkeys

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// The handler serves the script as JavaScript.
func TestHandlerServesTheScript(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET %s: %d %q", Path, rec.Code, rec.Header().Get("Content-Type"))
	}
	if !strings.Contains(rec.Body.String(), "window.toolgateSign") {
		t.Fatal("the script does not expose window.toolgateSign")
	}
}

// sign.js, run by node, signs a token signed.Verify accepts with exactly
// the claims given — via included — and digests arguments as tool.Digest
// does. Without node it skips, unless TOOLGATE_REQUIRE_NODE=1 (CI), where
// it fails.
func TestScriptSignsWhatGoVerifies(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_NODE=1 and no node on PATH: %v", err)
		}
		t.Skip("no node on PATH: sign.js's test runs it with Node.js; set TOOLGATE_REQUIRE_NODE=1 to fail instead")
	}
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := signed.EncodePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pemText, _ := json.Marshal(string(keyPEM))
	args := `{"b":[1,2.50,1e3],"a":"é","n":9007199254740993}`
	script := `globalThis.window = globalThis;
require(` + jsString(t, filepath.Join(mustAbs(t, "."), "sign.js")) + `);
(async () => {
  const g = window.toolgateSign, key = await g.importKey(` + string(pemText) + `);
  const digest = await g.digest('refund', ` + jsString(t, args) + `);
  const claims = {sub: 'alice', wid: 'run-1', act: 'reject', call: 'c-2', digest,
    kind: 'gate', asked: '1796027884627275501', reason: 'no <b>', via: 'email', iat: 1700000000, exp: 1700000600};
  const token = await g.signToken(key, claims), again = await g.signToken(key, claims);
  const parsed = await g.digest('refund', {z: [1, 'é'], a: {y: true, b: null}, m: 'x'});
  console.log(JSON.stringify({token, again, digest, parsed}));
})().catch((e) => { console.error(e); process.exit(1); });`
	path := filepath.Join(t.TempDir(), "run.js")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, path).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct{ Token, Again, Digest, Parsed string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node's output %q: %v", out, err)
	}
	want, _ := tool.Digest("refund", json.RawMessage(args))
	if got.Digest != want {
		t.Errorf("digest %s, tool.Digest %s", got.Digest, want)
	}
	if want, _ := tool.Digest("refund", json.RawMessage(`{"z":[1,"é"],"a":{"y":true,"b":null},"m":"x"}`)); got.Parsed != want {
		t.Errorf("digest of a parsed value %s, tool.Digest %s", got.Parsed, want)
	}
	c, err := signed.Verify(got.Token, pub)
	if err != nil {
		t.Fatalf("the script's token does not verify: %v", err)
	}
	wantClaims := signed.Claims{Approver: "alice", WorkflowID: "run-1", Action: "reject", CallID: "c-2", ArgsDigest: want,
		Kind: "gate", Asked: 1796027884627275501, Reason: "no <b>", Via: "email", ID: c.ID, IssuedAt: 1700000000, Expiry: 1700000600}
	if c != wantClaims || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.ID) {
		t.Errorf("claims %+v, want %+v with a random jti of 16 bytes in hex", c, wantClaims)
	}
	// The same decision signed twice within a second is two tokens: a run
	// takes each once, so a second click is not refused as a spent token.
	c2, err := signed.Verify(got.Again, pub)
	if err != nil {
		t.Fatalf("the second token does not verify: %v", err)
	}
	if got.Again == got.Token || c2.ID == c.ID {
		t.Errorf("the same claims signed twice made the same token (jti %q)", c.ID)
	}
}

func jsString(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
