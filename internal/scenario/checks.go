package scenario

import (
	"fmt"
	"strings"
)

// Check is one response check of a stream (streams[].checks): a claim
// about a header's value or a field of a JSON body that every response
// it applies to must meet, e.g. a shed answer's "Retry-After: 5" (RFC
// 9110 §10.2.3) or the code of an RFC 9457 problem body. The load
// generator evaluates it on each response of the stream and counts, per
// second, the responses it applied to and those that failed it
// (measure.Bucket.Checks); a check assertion judges the share that
// failed. A response that got no status (a transport error) is never
// checked, nor one drill's local Service gave itself instead of a replica
// (measure.ServiceAnswerHeader: no ready endpoint, backend error): it is
// not the service's answer.
type Check struct {
	// Name is required and unique within the stream (letters, digits, '-'
	// and '_'); check assertions refer to it.
	Name string `yaml:"name" json:"name"`
	// Status lists the HTTP status codes (100-599) of the responses the
	// check applies to; default (unset or empty): every response that has
	// a status.
	Status []int `yaml:"status,omitempty" json:"status,omitempty"`
	// MinRetries limits the check to the responses of exchanges that
	// took at least this many retries (the stream's retry policy: the
	// response to the 4th retry or a later one for 4); 0 (default): every
	// response.
	MinRetries int `yaml:"minRetries,omitempty" json:"minRetries,omitempty"`
	// Header names the response header whose (first) value is checked.
	// Exactly one of Header, JSON and StatusCode. A response without the
	// header fails.
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
	// JSON is a dot path of object keys (a.b.c) into the response body,
	// read as JSON; the generator then keeps up to 64 KiB (CheckBodyLimit)
	// of the stream's bodies. Exactly one of Header, JSON and StatusCode.
	// A body that is not JSON, cut at the limit, or without the field
	// fails.
	JSON string `yaml:"json,omitempty" json:"json,omitempty"`
	// StatusCode checks the response's HTTP status code itself (equals
	// "429", or min/max), e.g. that every response to a 4th retry is a
	// 429. Exactly one of Header, JSON and StatusCode.
	StatusCode bool `yaml:"statusCode,omitempty" json:"statusCode,omitempty"`
	// Equals compares the value as text: the header's value, or a JSON
	// string's contents, a number's text as written, true, false or null
	// (an object or array fails). Exactly one kind of test: Equals, or
	// Min and/or Max.
	Equals *string `yaml:"equals,omitempty" json:"equals,omitempty"`
	// Min is the smallest value allowed, inclusive: the value must be a
	// number (a JSON number, or a header whose value parses as one; a JSON
	// string does not count), in the unit the service writes it in.
	Min *float64 `yaml:"min,omitempty" json:"min,omitempty"`
	// Max is the largest value allowed, inclusive; as Min.
	Max *float64 `yaml:"max,omitempty" json:"max,omitempty"`
}

// CheckBodyLimit is how many bytes of each response body the load
// generator keeps for a stream with a json check: 64 KiB. A longer body
// is cut, and every json check that applies to it fails ("body cut at
// 65536 bytes"): a truncated document cannot be read. A stream without
// json checks keeps no body at all.
const CheckBodyLimit = 64 << 10

// Path returns the object keys of c's JSON dot path, outermost first; nil
// for a header check.
func (c Check) Path() []string {
	if c.JSON == "" {
		return nil
	}
	return strings.Split(c.JSON, ".")
}

// HasJSONCheck reports whether any of st's checks reads the body (a json
// check): only then does the generator keep bodies.
func (st *Stream) HasJSONCheck() bool {
	for _, c := range st.Checks {
		if c.JSON != "" {
			return true
		}
	}
	return false
}

// CheckNamed returns the check of st called name; ok is false when st has
// none.
func (st *Stream) CheckNamed(name string) (c Check, ok bool) {
	for _, c := range st.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// streamChecks checks the response checks of the stream at p: unique
// names, exactly one of header, json and statusCode, exactly one kind of
// test, HTTP statuses, and a retry count a stream can reach.
func (v *validator) streamChecks(p string, st *Stream) {
	names := make([]string, len(st.Checks))
	for j, c := range st.Checks {
		names[j] = c.Name
	}
	v.unique("check", names, func(j int) string { return fmt.Sprintf("%s.checks[%d]", p, j) })
	retries := st.MaxRetries()
	for j := range st.Checks {
		cp := fmt.Sprintf("%s.checks[%d]", p, j)
		v.check(cp, &st.Checks[j])
		if n := st.Checks[j].MinRetries; n > retries {
			v.errorf(cp+".minRetries", "minRetries %d: the stream retries at most %d times (retry.maxAttempts %d), so no response would be checked", n, retries, retries+1)
		}
	}
}

// MaxRetries is how many times the stream retries one request at most:
// retry.maxAttempts - 1 (maxAttempts defaults to 3), 0 without a retry
// policy.
func (st *Stream) MaxRetries() int {
	r := st.Retry
	if r == nil || r.Policy == "" || r.Policy == RetryNone {
		return 0
	}
	if r.MaxAttempts == 0 {
		return 2
	}
	return max(r.MaxAttempts-1, 0)
}

// check checks one response check at cp.
func (v *validator) check(cp string, c *Check) {
	subjects := 0
	for _, set := range []bool{c.Header != "", c.JSON != "", c.StatusCode} {
		if set {
			subjects++
		}
	}
	switch {
	case subjects == 0:
		v.errorf(cp, "a check needs header, json or statusCode: what of the response it reads")
	case subjects > 1:
		field := ".json"
		if c.StatusCode {
			field = ".statusCode"
		}
		v.errorf(cp+field, "set one of header, json and statusCode, not several")
	case c.Header != "" && !tokenRE.MatchString(c.Header):
		v.errorf(cp+".header", "invalid header name %q", c.Header)
	case c.JSON != "":
		for _, key := range c.Path() {
			if key == "" {
				v.errorf(cp+".json", "json path %q has an empty key: write object keys joined by '.', e.g. fallback.tax_cents", c.JSON)
				break
			}
		}
	}
	bounds := c.Min != nil || c.Max != nil
	switch {
	case c.Equals == nil && !bounds:
		v.errorf(cp, "a check needs equals, or min and/or max: what the value must be")
	case c.Equals != nil && bounds:
		v.errorf(cp+".equals", "set equals, or min and/or max, not both")
	case c.Min != nil && c.Max != nil && *c.Min > *c.Max:
		v.errorf(cp+".max", "max (%v) is below min (%v)", *c.Max, *c.Min)
	}
	if c.MinRetries < 0 || c.MinRetries > 99 {
		v.errorf(cp+".minRetries", "minRetries must be between 0 and 99 (a stream retries at most 99 times), got %d", c.MinRetries)
	}
	for k, code := range c.Status {
		if code < 100 || code > 599 {
			v.errorf(fmt.Sprintf("%s.status[%d]", cp, k), "status %d is not an HTTP status (100-599)", code)
		}
	}
}
