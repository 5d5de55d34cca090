package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// TestProvisionalVerdictsOnSecondsSoFar runs a real drill whose latency
// bound over a manual fault's window breaks once an operator starts the
// fault: the console judges it (and the run's error rate and throughput)
// on the seconds closed so far, marked provisional, before the run ends,
// and the run's end agrees. A run that comes back INVALID is run once
// more, then fails the test (needs.ValidRun): its final verdicts could not
// be checked.
func TestProvisionalVerdictsOnSecondsSoFar(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 20 s drill")
	}
	needs.ValidRun(t, func(int) (struct{}, string) { return struct{}{}, provisionalVerdicts(t) })
}

// provisionalVerdicts is one run of TestProvisionalVerdictsOnSecondsSoFar.
// It returns why the run was INVALID (exit 4), "" when it was valid.
func provisionalVerdicts(t *testing.T) (invalid string) {
	t.Helper()
	d := startDrill(t, "provisional.yaml", Options{})
	tok := d.srv.Token()
	ev := d.events(t)
	byName := func(list []control.Provisional) map[string]control.Provisional {
		out := map[string]control.Provisional{}
		for _, a := range list {
			out[a.Name] = a
		}
		return out
	}
	// assertions waits for an "assertions" message that ok accepts.
	assertions := func(what string, limit time.Duration, ok func(map[string]control.Provisional) bool) map[string]control.Provisional {
		t.Helper()
		var got map[string]control.Provisional
		ev.waitFor(t, what, limit, func(m sseMsg) bool {
			if m.name != "assertions" {
				return false
			}
			var list []control.Provisional
			if err := json.Unmarshal(m.data, &list); err != nil {
				t.Fatalf("assertions message: %v: %s", err, m.data)
			}
			got = byName(list)
			return ok(got)
		})
		return got
	}

	// Before the operator starts the fault its window has not begun; the
	// run's window is judged on its closed seconds.
	before := assertions("the run's error rate passing so far", 60*time.Second, func(a map[string]control.Provisional) bool {
		return a["no-errors"].Verdict == "pass"
	})
	for name, a := range before {
		if !a.Provisional {
			t.Errorf("%s: not marked provisional: %+v", name, a)
		}
	}
	if a := before["slow-p50"]; a.Verdict != "pending" || a.Message != "window not started" {
		t.Errorf("slow-p50 before its fault started: %+v; want pending, window not started", a)
	}
	if a := before["no-errors"]; a.Through <= 0 || a.Figure == "" {
		t.Errorf("no-errors: %+v; want a figure and the end of the seconds judged", a)
	}

	if code, body := d.do(t, http.MethodPost, "/api/faults/slow/start", tok, nil); code != http.StatusOK {
		t.Fatalf("start slow: %d %s", code, body)
	}
	on := ev.waitFor(t, "fault-on of slow", 10*time.Second, isEvent(event.FaultOn, "slow"))
	var onAt time.Duration
	if on.name == "event" {
		var e event.Event
		if err := json.Unmarshal(on.data, &e); err != nil {
			t.Fatal(err)
		}
		onAt = e.At
	}
	during := assertions("slow-p50 failing on the fault's seconds so far", 40*time.Second, func(a map[string]control.Provisional) bool {
		return a["slow-p50"].Verdict == "fail"
	})
	if a := during["slow-p50"]; !a.Provisional || a.Through <= onAt || a.Bound == "" {
		t.Errorf("slow-p50 during the fault: %+v; want provisional, judged past the fault's start %s", a, onAt)
	}
	if code, body := d.do(t, http.MethodGet, "/api/state", tok, nil); code == http.StatusOK {
		var st StateResponse
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("GET /api/state: %v", err)
		}
		if a := byName(st.Assertions)["slow-p50"]; a.Verdict != "fail" || !a.Provisional {
			t.Errorf("GET /api/state: slow-p50 %+v; want a provisional fail", a)
		}
	} else {
		t.Fatalf("GET /api/state: %d %s", code, body)
	}
	if code, body := d.do(t, http.MethodPost, "/api/faults/slow/end", tok, nil); code != http.StatusOK {
		t.Fatalf("end slow: %d %s", code, body)
	}

	o := d.wait(t)
	switch o.res.Code {
	case exitcode.AssertionFailed:
	case exitcode.InvalidMeasurement:
		if o.res.Record != nil && !o.res.Record.Validity.Valid() {
			return o.res.Record.Validity.Summary()
		}
		return fmt.Sprintf("exit 4: %v", o.err)
	default:
		t.Fatalf("exit %d, want 1 (slow-p50 fails): %v", o.res.Code, o.err)
	}
	if o.res.Record == nil {
		t.Fatal("no record")
	}
	for _, a := range o.res.Record.Results {
		want := map[string]string{"slow-p50": "fail", "no-errors": "pass", "keeps-up": "pass"}[a.Name]
		if string(a.Verdict) != want {
			t.Errorf("final %s: %s (%s), want %s", a.Name, a.Verdict, a.Message, want)
		}
	}
	return ""
}
