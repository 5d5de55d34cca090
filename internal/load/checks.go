package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// responseCheck is one of a stream's checks (scenario.Check) made ready
// for the result path.
type responseCheck struct {
	name       string
	status     []int  // nil: every response with a status
	minRetries int64  // 0: every response; else only retried exchanges' answers
	statusCode bool   // the check reads the status code itself
	header     string // canonical header key; "" for a json or status check
	path       []string
	jsonPath   string // as written, for reasons
	equals     string
	hasEquals  bool
	min, max   float64 // -Inf, +Inf when unset
}

// checkSet is a stream's response checks. eval reuses one slice for its
// verdicts: it is called only from the goroutine that records the
// stream's results (runStream's loop), and the recorder reads the
// verdicts before the next call.
type checkSet struct {
	checks     []responseCheck
	anyJSON    bool
	anyRetries bool // some check has minRetries: read RetriesHeader
	out        []checkVerdict
}

// checkVerdict is one check's verdict on one response; why is set when
// it failed; retries is how many retries the exchange took (0 when no
// check of the set asks).
type checkVerdict struct {
	c       *responseCheck
	why     failure
	retries int64
}

// failure says why a response failed a check; its reason is only
// formatted for the failures kept as examples.
type failure struct {
	kind failKind
	got  string // the value read, or the decode error's text
}

type failKind uint8

const (
	passed        failKind = iota
	noHeader               // the response lacks the header
	notJSON                // the body is not a JSON document
	bodyCut                // the body was longer than CheckBodyLimit
	noField                // the path leads nowhere
	notScalar              // the path leads to an object or an array
	unequal                // the value's text differs from equals
	notNumber              // min/max and the value is no number
	belowMin               // the number is below min
	aboveMax               // the number is above max
	jsonNotNumber          // min/max and the JSON value is not a number (got is its text)
)

// newCheckSet compiles st's checks; nil when it has none (the result path
// then does nothing more than before checks existed).
func newCheckSet(st scenario.Stream) *checkSet {
	if len(st.Checks) == 0 {
		return nil
	}
	cs := &checkSet{checks: make([]responseCheck, len(st.Checks)), out: make([]checkVerdict, 0, len(st.Checks))}
	for i, c := range st.Checks {
		rc := responseCheck{name: c.Name, path: c.Path(), jsonPath: c.JSON, min: math.Inf(-1), max: math.Inf(1),
			minRetries: int64(c.MinRetries), statusCode: c.StatusCode}
		if len(c.Status) > 0 {
			rc.status = slices.Clone(c.Status)
		}
		if c.Header != "" {
			rc.header = http.CanonicalHeaderKey(c.Header)
		}
		if c.Equals != nil {
			rc.equals, rc.hasEquals = *c.Equals, true
		}
		if c.Min != nil {
			rc.min = *c.Min
		}
		if c.Max != nil {
			rc.max = *c.Max
		}
		cs.anyJSON = cs.anyJSON || rc.path != nil
		cs.anyRetries = cs.anyRetries || rc.minRetries > 0
		cs.checks[i] = rc
	}
	return cs
}

// appliesTo reports whether c applies to a response with status code
// that ended an exchange after retries retries.
func (c *responseCheck) appliesTo(code int, retries int64) bool {
	return retries >= c.minRetries && (c.status == nil || slices.Contains(c.status, code))
}

