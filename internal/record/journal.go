package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
)

// JournalFile is the run's journal in its report directory
// ([measure.SecondsFile]): a header line (this run's record without
// events, series or verdict: schema version, run id, scenario, plan,
// start time, environment; redacted), then, as the run goes, its events
// and each stream's closed seconds, one JSON object per line. It is what
// is left of a run killed before it wrote run.json; [Recover] rebuilds a
// record from it.
const JournalFile = measure.SecondsFile

// StartJournal creates dir/seconds.jsonl and writes r's header (r
// redacted, without events, series, results or findings) as its first
// line. Errors name the file.
func StartJournal(dir string, r *Run) (*measure.Journal, error) {
	j, err := measure.CreateJournal(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil, err
	}
	h := *Redact(r)
	if h.SchemaVersion == "" {
		h.SchemaVersion = SchemaVersion
	}
	h.Events, h.Series, h.Results, h.Findings = nil, nil, nil, nil
	if err := j.WriteData(measure.KindHeader, &h); err != nil {
		j.Close()
		return nil, fmt.Errorf("start the run journal in %s: %w", dir, err)
	}
	return j, nil
}

// JournalEvents writes events to j (redacted by r's rules) and returns the
// first error.
func JournalEvents(j *measure.Journal, r *Run, events ...event.Event) error {
	rd := r.Redactor()
	for _, e := range events {
		e.Detail = rd.Text(e.Detail)
		e.Reason = rd.Text(e.Reason)
		e.Logs = redactLines(rd, e.Logs)
		if err := j.WriteData(measure.KindEvent, e); err != nil {
			return err
		}
	}
	return nil
}

// ErrNoJournal is wrapped by [Recover] when the directory holds no journal.
var ErrNoJournal = errors.New("no run journal")

// Recover rebuilds the record of a run that ended without writing its
// run.json (killed, machine lost) from the journal in dir: its header, its
// events and every second it measured. The record is marked
// [Run.Recovered] and [Run.Aborted] (exit 3 by [Run.Decide]); the run's
// timeline is taken to have stopped at the end of the last measured
// second (a load-end event is added there unless the journal holds one),
// so windows that end later get the verdict aborted; cleanup is
// unverified, with the command that removes what the run may have left.
// Results and findings are not computed: call [Run.Rejudge].
//
// Memory: every second of the journal, its histograms packed (see
// measure.SeriesBuilder), as for judging a finished run. Errors: the
// journal is missing (wraps [ErrNoJournal]), unreadable, has no header,
// or a header of another schema.
func Recover(dir string) (*Run, error) {
	path := filepath.Join(dir, JournalFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("recover run from %s: %w: %w", dir, ErrNoJournal, err)
	}
	if err != nil {
		return nil, fmt.Errorf("recover run: %w", err)
	}
	defer f.Close()
	var (
		r    *Run
		evs  []event.Event
		sb   measure.SeriesBuilder
		secs int
	)
	err = measure.ReadJournal(f, measure.JournalReader{
		Second: func(stream string, b *measure.Bucket) error {
			sb.Add(stream, b)
			secs++
			return nil
		},
		Data: func(kind string, data json.RawMessage) error {
			switch kind {
			case measure.KindHeader:
				hr, err := Unmarshal(data)
				if err != nil {
					return err
				}
				r = hr
			case measure.KindEvent:
				var e event.Event
				if err := json.Unmarshal(data, &e); err != nil {
					return fmt.Errorf("decode event: %w", err)
				}
				evs = append(evs, e)
			}
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("recover run from %s: %w", path, err)
	}
	if r == nil {
		return nil, fmt.Errorf("recover run from %s: the journal has no header", path)
	}
	r.Series = sb.Series()
	sort.SliceStable(evs, func(i, k int) bool { return evs[i].At < evs[k].At })
	r.Events = evs
	var measured time.Duration
	for _, s := range r.Series {
		_, to := s.Span()
		measured = max(measured, to)
	}
	hasEnd := false
	for _, e := range evs {
		hasEnd = hasEnd || (e.Kind == event.PhaseStart && e.Source == "run" && e.Detail == assert.LoadEndDetail)
	}
	if !hasEnd {
		r.Events = append(r.Events, event.Event{At: measured, Kind: event.PhaseStart, Source: "run", Detail: assert.LoadEndDetail})
	}
	r.Recovered = true
	r.EndedAt = r.StartedAt.Add(measured)
	r.Aborted = fmt.Sprintf("the run ended without writing run.json (killed?); reported from its journal %s: %d measured seconds, up to t=%s",
		JournalFile, secs, measured)
	r.Cleanup = Cleanup{Verified: false, Command: "drill cleanup --run " + r.RunID}
	if r.Plan != nil && r.Scenario != nil {
		// As the run would have: windows of faults operators touched follow
		// their actual times.
		r.Plan.FollowOperators(r.Scenario.Faults, r.Events, r.Scenario.Timeline.Recovery.D())
	}
	if r.Plan != nil {
		to := min(r.Plan.Duration, measured)
		r.Validity.LoadBehind = CheckLag(r.Scenario, r.Series, r.Plan.Warmup, to)
		r.Validity.ConnectionErrors = CheckConnectionErrors(r.Scenario, r.Series, r.Plan.Warmup, to)
		r.Validity.Problems = append(r.Validity.Problems, CheckGenerator(r.Series, r.Plan.Warmup, to, 0)...)
	}
	r.ExitCode, r.Error = ExitCouldNotRun, ""
	return r, nil
}
