// Command record regenerates the recorded history of the model-driven seed
// walk-through, testsuite/model/testdata/model_walkthrough.json.
//
// It starts an embedded Temporal server and a toolgate worker in a temporary
// directory, plays the walk-through with the fake model of
// model.SeedScript behind the OpenAI planner (no real model is ever asked),
// rejects the close of TKT-3 and writes the closed run's history in the
// JSON form of `temporal workflow show --output json`. Run it from the
// module's root:
//
//	go run ./testsuite/model/record
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgate/toolgate/testsuite/model"
	"github.com/toolgate/toolgate/workflows"
)

func main() {
	out := flag.String("out", filepath.Join("testsuite", "model", filepath.FromSlash(model.RecordedHistory)),
		"where to write the history")
	flag.Parse()
	if err := record(*out); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func record(out string) error {
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a directory: run this from the module's root, or pass -out", filepath.Dir(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	fake := model.NewFake(model.SeedScript())
	fake.Key = model.APIKey
	defer fake.Close()

	dir, err := os.MkdirTemp("", "toolgate-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := model.StartEnv(ctx, dir, model.PlannerOptions(fake))
	if err != nil {
		return err
	}
	defer env.Close()

	w, err := model.RunWalkThrough(ctx, env, model.WalkThroughID, nil)
	if err != nil {
		return fmt.Errorf("%w (fake model: %d requests, problems %q)", err, len(fake.Requests()), fake.Problems())
	}

	// Record only a walk-through that went as it should.
	var problems []string
	if p := fake.Problems(); len(p) > 0 {
		problems = append(problems, fmt.Sprintf("the fake model found problems: %q", p))
	}
	if n := len(fake.Requests()); n != 4 {
		problems = append(problems, fmt.Sprintf("the fake model got %d requests, want 4", n))
	}
	if w.Result.Status != workflows.StatusCompleted || !strings.Contains(w.Result.Answer, model.RejectReason) {
		problems = append(problems, fmt.Sprintf("the run ended %s with answer %q", w.Result.Status, w.Result.Answer))
	}
	if leak, err := model.HistoryContains(w.History, model.APIKey); err != nil || leak {
		problems = append(problems, fmt.Sprintf("the API key is in the history (%v)", err))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}

	b, err := model.MarshalHistory(w.History)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d events, answer %q\n", out, len(w.History.Events), w.Result.Answer)
	return nil
}
