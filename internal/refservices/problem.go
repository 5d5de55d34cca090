package refservices

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemContentType is the media type of an RFC 9457 problem body.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details body. Code is drill's extension
// member naming the diagnostic (e.g. ERR_TAX_BULKHEAD_SATURATED of
// BULKHEAD-PAY-001 MC-FM-01); Extra holds further extension members, which
// are written at the top level of the JSON object beside the standard ones.
type Problem struct {
	// Type is a URI reference identifying the problem type; default
	// "about:blank" when empty.
	Type string
	// Title is a short human-readable summary of the problem type.
	Title string
	// Status is the HTTP status code, also written to the response.
	Status int
	// Detail explains this occurrence.
	Detail string
	// Code is the diagnostic code (extension member "code").
	Code string
	// Extra are further extension members; keys must not collide with the
	// standard members.
	Extra map[string]any
}

// WriteProblem writes p as application/problem+json with p.Status. When
// retryAfter > 0 it also sets Retry-After in whole seconds (rounded up), as
// BULKHEAD-PAY-001 INV-BH-04 asks of every rejection.
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
	body := make(map[string]any, 5+len(p.Extra))
	for k, v := range p.Extra {
		body[k] = v
	}
	typ := p.Type
	if typ == "" {
		typ = "about:blank"
	}
	body["type"] = typ
	body["title"] = p.Title
	body["status"] = p.Status
	if p.Detail != "" {
		body["detail"] = p.Detail
	}
	if p.Code != "" {
		body["code"] = p.Code
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// WriteJSON writes v as application/json with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
