package tool

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/internal/text"
)

// Spec declares a tool where it is registered on the worker. Nothing a client,
// planner or model sends can set or change any of these fields; a run records
// the specs it started with in its history and is held to them.
type Spec struct {
	// Name is the tool's name as planners call it and the activity type it runs as.
	Name string `json:"name"`
	// Description tells a planner (or a model) what the tool does.
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema of the tool's arguments (an object schema).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Destructive tools never run without a human "yes" for that exact call,
	// and their results are never stored in or served from the memo.
	Destructive bool `json:"destructive,omitempty"`
	// Retry bounds how often a transient failure is retried.
	Retry RetryPolicy `json:"retry,omitempty"`
	// Timeout bounds one attempt (start to close). Zero means DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Fallback names the tool called (through gate and memo, like any call)
	// when a retryable failure has used up every attempt.
	Fallback string `json:"fallback,omitempty"`
	// Invalidates names the tools whose memo entries this tool's success drops
	// (closing a ticket drops cached ticket reads).
	Invalidates []string `json:"invalidates,omitempty"`
	// Local runs the tool as a local activity (one marker event instead of a
	// scheduled activity): for fast reads only.
	Local bool `json:"local,omitempty"`
	// TaskQueue, when set, says another worker hosts the tool (one in
	// another language, say): its activity is scheduled on this task
	// queue, under the type Activity (the tool's Name if empty), with the
	// call's Request as its one argument, and whatever JSON value it
	// returns is the call's result. The gate, memo, policy and guards hold
	// it as any tool; what it is (destructive, its schema) is declared
	// here, never by the worker that hosts it.
	TaskQueue string `json:"task_queue,omitempty"`
	Activity  string `json:"activity,omitempty"`
	// NoMemo keeps a read's results out of the memo: every call runs.
	NoMemo bool `json:"no_memo,omitempty"`
}

// Remote reports whether another worker hosts the tool (TaskQueue is set).
func (s Spec) Remote() bool { return s.TaskQueue != "" }

// ActivityType is the activity the tool runs as: Activity for a remote
// tool that names one, else its Name.
func (s Spec) ActivityType() string {
	if s.Activity != "" {
		return s.Activity
	}
	return s.Name
}

// Memoized reports whether the tool's results are kept in and served from
// the memo: a read that does not say no_memo.
func (s Spec) Memoized() bool { return !s.Destructive && !s.NoMemo }

// MaxTaskQueueBytes bounds a remote tool's task queue and activity type.
const MaxTaskQueueBytes = 200

var queuePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/@\-]*$`)

// RetryPolicy is a tool's bounded retry policy.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, first included. Zero means
	// DefaultMaxAttempts; it is never unlimited.
	MaxAttempts int32 `json:"max_attempts,omitempty"`
	// InitialInterval is the wait before the first retry. Zero means DefaultInitialInterval.
	InitialInterval time.Duration `json:"initial_interval,omitempty"`
	// NonRetryable lists error types (ApplicationError.Type) that are never retried.
	NonRetryable []string `json:"non_retryable,omitempty"`
}

// Defaults applied where a Spec leaves a field zero.
const (
	DefaultMaxAttempts     = 3
	DefaultInitialInterval = time.Second
	DefaultTimeout         = 30 * time.Second
	// MaxMaxAttempts caps a declared MaxAttempts: retries are always bounded.
	MaxMaxAttempts = 100
)

var namePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_\-]{0,63}$`)

// Validate reports what is wrong with a spec, if anything: its name, its
// bounded retries, its description and schema within MaxDescriptionBytes and
// MaxSchemaBytes (every run records the specs it is held to, so one oversized
// spec would make every run on the worker fail), a schema that is JSON.
func (s Spec) Validate() error {
	if !namePattern.MatchString(s.Name) {
		return fmt.Errorf("tool name %q: must start with a letter and hold at most 64 letters, digits, '_' or '-'", text.Clip(s.Name, 100))
	}
	if n := len(s.Description); n > MaxDescriptionBytes {
		return fmt.Errorf("tool %s: its description has %d bytes, more than the %d a tool may declare (tool.MaxDescriptionBytes): every run records its tools' specs", s.Name, n, MaxDescriptionBytes)
	}
	if n := len(s.Schema); n > MaxSchemaBytes {
		return fmt.Errorf("tool %s: its schema has %d bytes, more than the %d a tool may declare (tool.MaxSchemaBytes): every run records its tools' specs", s.Name, n, MaxSchemaBytes)
	}
	if s.Retry.MaxAttempts < 0 || s.Retry.MaxAttempts > MaxMaxAttempts {
		return fmt.Errorf("tool %s: retry.max_attempts %d is outside 0..%d", s.Name, s.Retry.MaxAttempts, MaxMaxAttempts)
	}
	if s.Timeout < 0 || s.Retry.InitialInterval < 0 {
		return fmt.Errorf("tool %s: negative timeout or retry interval", s.Name)
	}
	if s.Fallback == s.Name {
		return fmt.Errorf("tool %s: a tool cannot be its own fallback", s.Name)
	}
	if len(s.Schema) > 0 && !json.Valid(s.Schema) {
		return fmt.Errorf("tool %s: schema is not valid JSON", s.Name)
	}
	return s.validateRemote()
}

// validateRemote checks a remote tool's task queue and activity type.
func (s Spec) validateRemote() error {
	switch {
	case s.TaskQueue == "" && s.Activity != "":
		return fmt.Errorf("tool %s: activity %q names the activity another worker hosts it as, but task_queue is empty", s.Name, text.Clip(s.Activity, 100))
	case s.TaskQueue == "":
		return nil
	case s.Local:
		return fmt.Errorf("tool %s: a tool hosted on task queue %q cannot be local (a local activity runs in this worker)", s.Name, text.Clip(s.TaskQueue, 100))
	}
	for _, f := range [...]struct{ field, v string }{{"task_queue", s.TaskQueue}, {"activity", s.Activity}} {
		field, v := f.field, f.v
		if v == "" {
			continue
		}
		if len(v) > MaxTaskQueueBytes || !queuePattern.MatchString(v) {
			return fmt.Errorf("tool %s: %s %q: at most %d bytes of letters, digits and _ . : / @ -, starting with a letter or digit",
				s.Name, field, text.Clip(v, 100), MaxTaskQueueBytes)
		}
	}
	return nil
}

// Attempts is the spec's bounded number of attempts.
func (s Spec) Attempts() int32 {
	if s.Retry.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return s.Retry.MaxAttempts
}

// AttemptTimeout is the spec's start-to-close timeout for one attempt.
func (s Spec) AttemptTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// RetryInterval is the spec's wait before the first retry.
func (s Spec) RetryInterval() time.Duration {
	if s.Retry.InitialInterval <= 0 {
		return DefaultInitialInterval
	}
	return s.Retry.InitialInterval
}
