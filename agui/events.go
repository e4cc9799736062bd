package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// AG-UI event types this endpoint sends.
const (
	evRunStarted       = "RUN_STARTED"
	evRunFinished      = "RUN_FINISHED"
	evRunError         = "RUN_ERROR"
	evToolCallStart    = "TOOL_CALL_START"
	evToolCallArgs     = "TOOL_CALL_ARGS"
	evToolCallEnd      = "TOOL_CALL_END"
	evToolCallResult   = "TOOL_CALL_RESULT"
	evTextStart        = "TEXT_MESSAGE_START"
	evTextContent      = "TEXT_MESSAGE_CONTENT"
	evTextEnd          = "TEXT_MESSAGE_END"
	evStateSnapshot    = "STATE_SNAPSHOT"
	evMessagesSnapshot = "MESSAGES_SNAPSHOT"
)

// The events, field for field as @ag-ui/core 1.0.0's schemas name them.
type (
	runStarted struct {
		Type        string `json:"type"`
		ThreadID    string `json:"threadId"`
		RunID       string `json:"runId"`
		ParentRunID string `json:"parentRunId,omitempty"`
	}
	runFinished struct {
		Type     string  `json:"type"`
		ThreadID string  `json:"threadId"`
		RunID    string  `json:"runId"`
		Outcome  outcome `json:"outcome"`
	}
	outcome struct {
		Type       string      `json:"type"` // success | interrupt
		Interrupts []interrupt `json:"interrupts,omitempty"`
	}
	runError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code,omitempty"`
	}
	toolCallStart struct {
		Type            string `json:"type"`
		ToolCallID      string `json:"toolCallId"`
		ToolCallName    string `json:"toolCallName"`
		ParentMessageID string `json:"parentMessageId"`
	}
	toolCallArgs struct {
		Type       string `json:"type"`
		ToolCallID string `json:"toolCallId"`
		Delta      string `json:"delta"`
	}
	toolCallEnd struct {
		Type       string `json:"type"`
		ToolCallID string `json:"toolCallId"`
	}
	toolCallResult struct {
		Type       string `json:"type"`
		MessageID  string `json:"messageId"`
		ToolCallID string `json:"toolCallId"`
		Content    string `json:"content"`
		Role       string `json:"role"`
	}
	textStart struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
		Role      string `json:"role"`
	}
	textContent struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
		Delta     string `json:"delta"`
	}
	textEnd struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
	}
	stateSnapshot struct {
		Type     string             `json:"type"`
		Snapshot stateSnapshotValue `json:"snapshot"`
	}
	messagesSnapshot struct {
		Type     string            `json:"type"`
		Messages []json.RawMessage `json:"messages"`
	}
)

// stateSnapshotValue is the state a STATE_SNAPSHOT carries: the run's
// status, turn, call count, memo counters and waiting calls.
type stateSnapshotValue struct {
	Status     string      `json:"status"`
	Turn       int         `json:"turn"`
	Calls      int         `json:"calls"`
	Memo       memoStats   `json:"memo"`
	Interrupts []interrupt `json:"interrupts"`
}

type memoStats struct {
	Entries int   `json:"entries"`
	Bytes   int   `json:"bytes"`
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
}

// Messages as MESSAGES_SNAPSHOT carries them (those this endpoint makes).
type (
	outToolCall struct {
		ID       string      `json:"id"`
		Type     string      `json:"type"` // "function"
		Function outFunction `json:"function"`
	}
	outFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	outAssistant struct {
		ID        string        `json:"id"`
		Role      string        `json:"role"`
		Content   string        `json:"content,omitempty"`
		ToolCalls []outToolCall `json:"toolCalls,omitempty"`
	}
	outTool struct {
		ID         string `json:"id"`
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"toolCallId"`
	}
)

// writeTimeout bounds one event's write: a client that stops reading does
// not hold the stream (and its goroutine) past it.
const writeTimeout = 30 * time.Second

// sse writes one event stream: "data: <json>\n\n" per event, flushed as it
// is written. After a failed write every send fails.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// open writes the stream's headers.
func openSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	s.flush()
	return s
}

// send writes one event.
func (s *sse) send(ev any) error {
	if s.err != nil {
		return s.err
	}
	b, err := json.Marshal(ev)
	if err != nil { // cannot be: the events are plain structs
		s.err = fmt.Errorf("encoding an event: %w", err)
		return s.err
	}
	s.write(append(append([]byte("data: "), b...), '\n', '\n'))
	return s.err
}

// keepalive writes an SSE comment, which clients skip: it keeps proxies
// from closing an idle stream, and finds a client that went away.
func (s *sse) keepalive() error {
	if s.err == nil {
		s.write([]byte(": keepalive\n\n"))
	}
	return s.err
}

func (s *sse) write(b []byte) {
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return
	}
	s.flush()
}

func (s *sse) flush() {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) && s.err == nil {
		s.err = err
	}
}

// fail sends RUN_ERROR: the stream's last event.
func (s *sse) fail(code, msg string) error {
	return s.send(runError{Type: evRunError, Message: msg, Code: code})
}
