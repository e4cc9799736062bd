package encryption

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// newKeyFile makes a key file of one key in a fresh directory.
func newKeyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "enc.json")
	_, created, err := AddKey(path)
	require.NoError(t, err)
	require.True(t, created)
	return path
}

func load(t testing.TB, path string) *Keyring {
	t.Helper()
	k, err := LoadKeyring(path)
	require.NoError(t, err)
	return k
}

// plain is a JSON payload as the default converter makes it.
func plain(t testing.TB, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func encode1(t testing.TB, k *Keyring, p *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	out, err := k.Codec().Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	require.Len(t, out, 1)
	return out[0]
}

func decode1(k *Keyring, p *commonpb.Payload) (*commonpb.Payload, error) {
	out, err := k.Codec().Decode([]*commonpb.Payload{p})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func TestRoundTrip(t *testing.T) {
	k := load(t, newKeyFile(t))
	in := plain(t, map[string]string{"secret": "hunter2"})
	enc := encode1(t, k, in)

	assert.Equal(t, map[string][]byte{"encoding": []byte("binary/encrypted"), "encryption-key-id": []byte(k.Newest())}, enc.Metadata)
	assert.NotContains(t, string(enc.Data), "hunter2")
	assert.NotContains(t, string(enc.Data), "json/plain", "the inner metadata is sealed too")
	assert.Len(t, enc.Data, nonceSize+proto.Size(in)+16)

	dec, err := decode1(k, enc)
	require.NoError(t, err)
	assert.True(t, proto.Equal(in, dec), "decoded %v, want %v", dec, in)

	// Through the data converter, values come back.
	dc := k.DataConverter()
	ps, err := dc.ToPayloads("a", 42)
	require.NoError(t, err)
	for _, p := range ps.Payloads {
		assert.Equal(t, MetadataEncoding, string(p.Metadata["encoding"]))
	}
	var s string
	var n int
	require.NoError(t, dc.FromPayloads(ps, &s, &n))
	assert.Equal(t, "a", s)
	assert.Equal(t, 42, n)

	// An encrypted payload is not encrypted again.
	again := encode1(t, k, enc)
	assert.Same(t, enc, again)
}

func TestFreshNonce(t *testing.T) {
	k := load(t, newKeyFile(t))
	in := plain(t, "same")
	a, b := encode1(t, k, in), encode1(t, k, in)
	assert.NotEqual(t, a.Data, b.Data)
	assert.NotEqual(t, a.Data[:nonceSize], b.Data[:nonceSize])
}

func TestRotation(t *testing.T) {
	path := newKeyFile(t)
	k1 := load(t, path)
	old := encode1(t, k1, plain(t, "before rotation"))

	id2, created, err := AddKey(path)
	require.NoError(t, err)
	assert.False(t, created)
	k2 := load(t, path)
	assert.Equal(t, []string{k1.Newest(), id2}, k2.IDs())
	assert.Equal(t, id2, k2.Newest())
	assert.True(t, k2.Has(k1.Newest()))
	assert.False(t, k2.Has("nope"))

	dec, err := decode1(k2, old)
	require.NoError(t, err)
	assert.True(t, proto.Equal(plain(t, "before rotation"), dec))

	fresh := encode1(t, k2, plain(t, "after"))
	assert.Equal(t, id2, string(fresh.Metadata[MetadataKeyID]))

	// The old keyring cannot read the new key's payloads, and says which key it lacks.
	_, err = decode1(k1, fresh)
	var mk *MissingKeyError
	require.ErrorAs(t, err, &mk)
	assert.Equal(t, id2, mk.ID)
	assert.Contains(t, err.Error(), id2)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "lacks")

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left behind")
}

func TestTampered(t *testing.T) {
	path := newKeyFile(t)
	_, _, err := AddKey(path)
	require.NoError(t, err)
	k := load(t, path)
	enc := encode1(t, k, plain(t, "x"))

	flipped := proto.Clone(enc).(*commonpb.Payload)
	flipped.Data[len(flipped.Data)-1] ^= 1
	_, err = decode1(k, flipped)
	assert.ErrorContains(t, err, "authentication failed")

	// The key id is authenticated: naming the other key of the file fails too.
	relabelled := proto.Clone(enc).(*commonpb.Payload)
	relabelled.Metadata[MetadataKeyID] = []byte(k.IDs()[0])
	_, err = decode1(k, relabelled)
	assert.ErrorContains(t, err, "authentication failed")

	// Even between two ids of the same key bytes: only the additional data tells them apart.
	twins := load(t, writeFile(t, `{"keys":[`+keyJSON("k1", 32)+`,`+keyJSON("k2", 32)+`]}`))
	sealed := encode1(t, twins, plain(t, "x"))
	require.Equal(t, "k2", string(sealed.Metadata[MetadataKeyID]))
	sealed.Metadata[MetadataKeyID] = []byte("k1")
	_, err = decode1(twins, sealed)
	assert.ErrorContains(t, err, "authentication failed")

	short := proto.Clone(enc).(*commonpb.Payload)
	short.Data = short.Data[:nonceSize]
	_, err = decode1(k, short)
	assert.ErrorContains(t, err, "too short")

	noID := proto.Clone(enc).(*commonpb.Payload)
	delete(noID.Metadata, MetadataKeyID)
	_, err = decode1(k, noID)
	assert.ErrorContains(t, err, MetadataKeyID)
}

func TestPlaintextPassesThrough(t *testing.T) {
	k := load(t, newKeyFile(t))
	in := []*commonpb.Payload{plain(t, "from the temporal CLI"), {Metadata: map[string][]byte{"encoding": []byte("binary/null")}}, {}}
	out, err := k.Codec().Decode(in)
	require.NoError(t, err)
	require.Len(t, out, len(in))
	for i := range in {
		assert.Same(t, in[i], out[i])
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enc.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func keyJSON(id string, n int) string {
	return fmt.Sprintf(`{"id":%q,"key":%q,"created":"2026-12-01T00:00:00Z"}`, id, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)))
}

func TestLoadKeyringRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ content, want string }{
		"not JSON":      {`keys: []`, "not a key file"},
		"unknown field": {`{"keys":[` + keyJSON("k1", 32) + `],"extra":1}`, `unknown field "extra"`},
		"unknown key field": {`{"keys":[{"id":"k1","key":"` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `","secret":"x"}]}`,
			`unknown field "secret"`},
		"trailing":     {`{"keys":[` + keyJSON("k1", 32) + `]} {}`, "after the JSON"},
		"no keys":      {`{"keys":[]}`, "no keys"},
		"no list":      {`{}`, "no keys"},
		"empty id":     {`{"keys":[` + keyJSON("", 32) + `]}`, "empty id"},
		"bad id":       {`{"keys":[` + keyJSON("a b", 32) + `]}`, "id"},
		"duplicate id": {`{"keys":[` + keyJSON("k1", 32) + `,` + keyJSON("k1", 32) + `]}`, `"k1" appears twice`},
		"short key":    {`{"keys":[` + keyJSON("k1", 16) + `]}`, "16 bytes, want 32"},
		"long key":     {`{"keys":[` + keyJSON("k1", 33) + `]}`, "33 bytes, want 32"},
		"not base64":   {`{"keys":[{"id":"k1","key":"!!"}]}`, "not base64"},
		"bad created":  {`{"keys":[{"id":"k1","key":"` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `","created":"yesterday"}]}`, "RFC 3339"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			_, err := LoadKeyring(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), path, "the error names the file")
			// AddKey does not touch a file it cannot load.
			_, _, err = AddKey(path)
			assert.Error(t, err)
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, tc.content, string(after))
		})
	}

	ok := writeFile(t, `{"keys":[`+keyJSON("k1", 32)+`,`+keyJSON("k2", 32)+`]}`)
	k, err := LoadKeyring(ok)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2"}, k.IDs())
	assert.Equal(t, "k2", k.Newest(), "the newest key is the last")

	_, err = LoadKeyring(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorContains(t, err, "toolgate keys encryption")
}

func TestLoadKeyringRefusesOpenModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	path := newKeyFile(t)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		require.NoError(t, os.Chmod(path, mode))
		_, err := LoadKeyring(path)
		require.Error(t, err, "mode %04o", mode)
		assert.Contains(t, err.Error(), "chmod 600 "+path)
		_, _, err = AddKey(path)
		assert.Error(t, err, "AddKey, mode %04o", mode)
	}
	require.NoError(t, os.Chmod(path, 0o400))
	_, err := LoadKeyring(path)
	assert.NoError(t, err, "read-only for the owner is fine")
}

func TestLoadKeyringRefusesSymlink(t *testing.T) {
	path := newKeyFile(t)
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(path, link); err != nil {
		if runtime.GOOS == "windows" {
			t.Skip("no symlinks without privileges on Windows:", err) // elsewhere a failure
		}
		t.Fatal(err)
	}
	_, err := LoadKeyring(link)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
	assert.Contains(t, err.Error(), link)

	_, err = LoadKeyring(t.TempDir())
	assert.ErrorContains(t, err, "not a regular file")
}

func TestAddKeyIDs(t *testing.T) {
	path := newKeyFile(t)
	for range 5 {
		_, _, err := AddKey(path)
		require.NoError(t, err)
	}
	k := load(t, path)
	ids := k.IDs()
	require.Len(t, ids, 6)
	seen := map[string]bool{}
	for _, id := range ids {
		assert.Regexp(t, `^k-\d{8}-[0-9a-f]{4}$`, id)
		assert.False(t, seen[id], "unique ids")
		seen[id] = true
	}
	var kf map[string][]map[string]any
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &kf))
	assert.Len(t, kf["keys"], 6)
	assert.Equal(t, ids[5], kf["keys"][5]["id"], "newest last in the file")
}

