package encryption

import (
	"context"
	"fmt"
	"sort"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// KeyIDs are the distinct ids, sorted, of the keys that sealed the
// encrypted payloads anywhere in h: inputs, results, signals, updates,
// headers, memos, failures' encoded attributes and the rest.
func KeyIDs(h *historypb.History) []string {
	seen := map[string]bool{}
	walk(h.ProtoReflect(), func(p *commonpb.Payload) {
		if id := string(p.GetMetadata()[MetadataKeyID]); id != "" && isEncrypted(p) {
			seen[id] = true
		}
	}, nil)
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// DecodeHistory decrypts, in place, every encrypted payload of h with k's
// keys, and gives failures whose message and stack trace were encoded
// (Keyring.FailureConverter) their text back. Before it changes anything it
// checks that k holds every key h needs: if not, it returns a
// *MissingKeyError naming the first missing id (KeyIDs' order) and leaves h
// as it was. Search attributes are left as they are: never encrypted.
func DecodeHistory(ctx context.Context, h *historypb.History, k *Keyring) error {
	for _, id := range KeyIDs(h) {
		if !k.Has(id) {
			return &MissingKeyError{ID: id, File: k.path}
		}
	}
	var payloads []*commonpb.Payload
	var failures []*failurepb.Failure
	walk(h.ProtoReflect(), func(p *commonpb.Payload) { payloads = append(payloads, p) },
		func(f *failurepb.Failure) { failures = append(failures, f) })
	c := k.Codec()
	for i, p := range payloads {
		if i%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if !isEncrypted(p) {
			continue
		}
		out, err := c.Decode([]*commonpb.Payload{p})
		if err != nil {
			return err
		}
		proto.Reset(p)
		proto.Merge(p, out[0])
	}
	dc := converter.GetDefaultDataConverter()
	for _, f := range failures {
		if f.GetEncodedAttributes() == nil {
			continue
		}
		var ea struct {
			Message    string `json:"message"`
			StackTrace string `json:"stack_trace"`
		}
		if err := dc.FromPayload(f.GetEncodedAttributes(), &ea); err != nil {
			return fmt.Errorf("failure %q: encoded attributes: %w", f.GetMessage(), err)
		}
		f.Message, f.StackTrace, f.EncodedAttributes = ea.Message, ea.StackTrace, nil
	}
	return nil
}

var (
	payloadName          = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()
	failureName          = (&failurepb.Failure{}).ProtoReflect().Descriptor().FullName()
	searchAttributesName = (&commonpb.SearchAttributes{}).ProtoReflect().Descriptor().FullName()
)

// walk calls onPayload for every Payload message within m and onFailure
// (if not nil) for every Failure, outermost first. It does not enter
// search attributes (never encrypted) nor payloads themselves.
func walk(m protoreflect.Message, onPayload func(*commonpb.Payload), onFailure func(*failurepb.Failure)) {
	switch m.Descriptor().FullName() {
	case payloadName:
		if p, ok := m.Interface().(*commonpb.Payload); ok {
			onPayload(p)
		}
		return
	case searchAttributesName:
		return
	case failureName:
		if f, ok := m.Interface().(*failurepb.Failure); ok && onFailure != nil {
			onFailure(f)
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walk(l.Get(i).Message(), onPayload, onFailure)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walk(mv.Message(), onPayload, onFailure)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			walk(v.Message(), onPayload, onFailure)
		}
		return true
	})
}
