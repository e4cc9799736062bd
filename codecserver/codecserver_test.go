package codecserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/encryption"
)

const (
	uiOrigin = "http://127.0.0.1:8233"
	token    = "Bearer s3cret"
)

func keyring(t *testing.T) *encryption.Keyring {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enc.json")
	_, _, err := encryption.AddKey(path)
	require.NoError(t, err)
	k, err := encryption.LoadKeyring(path)
	require.NoError(t, err)
	return k
}

func server(t *testing.T, k *encryption.Keyring, mod func(*Options)) *httptest.Server {
	t.Helper()
	opts := Options{Codec: k.Codec(), Origins: []string{uiOrigin}, Authorization: token, Namespaces: []string{"default"}}
	if mod != nil {
		mod(&opts)
	}
	h, err := New(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func body(t *testing.T, ps ...*commonpb.Payload) string {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	require.NoError(t, err)
	return string(b)
}

// post sends body to path with the headers (name, value pairs) and returns
// the status, the answer's headers and its body.
func post(t *testing.T, srv *httptest.Server, method, path, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func payloads(t *testing.T, s string) []*commonpb.Payload {
	t.Helper()
	var ps commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(s), &ps), s)
	return ps.Payloads
}

var ok = []string{"Authorization", token, "X-Namespace", "default"}

func TestDecodeEncrypted(t *testing.T) {
	k := keyring(t)
	srv := server(t, k, nil)
	in, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"card": "4111"})
	require.NoError(t, err)
	enc, err := k.Codec().Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	require.NotContains(t, string(enc[0].Data), "4111")

	code, _, out := post(t, srv, "POST", "/decode", body(t, enc[0], in), ok...)
	require.Equal(t, http.StatusOK, code, out)
	got := payloads(t, out)
	require.Len(t, got, 2)
	assert.True(t, proto.Equal(in, got[0]), "decoded %v", got[0])
	assert.True(t, proto.Equal(in, got[1]), "plaintext passes through")
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	k := keyring(t)
	srv := server(t, k, nil)
	in := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"hello"`)}

	code, _, out := post(t, srv, "POST", "/encode", body(t, in), ok...)
	require.Equal(t, http.StatusOK, code, out)
	enc := payloads(t, out)
	require.Len(t, enc, 1)
	assert.Equal(t, encryption.MetadataEncoding, string(enc[0].Metadata["encoding"]))
	assert.Equal(t, k.Newest(), string(enc[0].Metadata[encryption.MetadataKeyID]))

	code, _, out = post(t, srv, "POST", "/decode", body(t, enc...), ok...)
	require.Equal(t, http.StatusOK, code, out)
	dec := payloads(t, out)
	require.Len(t, dec, 1)
	assert.True(t, proto.Equal(in, dec[0]))

	// A payload of a key the server lacks: refused, naming the key.
	other := keyring(t)
	foreign, err := other.Codec().Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	code, _, out = post(t, srv, "POST", "/decode", body(t, foreign...), ok...)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out, other.Newest())
}

func TestAuthorization(t *testing.T) {
	srv := server(t, keyring(t), nil)
	b := body(t, &commonpb.Payload{})
	for name, auth := range map[string]string{"missing": "", "wrong": "Bearer nope", "prefix": "Bearer s3cre", "longer": token + "x", "case": "bearer s3cret"} {
		code, _, out := post(t, srv, "POST", "/decode", b, "Authorization", auth, "X-Namespace", "default")
		assert.Equal(t, http.StatusUnauthorized, code, name)
		assert.Contains(t, out, "Authorization", name)
	}
	code, _, out := post(t, srv, "POST", "/decode", b, ok...)
	assert.Equal(t, http.StatusOK, code, out)

	// Without Options.Authorization, none is asked for.
	open := server(t, keyring(t), func(o *Options) { o.Authorization = "" })
	code, _, out = post(t, open, "POST", "/decode", b, "X-Namespace", "default")
	assert.Equal(t, http.StatusOK, code, out)
}

func TestCORS(t *testing.T) {
	srv := server(t, keyring(t), nil)
	b := body(t, &commonpb.Payload{})

	code, h, out := post(t, srv, "POST", "/decode", b, append([]string{"Origin", uiOrigin}, ok...)...)
	assert.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, uiOrigin, h.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", h.Get("Access-Control-Allow-Credentials"))
	assert.Contains(t, h.Values("Vary"), "Origin")

	for _, other := range []string{"http://evil.example", "http://127.0.0.1:8234", "http://localhost:8233", "null"} {
		code, h, out := post(t, srv, "POST", "/decode", b, append([]string{"Origin", other}, ok...)...)
		assert.Equal(t, http.StatusForbidden, code, other)
		assert.Contains(t, out, "origin", other)
		assert.Empty(t, h.Get("Access-Control-Allow-Origin"), other)
		assert.Empty(t, h.Get("Access-Control-Allow-Credentials"), other)
		assert.Contains(t, h.Values("Vary"), "Origin")
	}

	// The preflight: answered for the UI, with what it may send.
	code, h, _ = post(t, srv, "OPTIONS", "/decode", "", "Origin", uiOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-namespace,authorization")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Equal(t, uiOrigin, h.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "POST", h.Get("Access-Control-Allow-Methods"))
	for _, hd := range []string{"Content-Type", "X-Namespace", "Authorization"} {
		assert.Contains(t, h.Get("Access-Control-Allow-Headers"), hd)
	}
	code, h, out = post(t, srv, "OPTIONS", "/decode", "", "Origin", "http://evil.example", "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusForbidden, code, out)
	assert.Empty(t, h.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, h.Get("Access-Control-Allow-Methods"))
}

func TestRefusals(t *testing.T) {
	srv := server(t, keyring(t), func(o *Options) { o.MaxBody = 1024 })
	small := body(t, &commonpb.Payload{})

	code, _, out := post(t, srv, "POST", "/decode", body(t, &commonpb.Payload{Data: make([]byte, 2048)}), ok...)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Contains(t, out, "1024")

	// A body of unknown length (chunked) is bounded as it is read.
	req, err := http.NewRequest("POST", srv.URL+"/decode", io.MultiReader(strings.NewReader(body(t, &commonpb.Payload{Data: make([]byte, 2048)}))))
	require.NoError(t, err)
	req.Header.Set("Authorization", token)
	req.Header.Set("X-Namespace", "default")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int64(0), req.ContentLength, "unknown: sent chunked")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	code, _, out = post(t, srv, "POST", "/decode", small, "Authorization", token, "X-Namespace", "other")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, out, `"other"`)
	code, _, _ = post(t, srv, "POST", "/decode", small, "Authorization", token)
	assert.Equal(t, http.StatusForbidden, code, "no namespace")

	code, h, out := post(t, srv, "GET", "/decode", "", ok...)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	assert.Contains(t, h.Get("Allow"), "POST")
	assert.Contains(t, out, "POST")

	for _, path := range []string{"/", "/x/decode", "/decode/", "/encodex"} {
		code, _, out = post(t, srv, "POST", path, small, ok...)
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.Contains(t, out, "/decode", path)
	}

	code, _, _ = post(t, srv, "POST", "/decode", "{not json", ok...)
	assert.Equal(t, http.StatusBadRequest, code)

	for _, bad := range []string{"*", "http://127.0.0.1:8233/", "127.0.0.1:8233", "null"} {
		_, err := New(Options{Codec: keyring(t).Codec(), Origins: []string{bad}})
		assert.Error(t, err, bad)
	}
	_, err = New(Options{})
	assert.Error(t, err)
}

func TestListen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h, err := New(Options{Codec: keyring(t).Codec()})
	require.NoError(t, err)
	s, err := Listen(ctx, "127.0.0.1:0", h, nil)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s.URL, "http://127.0.0.1:"), s.URL)
	resp, err := http.Post(s.URL+"/decode", "application/json", strings.NewReader(`{"payloads":[]}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	assert.NoError(t, s.Wait())
	_, err = http.Post(s.URL+"/decode", "application/json", strings.NewReader(`{"payloads":[]}`))
	assert.Error(t, err, "stopped")
}

// The SDK's own remote codec (what a client with a codec endpoint uses)
// talks to the server.
func TestRemotePayloadCodec(t *testing.T) {
	k := keyring(t)
	srv := server(t, k, nil)
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL,
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", token)
			r.Header.Set("X-Namespace", "default")
			return nil
		},
	})
	in, err := converter.GetDefaultDataConverter().ToPayload("over the wire")
	require.NoError(t, err)
	enc, err := remote.Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	assert.Equal(t, k.Newest(), string(enc[0].Metadata[encryption.MetadataKeyID]))
	dec, err := k.Codec().Decode(enc)
	require.NoError(t, err)
	assert.True(t, proto.Equal(in, dec[0]))
	back, err := remote.Decode(enc)
	require.NoError(t, err)
	assert.True(t, proto.Equal(in, back[0]))
}
