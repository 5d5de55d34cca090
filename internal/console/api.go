package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/control"
)

// CSRFHeader must accompany a POST authorised by the cookie (the page
// sends it); a form on another site cannot set it.
const CSRFHeader = "X-Drill-Console"

// maxBody is the largest request body read, in bytes.
const maxBody = 16 << 10

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.read(s.page))
	mux.HandleFunc("GET /api/state", s.read(s.getState))
	mux.HandleFunc("GET /api/events", s.read(s.getEvents))
	mux.HandleFunc("GET /api/plots/{name}", s.read(s.getPlot))
	mux.HandleFunc("GET /report", s.read(s.getReport))
	mux.HandleFunc("POST /api/faults/{name}/{action}", s.write(s.postFault))
	mux.HandleFunc("POST /api/stop", s.write(s.postStop))
	mux.HandleFunc("POST /api/abort", s.write(s.postAbort))
	mux.HandleFunc("POST /api/annotations", s.write(s.postAnnotation))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such page or API: "+r.Method+" "+r.URL.Path)
	})
	return securityHeaders(mux)
}

// securityHeaders keeps the page from loading anything from elsewhere and
// from being framed.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// operator returns the label of the request's token and whether it came
// in the cookie ("" when there is no valid token).
func (s *Server) operator(r *http.Request) (label string, cookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if v, ok := strings.CutPrefix(h, "Bearer "); ok {
			return s.who(strings.TrimSpace(v)), false
		}
		return "", false
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return s.who(c.Value), true
	}
	return "", false
}

// read guards a GET: a token is needed unless the console is read-only
// open. GET /?token=... sets the cookie and redirects to / so that the
// token leaves the address bar.
func (s *Server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("token"); q != "" && r.URL.Path == "/" {
			if s.who(q) == "" {
				writeError(w, http.StatusUnauthorized, "wrong token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if label, _ := s.operator(r); label == "" && !s.opts.ReadonlyOpen {
			writeError(w, http.StatusUnauthorized, "no or wrong token: send Authorization: Bearer TOKEN or open the URL drill printed")
			return
		}
		h(w, r)
	}
}

// write guards a POST: a token is always needed, and a cookie's token
// needs the CSRF header too.
func (s *Server) write(h func(w http.ResponseWriter, r *http.Request, who string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		label, cookie := s.operator(r)
		if label == "" {
			writeError(w, http.StatusUnauthorized, "no or wrong token: send Authorization: Bearer TOKEN")
			return
		}
		if cookie && r.Header.Get(CSRFHeader) == "" {
			writeError(w, http.StatusForbidden, "a command sent with the console's cookie needs the "+CSRFHeader+" header")
			return
		}
		h(w, r, label)
	}
}

// errorBody is every error's JSON.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// StateResponse is GET /api/state: the run's state (absent until load
// starts), the timeline newest first, and the outcome once over.
type StateResponse struct {
	// Phase is "starting" until load starts, "running", then "over".
	Phase string         `json:"phase"`
	Run   *control.State `json:"run,omitempty"`
	// Events are the kept timeline events, newest first; Seq is the
	// number of the newest (stream "event"s numbered up to it are in Events).
	Events []SeqEvent `json:"events"`
	Seq    int64      `json:"seq"`
	// Assertions are judged on the data so far: provisional.
	Assertions []control.Provisional `json:"assertions,omitempty"`
	Final      *Final                `json:"final,omitempty"`
	// Operator is the label of the caller's token ("" when read-only).
	Operator string `json:"operator,omitempty"`
}

func (s *Server) stateResponse(r *http.Request) StateResponse {
	st, _, evs, seq := s.live.snapshot()
	slices.Reverse(evs)
	s.mu.Lock()
	final, ctl := s.final, s.ctl
	s.mu.Unlock()
	attached := ctl != nil
	if attached && final == nil {
		// A reader gets the state now, not the last second's.
		now := ctl.State()
		st = &now
	}
	s.live.mu.Lock()
	prov := s.live.provisional
	s.live.mu.Unlock()
	resp := StateResponse{Phase: "starting", Run: st, Events: evs, Seq: seq, Final: final, Assertions: prov}
	resp.Operator, _ = s.operator(r)
	switch {
	case final != nil:
		resp.Phase = "over"
	case attached:
		resp.Phase = "running"
	}
	if resp.Events == nil {
		resp.Events = []SeqEvent{}
	}
	return resp
}

func (s *Server) getState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.stateResponse(r))
}

// getEvents streams Server-Sent Events: "hello" (the state as GET
// /api/state has it), then "state" (every second and after each command),
// "point" (a second of the plots), "event" (a timeline event) and "end"
// (the outcome and the plots as the run ended).
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	ch, ok := s.hub.subscribe()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "the console is closing")
		return
	}
	defer s.hub.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(encode("hello", s.stateResponse(r))); err != nil {
		return
	}
	fl.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case m, ok := <-ch:
			if !ok {
				return
			}
			if _, err := w.Write(m); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

// control returns the live run's control, or writes 409.
func (s *Server) control(w http.ResponseWriter) *control.Control {
	s.mu.Lock()
	c := s.ctl
	s.mu.Unlock()
	if c == nil {
		writeError(w, http.StatusConflict, "load has not started yet")
	}
	return c
}

// commandResult answers a command: 200 with the new state, or the error.
func (s *Server) commandResult(w http.ResponseWriter, r *http.Request, c *control.Control, err error) {
	switch {
	case err == nil:
		s.refresh(c)
		writeJSON(w, http.StatusOK, s.stateResponse(r))
	case errors.Is(err, control.ErrUnknownFault):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, control.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, control.ErrBadCommand):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) postFault(w http.ResponseWriter, r *http.Request, who string) {
	name, action := r.PathValue("name"), r.PathValue("action")
	var do func(name, who string) error
	c := s.control(w)
	if c == nil {
		return
	}
	switch action {
	case "start":
		do = c.StartFault
	case "end":
		do = c.EndFault
	case "hold":
		do = c.HoldFault
	case "release":
		do = c.ReleaseFault
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no fault action %q (start, end, hold, release)", action))
		return
	}
	s.commandResult(w, r, c, do(name, who))
}

func (s *Server) postStop(w http.ResponseWriter, r *http.Request, who string) {
	if c := s.control(w); c != nil {
		s.commandResult(w, r, c, c.StopLoad(who))
	}
}

func (s *Server) postAbort(w http.ResponseWriter, r *http.Request, who string) {
	if c := s.control(w); c != nil {
		s.commandResult(w, r, c, c.Abort(who))
	}
}

// Annotation is the body of POST /api/annotations.
type Annotation struct {
	Text string `json:"text"`
}

func (s *Server) postAnnotation(w http.ResponseWriter, r *http.Request, who string) {
	var a Annotation
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		writeError(w, http.StatusBadRequest, "the body must be JSON {\"text\": \"...\"}: "+err.Error())
		return
	}
	if c := s.control(w); c != nil {
		s.commandResult(w, r, c, c.Annotate(who, a.Text))
	}
}

func reportPath(dir string) string { return filepath.Join(dir, "report.html") }

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	dir, final := s.reportDir, s.final
	s.mu.Unlock()
	if final == nil || final.Report == "" {
		writeError(w, http.StatusNotFound, "no report yet: the run is not over")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	http.ServeFile(w, r, reportPath(dir))
}
