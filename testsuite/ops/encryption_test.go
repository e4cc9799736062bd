package ops_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/workflows"
)

// secrets are what the encrypted walk-through's tools see and return: none
// may reach the server in plaintext.
var secrets = []string{"TKT-3", "login", "13579", "outage", "password reset"}

// writeRefundPlan writes the walk-through with a refund after the close:
// search, search again (a memo hit), close TKT-3, refund 13579 cents of BK-2.
func writeRefundPlan(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "refund.json")
	b := []byte(`{"goal":"find the login ticket, close it and refund the outage","planner":{"kind":"scripted","answer":"closed TKT-3, refunded","turns":[` +
		`[{"tool":"search_tickets","args":{"query":"login"}}],` +
		`[{"tool":"search_tickets","args":{"query":"login"}}],` +
		`[{"tool":"close_ticket","args":{"ticket_id":"TKT-3"}}],` +
		`[{"tool":"refund","args":{"booking_id":"BK-2","amount_cents":13579,"reason":"outage"}}]]}}`)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// exportHistory fetches a run's history with a client that has no key (as
// `temporal workflow show --output json` would) and writes it to a file.
func exportHistory(t *testing.T, address, id string) (string, *historypb.History) {
	t.Helper()
	plain, err := client.Dial(client.Options{HostPort: address, Logger: quietLogger()})
	require.NoError(t, err)
	defer plain.Close()
	h := &historypb.History{}
	it := plain.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.Marshal(h)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), id+".json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path, h
}

// requireNoSecret fails if data holds a secret in plaintext or in base64 at
// any of the three alignments.
func requireNoSecret(t *testing.T, what string, data []byte) {
	t.Helper()
	for _, s := range secrets {
		require.False(t, holdsSecret(data, s), "%s holds %q", what, s)
	}
}

// holdsSecret says whether data holds s in plaintext or in base64.
func holdsSecret(data []byte, s string) bool {
	for _, form := range secretForms(s) {
		if bytes.Contains(data, []byte(form)) {
			return true
		}
	}
	return false
}

// secretForms are s and the parts of its base64 that do not depend on the
// bytes around it, at each of the three offsets s can start at.
func secretForms(s string) []string {
	forms := []string{s}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{0}, pad), s...))
		// keep the characters made of s's bits alone, not of the bytes
		// around it
		start := (pad*8 + 5) / 6
		end := (pad + len(s)) * 8 / 6
		if end-start >= 4 {
			forms = append(forms, enc[start:end])
		}
	}
	return forms
}