// retriesOf reads how many retries the exchange that h answers took
// (RetriesHeader, set by the transport); 0 when it was not retried.
func retriesOf(h http.Header) int64 {
	vs := h[RetriesHeader]
	if len(vs) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// eval returns the verdicts of the checks that apply to r (nil for a
// result without a status). The body is parsed once, and only when a json
// check applies.
func (cs *checkSet) eval(r *vegeta.Result) []checkVerdict {
	code := int(r.Code)
	if code == 0 {
		return nil
	}
	cs.out = cs.out[:0]
	var retries int64
	if cs.anyRetries {
		retries = retriesOf(r.Headers)
	}
	var doc any
	var docErr failure
	parsed := false
	for i := range cs.checks {
		c := &cs.checks[i]
		if !c.appliesTo(code, retries) {
			continue
		}
		var why failure
		switch {
		case c.statusCode:
			why = c.testStatus(code)
		case c.header != "":
			why = c.testHeader(r.Headers)
		default:
			if !parsed {
				doc, docErr = parseBody(r.Body)
				parsed = true
			}
			why = docErr
			if why.kind == passed {
				why = c.testJSON(doc)
			}
		}
		cs.out = append(cs.out, checkVerdict{c: c, why: why, retries: retries})
	}
	return cs.out
}

// testStatus tests the response's status code, as text for equals and as
// a number for min and max.
func (c *responseCheck) testStatus(code int) failure {
	text := strconv.Itoa(code)
	if c.hasEquals {
		if text != c.equals {
			return failure{kind: unequal, got: text}
		}
		return failure{}
	}
	return c.bounds(float64(code), text)
}

// testHeader tests the header's first value.
func (c *responseCheck) testHeader(h http.Header) failure {
	vs := h[c.header]
	if len(vs) == 0 {
		return failure{kind: noHeader}
	}
	v := vs[0]
	if c.hasEquals {
		if v != c.equals {
			return failure{kind: unequal, got: v}
		}
		return failure{}
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) {
		return failure{kind: notNumber, got: v}
	}
	return c.bounds(x, v)
}

// bounds tests a number x (written text) against min and max.
func (c *responseCheck) bounds(x float64, text string) failure {
	switch {
	case x < c.min:
		return failure{kind: belowMin, got: text}
	case x > c.max:
		return failure{kind: aboveMax, got: text}
	}
	return failure{}
}

// parseBody reads body as one JSON document, its numbers kept as written.
func parseBody(body []byte) (any, failure) {
	if len(body) > scenario.CheckBodyLimit {
		return nil, failure{kind: bodyCut}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, failure{kind: notJSON, got: jsonErrText(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, failure{kind: notJSON, got: "data after the document"}
	}
	return doc, failure{}
}

// jsonErrText is a decode error's text, short.
func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) {
		return "empty body"
	}
	return err.Error()
}

// testJSON follows the path into doc and tests the value found.
func (c *responseCheck) testJSON(doc any) failure {
	v := doc
	for _, key := range c.path {
		obj, ok := v.(map[string]any)
		if !ok {
			return failure{kind: noField}
		}
		if v, ok = obj[key]; !ok {
			return failure{kind: noField}
		}
	}
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case json.Number:
		text = string(x)
	case bool:
		text = strconv.FormatBool(x)
	case nil:
		text = "null"
	default:
		return failure{kind: notScalar}
	}
	if c.hasEquals {
		if text != c.equals {
			return failure{kind: unequal, got: text}
		}
		return failure{}
	}
	n, ok := v.(json.Number)
	if !ok {
		return failure{kind: jsonNotNumber, got: text}
	}
	x, err := n.Float64()
	if err != nil {
		return failure{kind: jsonNotNumber, got: text}
	}
	return c.bounds(x, text)
}

// what names what c reads, for reasons: the header, or "field a.b".
func (c *responseCheck) what() string {
	if c.statusCode {
		return "status"
	}
	if c.header != "" {
		return c.header
	}
	return "field " + c.jsonPath
}

// reason says why a response failed c, e.g. `Retry-After "7" != "5"`.
func (c *responseCheck) reason(f failure) string {
	switch f.kind {
	case noHeader:
		return "no header " + c.header
	case notJSON:
		return "body is not JSON: " + f.got
	case bodyCut:
		return fmt.Sprintf("body cut at %d bytes (too long to read its JSON)", scenario.CheckBodyLimit)
	case noField:
		return "no field " + c.jsonPath
	case notScalar:
		return c.what() + " is an object or an array, not a value"
	case unequal:
		return fmt.Sprintf("%s %q != %q", c.what(), f.got, c.equals)
	case notNumber, jsonNotNumber:
		return fmt.Sprintf("%s %q is not a number", c.what(), f.got)
	case belowMin:
		return fmt.Sprintf("%s %s < min %s", c.what(), f.got, strconv.FormatFloat(c.min, 'g', -1, 64))
	case aboveMax:
		return fmt.Sprintf("%s %s > max %s", c.what(), f.got, strconv.FormatFloat(c.max, 'g', -1, 64))
	}
	return "passed"
}

// recordChecks counts verdicts into b (a response with status code,
// intended at the clock offset at); failure reasons are formatted only
// for the ones b keeps as examples.
func recordChecks(b *measure.Bucket, vs []checkVerdict, at time.Duration, code int) {
	if b.Checks == nil {
		b.Checks = make(map[string]measure.CheckCount, len(vs))
	}
	for _, v := range vs {
		c := b.Checks[v.c.name]
		c.Applied++
		if v.why.kind != passed {
			c.Failed++
			if c.WantsExample(at) {
				why := v.c.reason(v.why)
				if v.retries > 0 {
					why += " (after " + strconv.FormatInt(v.retries, 10) + " retries)"
				}
				c.AddExample(measure.CheckFailure{At: at, Status: code, Reason: why})
			}
		}
		b.Checks[v.c.name] = c
	}
}