// history is a small history with an encrypted input, memo, signal and
// failure, and a plaintext search attribute.
func history(t *testing.T, k *Keyring) *historypb.History {
	t.Helper()
	dc := k.DataConverter()
	input, err := dc.ToPayloads("the goal", 3)
	require.NoError(t, err)
	memo, err := dc.ToPayload("memo text")
	require.NoError(t, err)
	signal, err := dc.ToPayloads(map[string]string{"decision": "approve"})
	require.NoError(t, err)
	sa := plain(t, "searchable")
	cause := k.FailureConverter().ErrorToFailure(errors.New("disk full at /secret/path"))
	require.NotNil(t, cause.EncodedAttributes)
	require.NotContains(t, cause.Message, "secret")
	return &historypb.History{Events: []*historypb.HistoryEvent{
		{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Input:            input,
				Memo:             &commonpb.Memo{Fields: map[string]*commonpb.Payload{"note": memo}},
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"Tool": sa}},
			}}},
		{EventId: 2, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
				SignalName: "decide", Input: signal,
			}}},
		{EventId: 3, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
				Failure: cause,
			}}},
	}}
}

func TestDecodeHistory(t *testing.T) {
	path := newKeyFile(t)
	k1 := load(t, path)
	h := history(t, k1)
	_, _, err := AddKey(path)
	require.NoError(t, err)
	k2 := load(t, path)
	// One more event, under the new key.
	late, err := k2.DataConverter().ToPayloads("late signal")
	require.NoError(t, err)
	h.Events = append(h.Events, &historypb.HistoryEvent{EventId: 4, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
			SignalName: "decide", Input: late,
		}}})

	want := []string{k1.Newest(), k2.Newest()}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	assert.Equal(t, want, KeyIDs(h))
	assert.NotContains(t, h.String(), "the goal")

	// Without the second key: refused before anything changes.
	before := proto.Clone(h)
	err = DecodeHistory(context.Background(), h, k1)
	var mk *MissingKeyError
	require.ErrorAs(t, err, &mk)
	assert.Equal(t, k2.Newest(), mk.ID)
	assert.True(t, proto.Equal(before, h), "history untouched")

	require.NoError(t, DecodeHistory(context.Background(), h, k2))
	assert.Empty(t, KeyIDs(h))
	dc := converter.GetDefaultDataConverter()

	start := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	var goal string
	var n int
	require.NoError(t, dc.FromPayloads(start.Input, &goal, &n))
	assert.Equal(t, "the goal", goal)
	assert.Equal(t, 3, n)
	var memo string
	require.NoError(t, dc.FromPayload(start.Memo.Fields["note"], &memo))
	assert.Equal(t, "memo text", memo)
	assert.True(t, proto.Equal(plain(t, "searchable"), start.SearchAttributes.IndexedFields["Tool"]))

	var sig map[string]string
	require.NoError(t, dc.FromPayloads(h.Events[1].GetWorkflowExecutionSignaledEventAttributes().Input, &sig))
	assert.Equal(t, map[string]string{"decision": "approve"}, sig)
	var lateS string
	require.NoError(t, dc.FromPayloads(h.Events[3].GetWorkflowExecutionSignaledEventAttributes().Input, &lateS))
	assert.Equal(t, "late signal", lateS)

	f := h.Events[2].GetWorkflowExecutionFailedEventAttributes().Failure
	assert.Equal(t, "disk full at /secret/path", f.Message)
	assert.Nil(t, f.EncodedAttributes)

	// Decoding again changes nothing: nothing is encrypted any more.
	after := proto.Clone(h)
	require.NoError(t, DecodeHistory(context.Background(), h, k1))
	assert.True(t, proto.Equal(after, h))
}

func BenchmarkRoundTrip(b *testing.B) {
	k := load(b, newKeyFile(b))
	for _, size := range []int{1 << 10, 16 << 10} {
		value := strings.Repeat("x", size)
		for _, c := range []struct {
			name string
			dc   converter.DataConverter
		}{{"plain", converter.GetDefaultDataConverter()}, {"encrypted", k.DataConverter()}} {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					p, err := c.dc.ToPayload(value)
					if err != nil {
						b.Fatal(err)
					}
					var out string
					if err := c.dc.FromPayload(p, &out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