// TestEncryptedWalkThrough: with --encryption-key-file on the worker and the
// client commands, the walk-through with a close and a refund leaves no
// argument or result of a tool in the server's database or in an exported
// history, while the commands with the key show them; an approval sent as
// plaintext (as the stock temporal CLI sends it) still decides; replay and
// audit read the history with the key file, and refuse it without, naming
// the key.
func TestEncryptedWalkThrough(t *testing.T) {
	dir := t.TempDir()
	keys, key := newKeyFile(t, dir)
	data := filepath.Join(dir, "data")
	p := startToolgate(t, "dev", "--data", data, "--address", "127.0.0.1:0", "--encryption-key-file", keys)
	address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
	withKey := []string{"--address", address, "--encryption-key-file", keys}
	id := "enc-walk"

	res := toolgate(t, append([]string{"run", "--id", id, "--plan", writeRefundPlan(t)}, withKey...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", withKey...)
	res = toolgate(t, append([]string{"pending"}, withKey...)...)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "TKT-3", "pending with the key shows the arguments")
	ib := startToolgate(t, append([]string{"inbox", "--listen", "127.0.0.1:0"}, withKey...)...)
	inboxURL := strings.Fields(strings.TrimPrefix(ib.waitLine(t, "approvals inbox at ", time.Minute), "approvals inbox at "))[0]
	req, err := http.NewRequest(http.MethodGet, inboxURL+"api/pending", nil)
	require.NoError(t, err)
	req.Header.Set("X-Toolgate-Inbox", "1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	listed, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(listed))
	require.Contains(t, string(listed), "TKT-3", "the inbox with the key shows the arguments")
	ib.stop(t)
	res = toolgate(t, append([]string{"approve", id, "c-3", "--as", "alice"}, withKey...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:refund", withKey...)

	// The refund is approved by a plaintext signal from a client without
	// the key: the stock `temporal workflow signal`.
	tgc, err := tgclient.Dial(context.Background(), connect.Settings{Address: address, EncryptionKeyFile: keys, Isolated: true})
	require.NoError(t, err)
	defer tgc.Close()
	it := waitPending(t, tgc.Temporal(), id, "c-4")
	plain, err := client.Dial(client.Options{HostPort: address, Logger: quietLogger()})
	require.NoError(t, err)
	defer plain.Close()
	approval := fmt.Sprintf(`{"call_id":"c-4","approver":"bob","args_digest":%q}`, it.ArgsDigest)
	stock := temporalCLI(t)
	if stock != "" {
		out, err := exec.Command(stock, "workflow", "signal", "--address", address, "--workflow-id", id, "--name", "approve", "--input", approval).CombinedOutput()
		require.NoError(t, err, "temporal workflow signal: %s", out)
	} else {
		// the same payload the stock CLI sends (json/plain)
		require.NoError(t, plain.SignalWorkflow(context.Background(), id, "", "approve", json.RawMessage(approval)))
	}
	waitCompleted(t, id, withKey...)
	trace := toolgate(t, append([]string{"trace", id}, withKey...)...)
	require.Equal(t, 0, trace.code, trace.stderr)
	for _, s := range secrets {
		require.Contains(t, trace.stdout, s, "the trace, read with the key, shows what the tools saw")
	}

	// A client without the key reads no secret: the state it queries is
	// encrypted, and so is every payload of the history it exports.
	v, err := plain.QueryWorkflow(context.Background(), id, "", workflows.QueryState)
	require.NoError(t, err)
	var st map[string]any
	require.Error(t, v.Get(&st), "a client without the key cannot read the state")
	file, hist := exportHistory(t, address, id)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	requireNoSecret(t, "the exported history", b)
	require.Equal(t, []string{key}, encryption.KeyIDs(hist))

	// The codec server shows the payloads to a client that brings its
	// Authorization, through the SDK's own remote codec (what the temporal
	// CLI's --codec-endpoint and the Web UI speak), and to nobody else.
	auth := filepath.Join(dir, "codec-auth")
	require.NoError(t, os.WriteFile(auth, []byte("Bearer codec-test-token\n"), 0o600))
	cs := startToolgate(t, "codec-server", "--listen", "127.0.0.1:0", "--encryption-key-file", keys, "--auth-file", auth)
	endpoint := strings.TrimPrefix(cs.waitLine(t, "codec server at ", time.Minute), "codec server at ")
	input := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	remote := func(authorization string) converter.PayloadCodec {
		return converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: endpoint,
			ModifyRequest: func(r *http.Request) error {
				r.Header.Set("X-Namespace", "default")
				if authorization != "" {
					r.Header.Set("Authorization", authorization)
				}
				return nil
			}})
	}
	decoded, err := remote("Bearer codec-test-token").Decode(input)
	require.NoError(t, err)
	require.Contains(t, string(decoded[0].GetData()), "login", "the codec server decrypts the run's input")
	for _, wrong := range []string{"", "Bearer another-token"} {
		_, err = remote(wrong).Decode(input)
		require.Error(t, err, "a client without the codec server's Authorization %q reads nothing", wrong)
	}
	if stock != "" {
		// the stock CLI: no secret without the codec server, every one with it
		show := func(extra ...string) string {
			out, err := exec.Command(stock, append([]string{"workflow", "show", "--address", address, "--workflow-id", id, "--output", "json"}, extra...)...).CombinedOutput()
			require.NoError(t, err, "temporal workflow show: %s", out)
			return string(out)
		}
		requireNoSecret(t, "temporal workflow show", []byte(show()))
		decodedShow := show("--codec-endpoint", endpoint, "--codec-auth", "Bearer codec-test-token")
		for _, s := range []string{"TKT-3", "login", "13579", "outage"} {
			require.True(t, holdsSecret([]byte(decodedShow), s), "temporal workflow show --codec-endpoint shows %q (its JSON keeps payloads in base64)", s)
		}
	}
	cs.stop(t)

	res = toolgate(t, "replay", file, "--encryption-key-file", keys)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	res = toolgate(t, "replay", file)
	require.NotEqual(t, 0, res.code)
	require.Contains(t, res.stdout, key, "replay without the key names the key it needs")
	res = toolgate(t, "audit", file, "--encryption-key-file", keys)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	require.Contains(t, res.stdout, "bob")
	res = toolgate(t, "audit", file)
	require.NotEqual(t, 0, res.code)
	require.Contains(t, res.stdout, key)

	// The server's database holds no secret either (read once it stopped).
	p.stop(t)
	dbs, err := filepath.Glob(filepath.Join(data, "temporal*"))
	require.NoError(t, err)
	require.NotEmpty(t, dbs)
	var all []byte
	for _, f := range dbs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		requireNoSecret(t, f, b)
		all = append(all, b...)
	}
	require.True(t, bytes.Contains(all, []byte(id)), "the database was read: it holds the run's workflow id")
}

// TestDevUICodec: `toolgate dev --encryption-key-file --ui-address` points
// its Web UI at a codec server of its own on loopback, which decrypts for
// the UI's origin and for no other site.
func TestDevUICodec(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	_, _, err := encryption.AddKey(keys)
	require.NoError(t, err)
	kr, err := encryption.LoadKeyring(keys)
	require.NoError(t, err)
	p := startToolgate(t, "dev", "--no-worker", "--data", t.TempDir(), "--address", "127.0.0.1:0", "--ui-address", "127.0.0.1:0", "--encryption-key-file", keys)
	ui := strings.TrimPrefix(p.waitLine(t, "Temporal UI at ", 2*time.Minute), "Temporal UI at ")
	endpoint := strings.Fields(strings.TrimPrefix(p.waitLine(t, "codec server for the UI at ", time.Minute), "codec server for the UI at "))[0]
	p.waitLine(t, "ready ", time.Minute)

	resp, err := http.Get(ui + "/api/v1/settings")
	require.NoError(t, err)
	settings, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(settings), endpoint, "the UI's settings name the codec server")

	sealed, err := kr.DataConverter().ToPayloads("TKT-3")
	require.NoError(t, err)
	body, err := protojson.Marshal(sealed)
	require.NoError(t, err)
	post := func(origin string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, out := post(ui)
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	require.Equal(t, ui, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, out, base64.StdEncoding.EncodeToString([]byte(`"TKT-3"`)), "decrypted for the UI")
	resp, out = post("https://evil.example")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	require.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte(`"TKT-3"`)), "another site reads nothing")
}

// temporalCLI is the stock temporal CLI that TOOLGATE_TEMPORAL_CLI names
// (.ci/run builds one), or "" when none: the tests then send what it would
// send with the SDK instead, and say so; TOOLGATE_REQUIRE_TEMPORAL_CLI=1
// makes a missing CLI fail the test.
func temporalCLI(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TOOLGATE_TEMPORAL_CLI")
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	if os.Getenv("TOOLGATE_REQUIRE_TEMPORAL_CLI") == "1" {
		t.Fatalf("TOOLGATE_REQUIRE_TEMPORAL_CLI=1 but TOOLGATE_TEMPORAL_CLI=%q names no temporal CLI", path)
	}
	t.Logf("no stock temporal CLI (TOOLGATE_TEMPORAL_CLI): its parts are sent with the SDK instead, and its workflow show is not run")
	return ""
}
