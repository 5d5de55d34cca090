package load

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

// ExpandError is a ${...} reference of a stream that could not be
// expanded: Field names the scenario key (e.g.
// "streams[0].targets[1].url") and Err says why (scenario.Expand's error).
type ExpandError struct {
	Field string
	Err   error
}

// Error is "FIELD: ERR".
func (e *ExpandError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *ExpandError) Unwrap() error { return e.Err }

// ExpandStreams returns copies of streams with every ${...} reference they
// may hold expanded from vars (scenario.Expand): each target's url, header
// values and body, and basicAuth's username and password. streams is not
// changed. The first reference that does not expand is returned as an
// *[ExpandError]. Every command that sends a scenario's streams (drill run,
// its warm traffic, drill load) expands them here, so they all fill the
// same fields the same way; the values of vars that are secret are the
// caller's to redact (internal/redact).
func ExpandStreams(streams []scenario.Stream, vars map[string]string) ([]scenario.Stream, error) {
	out := make([]scenario.Stream, len(streams))
	for i, st := range streams {
		expand := func(field, v string) (string, error) {
			x, err := scenario.Expand(v, vars)
			if err != nil {
				return "", &ExpandError{Field: fmt.Sprintf("streams[%d].%s", i, field), Err: err}
			}
			return x, nil
		}
		st.Targets = append([]scenario.Target(nil), st.Targets...)
		for j := range st.Targets {
			t := &st.Targets[j]
			where := fmt.Sprintf("targets[%d]", j)
			var err error
			if t.URL, err = expand(where+".url", t.URL); err != nil {
				return nil, err
			}
			hs := make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				if hs[k], err = expand(where+".headers."+k, v); err != nil {
					return nil, err
				}
			}
			t.Headers = hs
			if t.Body, err = expand(where+".body", t.Body); err != nil {
				return nil, err
			}
		}
		if st.BasicAuth != nil {
			ba := *st.BasicAuth
			var err error
			if ba.Username, err = expand("basicAuth.username", ba.Username); err != nil {
				return nil, err
			}
			if ba.Password, err = expand("basicAuth.password", ba.Password); err != nil {
				return nil, err
			}
			st.BasicAuth = &ba
		}
		out[i] = st
	}
	return out, nil
}
