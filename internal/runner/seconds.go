package runner

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
)

// runJournal is the run's journal (record.JournalFile in its report
// directory): the load engine appends each closed second to it, and a
// goroutine every event, so a run killed at any point leaves what it
// measured for `drill report DIR`. It is started at t=0; the engine holds
// it from before then, so WriteSecond fails until it has started (no
// second closes before load starts).
type runJournal struct {
	mu   sync.Mutex
	j    *measure.Journal
	head *record.Run // for the redaction rules of events
	path string
	// tap, when set, also receives every closed second (the console's
	// live aggregates); it must not keep b.
	tap func(stream string, b *measure.Bucket)

	events chan event.Event
	stop   chan struct{}
	done   chan struct{}
	evErr  error
}

// WriteSecond implements load.SecondSink.
func (rj *runJournal) WriteSecond(stream string, b *measure.Bucket) error {
	if rj.tap != nil {
		rj.tap(stream, b)
	}
	rj.mu.Lock()
	j := rj.j
	rj.mu.Unlock()
	if j == nil {
		return errors.New("the run journal has not started")
	}
	return j.WriteSecond(stream, b)
}

// start creates the journal in dir with head as its header, writes the
// events logged so far and follows log from then on. Errors name the file.
func (rj *runJournal) start(dir string, head *record.Run, log *event.Log) error {
	j, err := record.StartJournal(dir, head)
	if err != nil {
		return err
	}
	rj.mu.Lock()
	rj.j, rj.head, rj.path = j, head, filepath.Join(dir, record.JournalFile)
	rj.mu.Unlock()
	rj.events = make(chan event.Event, 16384)
	rj.stop, rj.done = make(chan struct{}), make(chan struct{})
	past := log.Follow(rj.events)
	if err := record.JournalEvents(j, head, past...); err != nil {
		rj.evErr = err
	}
	go func() {
		defer close(rj.done)
		for {
			select {
			case e := <-rj.events:
				rj.writeEvent(e)
			case <-rj.stop:
				for {
					select {
					case e := <-rj.events:
						rj.writeEvent(e)
					default:
						return
					}
				}
			}
		}
	}()
	return nil
}

func (rj *runJournal) writeEvent(e event.Event) {
	if err := record.JournalEvents(rj.j, rj.head, e); err != nil && rj.evErr == nil {
		rj.evErr = err
	}
}

// finish stops following events (those already logged are written),
// reads the journal's seconds back and closes it. The series map has one
// Series per stream that measured a second. Memory: every second, with
// packed histograms (measure.SeriesBuilder: a few KB per stream-second).
// Errors: the journal was never started, an event could not be written,
// or the file cannot be read back.
func (rj *runJournal) finish() (map[string]*measure.Series, error) {
	if rj.j == nil {
		return nil, errors.New("the run journal was never started")
	}
	close(rj.stop)
	<-rj.done
	series, err := measure.LoadSeries(rj.path)
	cerr := rj.j.Close()
	if rj.evErr != nil {
		err = errors.Join(err, fmt.Errorf("journal events: %w", rj.evErr))
	}
	return series, errors.Join(err, cerr)
}
