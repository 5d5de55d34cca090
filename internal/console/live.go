package console

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/event"
)

// Bounds that keep the console's memory flat however long the run.
const (
	// maxPoints is how many one-second points a series keeps (1 h).
	maxPoints = 3600
	// maxEvents is how many timeline events the console keeps (newest).
	maxEvents = 2000
	// subscriberBuffer is the messages a viewer may lag behind before it
	// is dropped (its page reconnects and reloads the state).
	subscriberBuffer = 512
	// provisionalEvery is how often, in seconds, assertions are judged on
	// the data so far.
	provisionalEvery = 3
)

// Point is one second of the run as the plots draw it.
type Point struct {
	// T is the offset on the run's clock, in seconds.
	T       float64                 `json:"t"`
	Streams map[string]StreamPoint  `json:"streams,omitempty"`
	Ready   map[string]ServicePoint `json:"ready,omitempty"`
}

// StreamPoint is one stream's figures in a second: latencies in
// milliseconds, rates in requests per second.
type StreamPoint struct {
	P50      float64 `json:"p50"`
	P99      float64 `json:"p99"`
	Intended float64 `json:"intended"`
	Done     float64 `json:"completed"`
	Failed   float64 `json:"failed"`
	Shed     float64 `json:"shed"`
}

// ServicePoint is a service's ready replicas out of all.
type ServicePoint struct {
	Ready    int `json:"ready"`
	Replicas int `json:"replicas"`
}

// liveState is what the console keeps of the run: the newest state, the
// last maxPoints points and the last maxEvents timeline events.
type liveState struct {
	mu    sync.Mutex
	state *control.State
	// provisional are the assertions judged on the data so far.
	provisional []control.Provisional
	points      []Point
	events      []SeqEvent
	// seq numbers the kept events from 1.
	seq int64
}

// SeqEvent is a timeline event numbered in the order the console kept it,
// so that a viewer drops an event it already had from GET /api/state or
// the stream's hello.
type SeqEvent struct {
	Seq int64 `json:"seq"`
	event.Event
}

func newLiveState() *liveState { return &liveState{} }

func (l *liveState) setState(st control.State) Point {
	p := Point{T: st.Now.Seconds(), Streams: map[string]StreamPoint{}, Ready: map[string]ServicePoint{}}
	for _, s := range st.Streams {
		p.Streams[s.Name] = StreamPoint{
			P50: ms(s.P50), P99: ms(s.P99), Intended: s.IntendedRate,
			Done: s.AchievedRate, Failed: s.FailedRate, Shed: s.ShedRate,
		}
	}
	for _, s := range st.Services {
		p.Ready[s.Name] = ServicePoint{Ready: s.Ready, Replicas: s.Replicas}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = &st
	if len(l.points) >= maxPoints {
		// Shift in place: the backing array never grows past maxPoints.
		copy(l.points, l.points[1:])
		l.points = l.points[:len(l.points)-1]
	}
	l.points = append(l.points, p)
	return p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// keep reports whether an event belongs on the console's timeline: not
// metric samples nor passing probes (run.json has every event).
func keep(e event.Event) bool {
	return e.Kind != event.Metric && !(e.Kind == event.ProbeResult && e.OK)
}

func (l *liveState) addEvent(e event.Event) SeqEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) >= maxEvents {
		copy(l.events, l.events[1:])
		l.events = l.events[:len(l.events)-1]
	}
	l.seq++
	se := SeqEvent{Seq: l.seq, Event: e}
	l.events = append(l.events, se)
	return se
}

// snapshot returns the state, the points and the kept events with the
// number of the last one.
func (l *liveState) snapshot() (*control.State, []Point, []SeqEvent, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, append([]Point(nil), l.points...), append([]SeqEvent(nil), l.events...), l.seq
}

// follow samples the run's state every second and relays its events to
// the viewers until ctx ends or the timeline stops (one last state then).
func (s *Server) follow(ctx context.Context, c *control.Control) {
	ch := make(chan event.Event, 4096)
	for _, e := range c.Follow(ch) {
		if keep(e) {
			s.live.addEvent(e)
		}
	}
	ticks := 0
	sample := func() {
		st := c.State()
		p := s.live.setState(st)
		s.hub.publish("state", st)
		s.hub.publish("point", p)
		// Judging reads the whole event log: every provisionalEvery seconds.
		if ticks%provisionalEvery == 0 || !st.Running {
			pr := c.Provisional()
			s.live.mu.Lock()
			s.live.provisional = pr
			s.live.mu.Unlock()
			s.hub.publish("assertions", pr)
		}
		ticks++
	}
	sample()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	done := c.Done()
	for {
		select {
		case <-ctx.Done():
			sample()
			return
		case <-done:
			done = nil // once: the final state, then events until Finish
			sample()
		case <-tick.C:
			if done != nil {
				sample()
			}
		case e := <-ch:
			if !keep(e) {
				continue
			}
			// The state first: whoever sees the event finds the state
			// that follows it; every page shows the same fault state.
			if e.Kind == event.Operator || e.Kind == event.FaultOn || e.Kind == event.FaultOff {
				s.refresh(c)
			}
			s.hub.publish("event", s.live.addEvent(e))
		}
	}
}

// message is one Server-Sent Event, encoded.
type message []byte

// hub fans messages out to the viewers' event streams. A viewer that
// falls subscriberBuffer messages behind is dropped.
type hub struct {
	mu     sync.Mutex
	subs   map[chan message]struct{}
	closed bool
}

func newHub() *hub { return &hub{subs: map[chan message]struct{}{}} }

func encode(name string, v any) message {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"unencodable"}`)
	}
	out := make([]byte, 0, len(b)+len(name)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// publish sends one event named name with v as JSON data to every viewer.
func (h *hub) publish(name string, v any) {
	m := encode(name, v)
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- m:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns a channel of messages, closed when the viewer is
// dropped or the hub closes; ok is false once the hub is closed.
func (h *hub) subscribe() (ch chan message, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	ch = make(chan message, subscriberBuffer)
	h.subs[ch] = struct{}{}
	return ch, true
}

func (h *hub) unsubscribe(ch chan message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

// refresh takes the run's state now, keeps it and sends it to the viewers.
func (s *Server) refresh(c *control.Control) control.State {
	st := c.State()
	s.live.mu.Lock()
	s.live.state = &st
	s.live.mu.Unlock()
	s.hub.publish("state", st)
	return st
}
