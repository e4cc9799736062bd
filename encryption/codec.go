package encryption

import (
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/internal/text"
)

const (
	// MetadataEncoding is the "encoding" metadata of an encrypted payload.
	MetadataEncoding = "binary/encrypted"
	// MetadataKeyID is the metadata key naming the key that sealed a payload.
	MetadataKeyID = "encryption-key-id"
)

// nonceSize is GCM's standard nonce size, fresh and random for each payload.
const nonceSize = 12

// MissingKeyError is the error of decoding a payload sealed under a key the
// keyring does not hold.
type MissingKeyError struct {
	ID   string // the payload's key id
	File string // the key file that lacks it
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("payload encrypted with key id %q: the encryption key file %s lacks that key (use the key file it was encrypted with, or add the key to this one)", text.Clip(e.ID, 2*maxIDLen), e.File)
}

// Codec is the payload codec of the keyring. Encode marshals each payload
// whole (its metadata too) and seals it with AES-256-GCM under the newest
// key, with a fresh random nonce and the key id as additional data; the
// result's metadata is encoding binary/encrypted and the key's id, its data
// the nonce then the ciphertext. A payload already encrypted is left as it
// is. Decode opens encrypted payloads with the key their metadata names and
// passes any other payload through untouched (plaintext from a client
// without the codec, such as the stock temporal CLI).
func (k *Keyring) Codec() converter.PayloadCodec { return codec{k} }

// DataConverter is the SDK's default data converter with the keyring's codec.
func (k *Keyring) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), k.Codec())
}

// FailureConverter is the SDK's default failure converter over
// DataConverter, with failures' messages and stack traces encoded (so
// encrypted) too.
func (k *Keyring) FailureConverter() converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          k.DataConverter(),
		EncodeCommonAttributes: true,
	})
}

// codec is Keyring.Codec.
type codec struct{ k *Keyring }

// isEncrypted says whether p is sealed by a codec like this one.
func isEncrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == MetadataEncoding
}

func (c codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	id := c.k.Newest()
	aead := c.k.aeads[id]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if isEncrypted(p) {
			out[i] = p
			continue
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		sealed := make([]byte, nonceSize, nonceSize+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		sealed = aead.Seal(sealed, sealed[:nonceSize], plain, []byte(id))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(MetadataEncoding),
				MetadataKeyID:              []byte(id),
			},
			Data: sealed,
		}
	}
	return out, nil
}

func (c codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !isEncrypted(p) {
			out[i] = p
			continue
		}
		dp, err := c.open(p)
		if err != nil {
			return payloads, err
		}
		out[i] = dp
	}
	return out, nil
}

// open decrypts one encrypted payload.
func (c codec) open(p *commonpb.Payload) (*commonpb.Payload, error) {
	idb, ok := p.GetMetadata()[MetadataKeyID]
	if !ok || len(idb) == 0 {
		return nil, errors.New("decrypt payload: encoding " + MetadataEncoding + " without " + MetadataKeyID + " metadata: not a payload this codec sealed")
	}
	if len(idb) > maxIDLen {
		// Payloads can come from anyone who can signal a run: an id is
		// never echoed at any length.
		return nil, fmt.Errorf("decrypt payload: a key id of %d bytes: not one a key file holds (at most %d)", len(idb), maxIDLen)
	}
	id := string(idb)
	aead, ok := c.k.aeads[id]
	if !ok {
		return nil, &MissingKeyError{ID: id, File: c.k.path}
	}
	data := p.GetData()
	if len(data) < nonceSize+aead.Overhead() {
		return nil, fmt.Errorf("decrypt payload (key id %q): %d bytes, too short for a sealed payload", id, len(data))
	}
	plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], idb)
	if err != nil {
		return nil, fmt.Errorf("decrypt payload (key id %q): authentication failed: the payload or its key id was altered, or it was sealed under another key of that id", id)
	}
	var dp commonpb.Payload
	if err := proto.Unmarshal(plain, &dp); err != nil {
		return nil, fmt.Errorf("decrypt payload (key id %q): the plaintext is not a payload: %w", id, err)
	}
	return &dp, nil
}
