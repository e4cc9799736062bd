package client

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A page on which no run could be queried blames a missing worker only for
// the runs that did not answer: runs whose state cannot be decoded are
// ErrUnreadable.
func TestNoneQueriedTellsUnreadableFromUnanswered(t *testing.T) {
	unreadable := RunFailure{RunID: "a", Error: "the state of run a cannot be read", Unreadable: true}
	late := RunFailure{RunID: "b", Error: "its state query did not answer within 2s"}

	err := NoneQueried(PendingPage{Runs: 1, Failed: []RunFailure{unreadable}})
	assert.True(t, errors.Is(err, ErrUnreadable), "%v", err)
	assert.Equal(t, "none of the 1 runs found could be read: their state cannot be decoded (a worker that encrypts payloads with a key this client lacks?)", err.Error())

	err = NoneQueried(PendingPage{Runs: 1, Failed: []RunFailure{late}})
	assert.False(t, errors.Is(err, ErrUnreadable), "%v", err)
	assert.Equal(t, "none of the 1 runs found could be queried (is a toolgate worker running on their task queue?)", err.Error())

	err = NoneQueried(PendingPage{Runs: 2, Failed: []RunFailure{unreadable, late}})
	assert.False(t, errors.Is(err, ErrUnreadable), "%v", err)
	assert.Contains(t, err.Error(), "the state of 1 cannot be decoded")

	assert.NoError(t, NoneQueried(PendingPage{Runs: 2, Failed: []RunFailure{unreadable}}))
}
