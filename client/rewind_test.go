package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// A fork's input is of one fixed shape, which a token signed elsewhere (the
// inbox's page) signs: its input_digest is the SHA-256 of exactly this
// canonical text, with the arguments canonical and left out when none.
func TestForkInputIsOfTheShapeATokenSignedElsewhereSigns(t *testing.T) {
	for args, want := range map[string]string{
		`{ "b": 2, "a": 1.50 }`: `{"fork":{"args":{"a":1.5,"b":2},"at":"c-2","source":"run-a"},"goal":"","planner":{"kind":""}}`,
		``:                      `{"fork":{"at":"c-2","source":"run-a"},"goal":"","planner":{"kind":""}}`,
	} {
		in, err := ForkInput("run-a", "c-2", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if args != "" && string(in.Fork.Args) != `{"a":1.5,"b":2}` {
			t.Errorf("the fork's arguments %s, want them canonical", in.Fork.Args)
		}
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := workflows.InputDigest(raw)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(want))
		if got != hex.EncodeToString(sum[:]) {
			t.Errorf("args %q: the fork input %s digests to %s, not the SHA-256 of %s", args, raw, got, want)
		}
	}
	if _, err := ForkInput("run-a", "c-2", json.RawMessage(`{"a":1,"a":2}`)); !errors.Is(err, ErrRefusedInput) {
		t.Errorf("arguments with a key twice: %v, want ErrRefusedInput", err)
	}
}

// An operator signs with a key or brings a token, never both; the refusal
// comes before anything is asked of the server.
func TestOperatorWithKeyAndTokenIsRefused(t *testing.T) {
	_, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	by := Operator{Name: "olga", Key: priv, Token: "a.b.c"}
	c := &Client{} // no server: it must not be asked
	if _, err := c.Rewind(context.Background(), "run-a", "c-2", "d", by); !errors.Is(err, ErrRefusedInput) {
		t.Errorf("rewind: %v, want ErrRefusedInput", err)
	}
	if _, err := c.Fork(context.Background(), "run-a", "c-2", "run-b", nil, by); !errors.Is(err, ErrRefusedInput) {
		t.Errorf("fork: %v, want ErrRefusedInput", err)
	}
}
