package history

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

// sameNights fails t unless got and want summarise the same runs the same
// way (start times compared as instants).
func sameNights(t *testing.T, got, want []Night) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d nights, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.StartedAt.Equal(w.StartedAt) {
			t.Errorf("night %d started %s, want %s", i, g.StartedAt, w.StartedAt)
		}
		g.StartedAt = w.StartedAt
		if !reflect.DeepEqual(g, w) {
			t.Errorf("night %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
}

// TestSummaryFiles: Load with WriteSummaries (or WriteSummary) leaves a
// summary beside each run.json, read in preference the next time with
// the same nights as loading every record; a summary that is stale (its
// run.json re-judged in place), damaged, of another version or
// unwritable is not used (and rewritten with WriteSummaries); Load
// without WriteSummaries writes none.
func TestSummaryFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, 3, nil)
	night := func(i int) string {
		return filepath.Join(dir, "payment-tax-brownout-2026010"+string(rune('1'+i))+"T020000Z", "run.json")
	}
	fromRecords, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := os.Stat(SummaryPath(night(i))); err == nil {
			t.Fatalf("Load without WriteSummaries wrote %s", SummaryPath(night(i)))
		}
	}
	if _, err := Load([]string{dir}, Options{WriteSummaries: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !strings.HasSuffix(SummaryPath(night(i)), filepath.Join("payment-tax-brownout-2026010"+string(rune('1'+i))+"T020000Z", "run.summary.json")) {
			t.Fatalf("summary path %s", SummaryPath(night(i)))
		}
		if _, err := os.Stat(SummaryPath(night(i))); err != nil {
			t.Fatalf("no summary written: %v", err)
		}
	}
	fromSummaries, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameNights(t, fromSummaries, fromRecords)

	// The summary is what is read: a value planted in it comes back.
	plant := func(t *testing.T, path string, edit func(*summaryFile)) {
		t.Helper()
		b, err := os.ReadFile(SummaryPath(path))
		if err != nil {
			t.Fatal(err)
		}
		var sf summaryFile
		if err := json.Unmarshal(b, &sf); err != nil {
			t.Fatal(err)
		}
		edit(&sf)
		if b, err = json.Marshal(sf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(SummaryPath(path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant(t, night(0), func(sf *summaryFile) { sf.Night.Why = "planted" })
	ns, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ns[0].Why != "planted" {
		t.Fatalf("night 1's summary file was not read (why %q)", ns[0].Why)
	}

	// WriteSummary, as a run.json's writer would call it.
	os.Remove(SummaryPath(night(1)))
	b, err := os.ReadFile(night(1))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := record.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(night(1), b, r1); err != nil {
		t.Fatal(err)
	}
	plant(t, night(1), func(sf *summaryFile) { sf.Night.Why = "planted" })
	if ns, err = Load([]string{dir}, Options{}); err != nil || ns[1].Why != "planted" {
		t.Fatalf("the summary WriteSummary wrote was not read: %v", err)
	}
	if err := WriteSummary(night(1), b, r1); err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(filepath.Join(dir, "no", "such", "run.json"), b, r1); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "no", "such", "run.summary.json")) {
		t.Errorf("unwritable summary: error %v, want one naming the file", err)
	}

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"other version", func(t *testing.T, p string) {
			plant(t, p, func(sf *summaryFile) { sf.Version = "drill.dev/history-summary/v0"; sf.Night.Why = "planted" })
		}},
		{"other run.json", func(t *testing.T, p string) {
			plant(t, p, func(sf *summaryFile) { sf.RunSHA256 = strings.Repeat("0", 64); sf.Night.Why = "planted" })
		}},
		{"truncated", func(_ *testing.T, p string) {
			b, _ := os.ReadFile(SummaryPath(p))
			os.WriteFile(SummaryPath(p), b[:len(b)/2], 0o644)
		}},
		{"not JSON", func(_ *testing.T, p string) { os.WriteFile(SummaryPath(p), []byte("garbage"), 0o644) }},
		{"a directory", func(_ *testing.T, p string) { os.Remove(SummaryPath(p)); os.Mkdir(SummaryPath(p), 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load([]string{dir}, Options{WriteSummaries: true}); err != nil { // a current summary to damage
				t.Fatal(err)
			}
			tc.damage(t, night(0))
			ns, err := Load([]string{dir}, Options{WriteSummaries: true})
			if err != nil {
				t.Fatal(err)
			}
			sameNights(t, ns, fromRecords)
			if st, err := os.Stat(SummaryPath(night(0))); err == nil && !st.IsDir() {
				if n, ok := readSummary(night(0), mustSHA(t, night(0))); !ok || n.Why == "planted" {
					t.Errorf("summary not rewritten: %+v %v", n, ok)
				}
			}
			os.RemoveAll(SummaryPath(night(0)))
		})
	}

	// Night 3 re-judged in place with a tighter bound: its old summary
	// is stale and the new verdict shows.
	r, err := record.Load(night(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.OverrideAssertion(r.Scenario.Assertions, "auth-p99-during-brownout.maxLatency=10ms"); err != nil {
		t.Fatal(err)
	}
	r.Rejudge()
	if err := r.Save(night(2)); err != nil {
		t.Fatal(err)
	}
	ns, err = Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{SectionAssertion, "auth-p99-during-brownout", "fault:tax-brownout", "figure"}
	if p, ok := ns[2].Figures[k]; !ok || p.Verdict != "fail" || ns[2].ExitCode != 1 {
		t.Fatalf("re-judged night 3: %s = %+v, exit %d; want fail, exit 1 (stale summary used?)", k, p, ns[2].ExitCode)
	}
}

func mustSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha(b)
}
