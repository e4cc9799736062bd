package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// Fifty runs wait at the gate at once, each for its own booking; they are
// approved in a random order, half by signal and half by update, and each
// approval reaches its own run only: every run books its own guest under its
// own approver, and the desk holds exactly fifty new bookings, one per run.
func TestFiftyConcurrentRunsEachApprovedInRandomOrder(t *testing.T) {
	t.Parallel()
	const n = 50
	s := newStack(t)
	s.startWorker(false)
	db := s.openDB()
	var seeded int
	if err := db.QueryRow(`SELECT COUNT(*) FROM bookings`).Scan(&seeded); err != nil {
		t.Fatal(err)
	}

	runID := func(i int) string { return fmt.Sprintf("fifty-%02d", i) }
	guest := func(i int) string { return fmt.Sprintf("guest-%d", i) }
	approver := func(i int) string { return fmt.Sprintf("op-%d", i) }

	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			args := fmt.Sprintf(`{"guest":%q,"hotel":"Hotel %d","nights":1}`, guest(i), i)
			in := workflows.RunInput{Goal: "book a stay for " + guest(i),
				Planner: scripted("booked "+guest(i), step(call("book_hotel", args)))}
			_, errs[i] = s.tg.Start(ctx, runID(i), in)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starting %s: %v", runID(i), err)
		}
	}

	// Wait until every run waits for its approval; keep each one's interrupt.
	interrupts := make([]workflows.Interrupt, n)
	testenv.Eventually(t, 60*time.Second, "all 50 runs waiting_for_approval", func() error {
		var waiting int
		var last error
		for i := range n {
			if interrupts[i].ArgsDigest != "" {
				waiting++
				continue
			}
			st, err := s.state(runID(i))
			if err != nil {
				last = fmt.Errorf("%s: %w", runID(i), err)
				continue
			}
			if st.Status == workflows.StatusWaitingForApproval && len(st.Interrupts) == 1 {
				interrupts[i] = st.Interrupts[0]
				waiting++
			}
		}
		if waiting < n {
			return fmt.Errorf("%d of %d waiting (last error: %v)", waiting, n, last)
		}
		return nil
	})
	t.Logf("50 runs started and waiting after %v", time.Since(began).Round(time.Millisecond))
	for i, it := range interrupts {
		want := fmt.Sprintf(`{"guest":%q,"hotel":"Hotel %d","nights":1}`, guest(i), i)
		if it.CallID != "c-1" || it.Tool != "book_hotel" || string(it.CallArgs) != want {
			t.Fatalf("%s waits for %s %s %s, want c-1 book_hotel %s", runID(i), it.CallID, it.Tool, it.CallArgs, want)
		}
	}
	if interrupts[0].ArgsDigest == interrupts[1].ArgsDigest {
		t.Fatalf("runs 0 and 1 have the same args_digest %s for different arguments", interrupts[0].ArgsDigest)
	}

	// An approval bound to run 1's arguments cannot approve run 0's call:
	// refused synchronously as an update, refused and recorded as a signal.
	wrong := workflows.DecisionInput{CallID: "c-1", Approver: "mallory", ArgsDigest: interrupts[1].ArgsDigest}
	if dec, err := s.approveByUpdate(runID(0), wrong); err == nil || !strings.Contains(err.Error(), "args_digest") {
		t.Fatalf("approving run 0 with run 1's digest by update: %+v, %v; want refused for the digest", dec, err)
	}
	s.signal(runID(0), workflows.SignalApprove, wrong)
	testenv.Eventually(t, waitTimeout, "run 0 recording the refused signal", func() error {
		st, err := s.state(runID(0))
		if err != nil {
			return err
		}
		if len(st.Refused) != 1 || !strings.Contains(st.Refused[0].Error, "args_digest") {
			return fmt.Errorf("refused %+v", st.Refused)
		}
		if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 {
			return fmt.Errorf("run 0 no longer waits: %+v", st)
		}
		return nil
	})

	seed := uint64(time.Now().UnixNano())
	t.Logf("approval order seed: %d", seed)
	order := rand.New(rand.NewPCG(seed, 0x70016a7e)).Perm(n)
	bySignal := map[int]bool{}
	for k, i := range order {
		in := workflows.DecisionInput{CallID: "c-1", Approver: approver(i), ArgsDigest: interrupts[i].ArgsDigest}
		if k%2 == 0 {
			bySignal[i] = true
			s.signal(runID(i), workflows.SignalApprove, in)
			continue
		}
		dec, err := s.approveByUpdate(runID(i), in)
		if err != nil || dec.Decision != workflows.TraceApproved || dec.Approver != approver(i) {
			t.Fatalf("approving %s by update: %+v, %v", runID(i), dec, err)
		}
	}

	for i := range n {
		res := s.result(runID(i), 60*time.Second)
		how := map[bool]string{true: "signal", false: "update"}[bySignal[i]]
		if res.Status != workflows.StatusCompleted {
			t.Fatalf("%s (approved by %s): %+v, want completed", runID(i), how, res)
		}
		checkEvents(t, runID(i)+" trace", res.Trace,
			event{"c-1", "book_hotel", workflows.TraceBlocked},
			event{"c-1", "book_hotel", workflows.TraceApproved},
			event{"c-1", "book_hotel", workflows.TraceOK},
		)
		ok := records(res.Trace, "c-1", workflows.TraceOK)[0]
		approved := records(res.Trace, "c-1", workflows.TraceApproved)[0]
		var b desk.Booking
		if err := json.Unmarshal(ok.Result, &b); err != nil {
			t.Fatalf("%s booking %s: %v", runID(i), ok.Result, err)
		}
		if b.Guest != guest(i) || b.Hotel != fmt.Sprintf("Hotel %d", i) || b.Duplicate ||
			approved.Approver != approver(i) || ok.Approver != approver(i) {
			t.Fatalf("%s (approved by %s): booking %s approved by %q/%q, want %s approved by %s",
				runID(i), how, ok.Result, approved.Approver, ok.Approver, guest(i), approver(i))
		}
	}

	var total int
	if err := db.QueryRow(`SELECT COUNT(*) FROM bookings`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != seeded+n {
		t.Fatalf("%d bookings, want %d seeded + %d new", total, seeded, n)
	}
	for i := range n {
		var count int
		var g, by string
		err := db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(guest), ''), COALESCE(MAX(approved_by), '') FROM bookings WHERE idem_key = ?`,
			s.key(runID(i), "c-1")).Scan(&count, &g, &by)
		if err != nil {
			t.Fatal(err)
		}
		if count != 1 || g != guest(i) || by != approver(i) {
			t.Fatalf("bookings under %s/c-1: %d (guest %q, approved by %q), want one for %s approved by %s",
				runID(i), count, g, by, guest(i), approver(i))
		}
	}
}
