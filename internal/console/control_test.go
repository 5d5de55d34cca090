package console

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
)

// TestConsoleHoldStartStopAbort drives a real drill through the API: it
// holds a scheduled fault past its end and releases it, starts and ends a
// manual fault (two operators ending it at once: one wins, one gets 409),
// stops the load and aborts; run.json must show the fault windows where
// the operators put them and cleanup verified.
func TestConsoleHoldStartStopAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a drill")
	}
	d := startDrill(t, "manual.yaml", Options{})
	tok := d.srv.Token()
	post := func(path string, want int) {
		t.Helper()
		if code, body := d.do(t, http.MethodPost, path, tok, nil); code != want {
			t.Fatalf("POST %s: %d %s; want %d", path, code, body, want)
		}
	}
	ev := d.events(t)
	ev.waitFor(t, "fault-on of held", 60*time.Second, isEvent(event.FaultOn, "held"))
	post("/api/faults/held/hold", http.StatusOK)
	post("/api/faults/held/hold", http.StatusConflict)
	post("/api/faults/by-hand/end", http.StatusConflict) // not started
	post("/api/faults/by-hand/hold", http.StatusConflict)

	// Past the scheduled end (2 s + 3 s) the held fault is still on.
	var st StateResponse
	ev.waitFor(t, "t past 5.5 s", 30*time.Second, func(m sseMsg) bool {
		return m.name == "state" && json.Unmarshal(m.data, &st.Run) == nil && st.Run.Now > 5500*time.Millisecond
	})
	code, body := d.do(t, http.MethodGet, "/api/state", tok, nil)
	if code != http.StatusOK || json.Unmarshal(body, &st) != nil || st.Run.Faults[0].State != "held" {
		t.Fatalf("state past the held fault's end: %d %s", code, body)
	}
	post("/api/faults/held/release", http.StatusOK)
	ev.waitFor(t, "fault-off of held", 10*time.Second, isEvent(event.FaultOff, "held"))

	post("/api/faults/by-hand/start", http.StatusOK)
	post("/api/faults/by-hand/start", http.StatusConflict)
	ev.waitFor(t, "fault-on of by-hand", 10*time.Second, isEvent(event.FaultOn, "by-hand"))
	time.Sleep(1500 * time.Millisecond) // a measurable window

	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, d.url("/api/faults/by-hand/end"), nil)
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // codes[i] stays 0: reported below
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	if !(codes[0] == http.StatusOK && codes[1] == http.StatusConflict || codes[0] == http.StatusConflict && codes[1] == http.StatusOK) {
		t.Errorf("two operators ending one fault at once: %v, want one 200 and one 409", codes)
	}
	ev.waitFor(t, "fault-off of by-hand", 10*time.Second, isEvent(event.FaultOff, "by-hand"))

	// A manual start with a fixed length ends on its own.
	post("/api/faults/timed/start", http.StatusOK)
	ev.waitFor(t, "fault-off of timed", 15*time.Second, isEvent(event.FaultOff, "timed"))

	post("/api/stop", http.StatusOK)
	post("/api/stop", http.StatusConflict)
	post("/api/abort", http.StatusOK)
	o := d.wait(t)
	if o.res.Code != exitcode.CouldNotRun {
		t.Errorf("an aborted run exits %d (%v), want 3", o.res.Code, o.err)
	}
	post("/api/abort", http.StatusConflict)

	rec, err := record.Load(filepath.Join(d.outDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Cleanup.Verified {
		t.Errorf("cleanup not verified: %+v", rec.Cleanup)
	}
	on, off := map[string]time.Duration{}, map[string]time.Duration{}
	var actions []string
	for _, e := range rec.Events {
		switch e.Kind {
		case event.FaultOn:
			on[e.Fault] = e.At
		case event.FaultOff:
			off[e.Fault] = e.At
		case event.Operator:
			actions = append(actions, e.Reason+" "+e.Fault)
		}
	}
	want := []string{"hold held", "release held", "start by-hand", "end by-hand", "start timed", "stop ", "abort "}
	if len(actions) != len(want) {
		t.Errorf("operator events %q, want %q", actions, want)
	} else {
		for i := range want {
			if actions[i] != want[i] {
				t.Errorf("operator events %q, want %q", actions, want)
				break
			}
		}
	}
	if off["held"] < 5500*time.Millisecond {
		t.Errorf("held fault off at %s, before its release past 5.5 s", off["held"])
	}
	if d := off["timed"] - on["timed"]; d < time.Second || d > 2*time.Second {
		t.Errorf("timed fault on for %s, want its for: 1s", d)
	}
	for _, f := range []string{"held", "by-hand", "timed"} {
		w, ok := rec.Plan.Window("fault:" + f)
		if !ok || w.Start != on[f] || w.End != off[f] {
			t.Errorf("window fault:%s = [%s, %s), want the actual [%s, %s)", f, w.Start, w.End, on[f], off[f])
		}
	}
}
