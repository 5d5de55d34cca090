// Package eventtest has an event sink for tests that wait on what a part
// emitted.
package eventtest

import (
	"sync"

	"github.com/drillhq/drill/internal/event"
)

// Recorder is an [event.Sink] that keeps every event it gets, in order.
// Safe for concurrent use; the zero value is ready.
type Recorder struct {
	mu  sync.Mutex
	evs []event.Event
}

// Emit keeps e.
func (r *Recorder) Emit(e event.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

// Find returns the first event kept so far that match accepts, and
// whether there is one.
func (r *Recorder) Find(match func(event.Event) bool) (event.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if match(e) {
			return e, true
		}
	}
	return event.Event{}, false
}

// Events returns a copy of the events kept so far, in order.
func (r *Recorder) Events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.evs...)
}
