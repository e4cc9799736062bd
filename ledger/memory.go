package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// Memory is a fleet ledger in process, for tests of runs: its Reserve and
// Settle have the signatures of ReserveActivity and SettleActivity, so a
// test registers them under those names in place of the real ones. It
// keeps its state as the ledger workflow does (the same bookkeeping), and
// is safe for concurrent use.
type Memory struct {
	// Now is the ledger's clock (nil: time.Now). Set it before first use.
	Now func() time.Time

	mu   sync.Mutex
	st   State
	book book
}

// NewMemory is an empty in-process ledger under p (nil: no guards).
func NewMemory(p *policy.Policy) (*Memory, error) {
	m := &Memory{}
	m.book.st = &m.st
	if p != nil {
		eng, err := policy.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		m.book.eng = eng
	}
	return m, nil
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Reserve is ReserveActivity, in process.
func (m *Memory) Reserve(_ context.Context, r Reservation) (Verdict, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return answered(r, m.book.reserve(m.now(), r)), nil
}

// Settle is SettleActivity, in process.
func (m *Memory) Settle(_ context.Context, s Settlement) (Settled, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return settledAs(s, m.book.settle(m.now(), s)), nil
}

// Pause pauses tool (AllTools: every destructive tool) as by, with no
// token: the test stands in for a signed pause.
func (m *Memory) Pause(tool, by, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.book.pause(Pause{Tool: tool, By: by, Reason: reason, At: m.now().UTC()})
}

// Unpause lifts tool's pause, if any.
func (m *Memory) Unpause(tool string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.book.unpause(tool)
}

// Pauses is what ReadPauses would read: the tools paused (any task queue's:
// a Memory is one ledger).
func (m *Memory) Pauses(context.Context, string) ([]Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Pause{}, m.st.Pauses...), nil
}

// View is what the guards query would answer.
func (m *Memory) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.book.view(m.now())
}

// A Memory answers runs in the ledger's place (Config.Backend).
var (
	_ Backend     = (*Memory)(nil)
	_ PauseSource = (*Memory)(nil)
)
