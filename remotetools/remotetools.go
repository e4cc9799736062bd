// Package remotetools reads a tools file: tools that other workers host (a
// worker in TypeScript or Python, say), each on its own task queue. toolgate
// declares them — name, schema, destructive or not, memoized or not, retries,
// timeout, fallback — and gates, memoizes and audits them as its own; the
// worker that hosts one only runs its activity, and nothing it says changes
// how the tool is held.
//
// A file is YAML (or JSON):
//
//	tools:
//	  - name: refund_ts
//	    task_queue: toolgate-ts-tools
//	    activity: refund_ts   # the activity type; default: the name
//	    destructive: true
//	    description: Refund an order (hosted by the TypeScript worker)
//	    schema: {type: object, properties: {order: {type: string}}, required: [order]}
//	    timeout: 30s
//	    retry: {max_attempts: 3, initial_interval: 1s, non_retryable: [CardDeclined]}
//
// The activity is called with one argument, the call's tool.Request as JSON
// ({"call_id", "idempotency_key", "args", "approval"}), and returns the
// result as any JSON value; a side effect keyed by idempotency_key happens
// once, across retries and restarts.
package remotetools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolgate/toolgate/tool"
)

// MaxFileBytes bounds a tools file.
const MaxFileBytes = 1 << 20

// file is a tools file as written.
type file struct {
	Tools []entry `yaml:"tools"`
}

// entry is one tool of a tools file.
type entry struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	TaskQueue   string         `yaml:"task_queue"`
	Activity    string         `yaml:"activity"`
	Destructive bool           `yaml:"destructive"`
	Memo        *bool          `yaml:"memo"`
	Schema      map[string]any `yaml:"schema"`
	Timeout     string         `yaml:"timeout"`
	Retry       struct {
		MaxAttempts     int32    `yaml:"max_attempts"`
		InitialInterval string   `yaml:"initial_interval"`
		NonRetryable    []string `yaml:"non_retryable"`
	} `yaml:"retry"`
	Fallback    string   `yaml:"fallback"`
	Invalidates []string `yaml:"invalidates"`
}

// Load reads the tools file at path (Parse).
func Load(path string) ([]tool.Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tools file: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tools file %s: %w", path, err)
	}
	tools, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tools file %s: %w", path, err)
	}
	return tools, nil
}

// Parse reads a tools file's tools: strictly (an unknown field is refused
// with its line), each with a task queue, every error naming the tool. The
// tools have no Run: the worker of their task queue hosts them.
func Parse(data []byte) ([]tool.Tool, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("more than %d bytes", MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty: want a list of tools under the key tools")
		}
		return nil, err
	}
	if len(f.Tools) == 0 {
		return nil, errors.New("no tools: want a list of tools under the key tools")
	}
	var out []tool.Tool
	var errs []error
	seen := map[string]bool{}
	for i, e := range f.Tools {
		t, err := e.tool()
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d]: %w", i, err))
			continue
		}
		if seen[t.Spec.Name] {
			errs = append(errs, fmt.Errorf("tools[%d]: tool %s is declared twice", i, t.Spec.Name))
			continue
		}
		seen[t.Spec.Name] = true
		out = append(out, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// tool is the entry's declaration, checked.
func (e entry) tool() (tool.Tool, error) {
	name := e.Name
	if name == "" {
		name = "(no name)"
	}
	s := tool.Spec{Name: e.Name, Description: e.Description, TaskQueue: e.TaskQueue, Activity: e.Activity,
		Destructive: e.Destructive, Fallback: e.Fallback, Invalidates: e.Invalidates,
		Retry: tool.RetryPolicy{MaxAttempts: e.Retry.MaxAttempts, NonRetryable: e.Retry.NonRetryable}}
	if e.TaskQueue == "" {
		return tool.Tool{}, fmt.Errorf("tool %s: task_queue is empty: a tools file declares tools hosted by the worker of a task queue", name)
	}
	if e.Memo != nil {
		switch {
		case *e.Memo && e.Destructive:
			return tool.Tool{}, fmt.Errorf("tool %s: memo: true on a destructive tool: a destructive call is never answered from the memo", name)
		case !*e.Memo:
			s.NoMemo = true
		}
	}
	var err error
	if s.Timeout, err = duration(e.Timeout, "timeout", name); err != nil {
		return tool.Tool{}, err
	}
	if s.Retry.InitialInterval, err = duration(e.Retry.InitialInterval, "retry.initial_interval", name); err != nil {
		return tool.Tool{}, err
	}
	if e.Schema != nil {
		if s.Schema, err = json.Marshal(e.Schema); err != nil {
			return tool.Tool{}, fmt.Errorf("tool %s: schema: %w", name, err)
		}
	}
	t := tool.Tool{Spec: s}
	if err := t.Validate(); err != nil {
		return tool.Tool{}, err
	}
	return t, nil
}

// duration parses a Go duration ("30s", "2m"); "" is zero (the default).
func duration(v, field, name string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("tool %s: %s %q: want a duration such as 30s or 2m", name, field, v)
	}
	return d, nil
}
