package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
)

// TestRecoverKilledRun: the journal of the synthetic run as a run killed
// at t=40 s leaves it (header, events and seconds before 40 s, a line cut
// in the middle) is rebuilt into an aborted record (exit 3): the seconds
// that exist are there, windows that ended before the kill are judged as
// in the full run, the ones that did not are aborted, and findings are
// computed.
func TestRecoverKilledRun(t *testing.T) {
	const killAt = 40 * time.Second
	full := recordtest.Run(recordtest.Options{Scale: 10})
	dir := t.TempDir()
	head := *full
	j, err := record.StartJournal(dir, &head)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range full.Events {
		if e.At < killAt && e.Detail != assert.LoadEndDetail {
			if err := record.JournalEvents(j, full, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for sec := time.Duration(0); sec < killAt; sec += time.Second {
		for _, name := range []string{"card-auth", "tax"} {
			for _, b := range full.Series[name].Buckets {
				if b.Start == sec {
					if err := j.WriteSecond(name, b); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	j.Close()
	f, err := os.OpenFile(filepath.Join(dir, record.JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"kind":"second","stream":"tax","bucket":{"start":4000`)
	f.Close()

	r, err := record.Recover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.Rejudge(); code != record.ExitCouldNotRun {
		_, why := r.Decide()
		t.Fatalf("exit %d (%s), want %d", code, why, record.ExitCouldNotRun)
	}
	if !r.Recovered || !strings.Contains(r.Aborted, "80 measured seconds") || r.Cleanup.Verified || !strings.Contains(r.Cleanup.Command, full.RunID) {
		t.Fatalf("recovered record: recovered=%v aborted=%q cleanup=%+v", r.Recovered, r.Aborted, r.Cleanup)
	}
	if _, why := r.Decide(); !strings.Contains(why, "drill cleanup --run "+full.RunID) {
		t.Fatalf("reason %q does not say how to clean up", why)
	}
	for _, name := range []string{"card-auth", "tax"} {
		s := r.Series[name]
		if s == nil || len(s.Buckets) != int(killAt/time.Second) {
			t.Fatalf("stream %s: %v seconds recovered, want %d", name, s, killAt/time.Second)
		}
		want := full.Series[name].Window(0, killAt)
		if got := s.Window(0, killAt); got.Requests != want.Requests || got.Failures() != want.Failures() || got.Quantile(99) != want.Quantile(99) {
			t.Fatalf("stream %s: recovered %v, want %v", name, got, want)
		}
	}
	if r.Scenario == nil || r.Plan == nil || r.Scenario.Metadata.Name != full.Scenario.Metadata.Name {
		t.Fatal("header lost: no scenario or plan")
	}
	fullBy := map[string]assert.Result{}
	for _, res := range full.Results {
		fullBy[res.Name] = res
	}
	windows := map[string]plan.Window{}
	for _, w := range r.Plan.Windows {
		windows[w.Name] = w
	}
	var judged, aborted int
	for _, res := range r.Results {
		w, ok := windows[res.Window]
		if !ok {
			continue
		}
		if w.End > killAt {
			aborted++
			if res.Verdict != assert.Aborted {
				t.Errorf("%s (window %s ends at %s, after the kill): verdict %s, want aborted", res.Name, res.Window, w.End, res.Verdict)
			}
			continue
		}
		judged++
		if want := fullBy[res.Name].Verdict; res.Verdict != want {
			t.Errorf("%s (window %s): verdict %s, the full run's %s", res.Name, res.Window, res.Verdict, want)
		}
	}
	if judged == 0 || aborted == 0 {
		t.Fatalf("%d assertions judged and %d aborted: the fixture should have both", judged, aborted)
	}
	if len(r.Findings) == 0 {
		t.Fatal("no findings computed")
	}
	// What drill report writes back reads as the same aborted run.
	path := filepath.Join(dir, "run.json")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	again, err := record.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if code := again.Rejudge(); code != record.ExitCouldNotRun || len(again.Series["tax"].Buckets) != 40 {
		t.Fatalf("saved recovered run: exit %d, %d tax seconds", code, len(again.Series["tax"].Buckets))
	}
}

// TestRecoverWithoutJournal: a directory without a journal is an error
// wrapping ErrNoJournal; a journal without header is refused.
func TestRecoverWithoutJournal(t *testing.T) {
	dir := t.TempDir()
	if _, err := record.Recover(dir); !errors.Is(err, record.ErrNoJournal) {
		t.Fatalf("err = %v, want ErrNoJournal", err)
	}
	j, err := measure.CreateJournal(filepath.Join(dir, record.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	j.WriteSecond("x", measure.NewBucket(0, time.Second))
	j.Close()
	if _, err := record.Recover(dir); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Fatalf("err = %v, want no header", err)
	}
}
