// Package traefik observes a Traefik that routes a compose run (ADR
// 0077): its JSON access log, followed from the container's standard
// output through the Docker engine, and its API (/api/http/routers,
// /api/http/services), polled on the run's clock. From them it emits the
// run's routing events, so that 404 and 503 phases are Traefik's own
// answers, not a model of them:
//
//   - endpoint-removed / endpoint-ready (Source [SourceAccessLog]) when the
//     requests for a Compose service's routers stop or start reaching its
//     container: the first request Traefik answered 404 with no router
//     (the provider dropped the router) or 503 with no server (an empty
//     service kept by allowEmptyServices) after one it forwarded, and the
//     reverse. At is the request's StartUTC on the run's clock; the label
//     [LabelSince] bounds the change from below: the start of the latest
//     request in the other state logged before it (the change lies
//     between the two).
//   - note events (Source [SourceAPI]) when a poll of the API sees a
//     Traefik service's servers change (present with a server UP, without
//     one, absent), and the clock offset measured at start.
//
// Access log times are Traefik's wall clock; [Observer.Sync] measures
// their offset from the run's clock at start (see Offset).
package traefik

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// Event sources.
const (
	// SourceAccessLog marks what drill read from Traefik's access log.
	SourceAccessLog = "traefik-accesslog"
	// SourceAPI marks what drill read from Traefik's API.
	SourceAPI = "traefik-api"
)

// LabelSince is the label of a routing event from the access log that
// holds, in ns on the run's clock (a decimal integer), the start of the
// latest request in the other state logged before it: for a removal the
// last request Traefik forwarded, for a return the last one it answered
// itself. Absent when no such request was logged.
const LabelSince = event.LabelSince

// Entry is one line of Traefik's JSON access log, the fields drill reads.
type Entry struct {
	// StartUTC is when Traefik received the request (its wall clock).
	StartUTC time.Time `json:"StartUTC"`
	// Duration is the time Traefik spent on it, in ns.
	Duration int64 `json:"Duration"`
	// RouterName and ServiceName are the router that matched and its
	// service ("orders@docker"); empty when no router matched.
	RouterName  string `json:"RouterName"`
	ServiceName string `json:"ServiceName"`
	// ServiceURL is the server Traefik forwarded to; empty when it had
	// none.
	ServiceURL string `json:"ServiceURL"`
	// OriginStatus is the status the backend answered, 0 when no backend
	// answered (Traefik answered itself); DownstreamStatus is what the
	// client got.
	OriginStatus     int    `json:"OriginStatus"`
	DownstreamStatus int    `json:"DownstreamStatus"`
	RequestHost      string `json:"RequestHost"`
	RequestPath      string `json:"RequestPath"`
	RequestMethod    string `json:"RequestMethod"`
}

// ParseEntry reads one log line; ok is false for a line that is not an
// access log entry (Traefik's own log shares the output: its lines have
// no DownstreamStatus).
func ParseEntry(line []byte) (e Entry, ok bool) {
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	var raw struct {
		Entry
		Status *int `json:"DownstreamStatus"`
	}
	if err := json.Unmarshal(line, &raw); err != nil || raw.Status == nil || raw.StartUTC.IsZero() {
		return Entry{}, false
	}
	raw.Entry.DownstreamStatus = *raw.Status
	return raw.Entry, true
}

// Verdict is what one entry says about its route.
type Verdict int

// Verdicts of an entry.
const (
	// Unknown: the entry says nothing about routing (a backend error, a
	// client that went away).
	Unknown Verdict = iota
	// Forwarded: a router matched and Traefik forwarded the request to a
	// server (ServiceURL), which answered (OriginStatus > 0).
	Forwarded
	// NoRouter: no router matched and Traefik answered 404.
	NoRouter
	// NoServer: a router matched, its service had no server (no
	// ServiceURL) and Traefik answered a 5xx itself: 503 for an empty
	// load balancer; 500 in Traefik v3.6.12 when allowEmptyServices keeps
	// the service of an unhealthy container whose labels set
	// loadbalancer.server.port (a server without a URL, measured on this
	// machine).
	NoServer
)

// Classify says what e shows about its route.
func Classify(e Entry) Verdict {
	switch {
	case e.RouterName == "" && e.DownstreamStatus == 404:
		return NoRouter
	case e.RouterName != "" && e.ServiceURL != "" && e.OriginStatus > 0:
		return Forwarded
	case e.RouterName != "" && e.ServiceURL == "" && e.DownstreamStatus >= 500:
		return NoServer
	}
	return Unknown
}

// BareName strips the provider from a router or service name
// ("orders@docker" is "orders").
func BareName(s string) string {
	n, _, _ := strings.Cut(s, "@")
	return n
}
