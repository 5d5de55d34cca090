package scenario

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Stream is one open-model load stream: requests are sent on the pacer's
// schedule whatever the responses, and latency counts from the intended send
// time.
type Stream struct {
	// Name is unique; assertions refer to it.
	Name string `yaml:"name" json:"name"`
	// Targets are round-robin; each may use ${...} and a body template.
	Targets []Target `yaml:"targets,omitempty" json:"targets,omitempty"`
	// TargetsFile reads vegeta targets (format http or json) from a file
	// relative to the scenario.
	TargetsFile *TargetsFile `yaml:"targetsFile,omitempty" json:"targetsFile,omitempty"`
	// Rate is a constant rate, e.g. 2800/s, at most 1000000/s (as is every
	// rate of Ramp and Steps). Exactly one of Rate, Ramp, Steps.
	Rate *Rate `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Ramp is a linear ramp from From to To over the stream's duration.
	Ramp *Ramp `yaml:"ramp,omitempty" json:"ramp,omitempty"`
	// Steps are consecutive constant rates.
	Steps []Step `yaml:"steps,omitempty" json:"steps,omitempty"`
	// Start is the offset from t=0; default 0.
	Start Duration `yaml:"start,omitempty" json:"start,omitempty"`
	// Duration default: until the end of the timeline; with Steps, the sum
	// of the steps (if set, it must equal that sum).
	Duration Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	// Timeout per request (whole exchange), above 0: a written 0 is
	// refused, not replaced by the default; default 5s.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxConnections caps connections per host; 0 = unlimited.
	MaxConnections int `yaml:"maxConnections,omitempty" json:"maxConnections,omitempty"`
	// MaxWorkers caps concurrent in-flight requests, at most 100,000; 0 =
	// engine default (1.25 x peak rate x timeout + 64, at most 10,000).
	MaxWorkers int `yaml:"maxWorkers,omitempty" json:"maxWorkers,omitempty"`
	// KeepAlive reuses connections; default true.
	KeepAlive *bool `yaml:"keepAlive,omitempty" json:"keepAlive,omitempty"`
	// Retry is the client behaviour on failure; default none.
	Retry *Retry `yaml:"retry,omitempty" json:"retry,omitempty"`
	// LagBudget: the run is invalid (exit 4) if more than Fraction of
	// requests went out later than Late; default 1% later than 10ms.
	LagBudget *LagBudget `yaml:"lagBudget,omitempty" json:"lagBudget,omitempty"`
	// MaxConnectionErrors bounds the share (0..1) of the stream's requests
	// in the run window that failed at connection level (refused,
	// unreachable, dial timeout, reset before a response; not HTTP error
	// statuses nor timeouts of a request that had a connection). Above it
	// the run is invalid (exit 4): the load did not reach a server, so its
	// figures say nothing about the system. Default 0.5; set 1 when a fault
	// is meant to break the stream's connections (e.g. down on the proxy
	// it targets).
	MaxConnectionErrors *float64 `yaml:"maxConnectionErrors,omitempty" json:"maxConnectionErrors,omitempty"`
	// BasicAuth sends HTTP basic authentication with every request of the
	// stream (its targets and its targetsFile's); a target may then not set
	// an Authorization header.
	BasicAuth *BasicAuth `yaml:"basicAuth,omitempty" json:"basicAuth,omitempty"`
	// Checks are claims about each response's header values or JSON body
	// fields, evaluated by the load generator (see [Check]); a check
	// assertion judges them. Default none: the generator then reads no
	// header beyond those it always reads and keeps no body.
	Checks []Check `yaml:"checks,omitempty" json:"checks,omitempty"`
}

// BasicAuth sets the Authorization header of every request of a stream to
// "Basic " + base64(username:password) (RFC 7617). Take the credentials
// from drill's environment with ${env.NAME} rather than writing them in
// the scenario: the recorded scenario keeps the ${env.NAME} references as
// written, a password written out reads REDACTED, and the values never
// appear in anything drill writes.
type BasicAuth struct {
	// Username may use ${...} (e.g. ${env.API_USER}); required, without ':'.
	Username string `yaml:"username" json:"username"`
	// Password may use ${...} (e.g. ${env.API_PASSWORD}); may be empty.
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
}

// Target is one request template.
type Target struct {
	// Method default GET.
	Method string `yaml:"method,omitempty" json:"method,omitempty"`
	// URL is required, absolute (http://...), may use ${...}.
	URL string `yaml:"url" json:"url"`
	// Headers are sent on every request; values may use ${...}. Only the
	// values of headers known to carry no secret (see Redaction:
	// Content-Type, Accept, ..., redact.allowHeaders) are recorded; the
	// others read REDACTED in everything drill writes.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Body is a Go text/template with {{.ID}} (unique per request),
	// {{.Seq}} (sequence number) and {{.Time}} (RFC 3339 intended send
	// time); it may use ${...}. Reports record only its size and a sha256
	// prefix, never its text.
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
}

// TargetsFile is a vegeta targets file.
type TargetsFile struct {
	// Path is relative to the scenario file; required.
	Path string `yaml:"path" json:"path"`
	// Format is http (default) or json.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
}

// Ramp is a linear rate ramp.
type Ramp struct {
	// From is the rate at the stream's start; required (may be 0/s).
	From Rate `yaml:"from" json:"from"`
	// To is the rate at the stream's end; required.
	To Rate `yaml:"to" json:"to"`
}

// Step is one constant-rate step of a stream.
type Step struct {
	// Rate is the step's constant rate; required, above 0.
	Rate Rate `yaml:"rate" json:"rate"`
	// For is how long the step lasts; required, above 0.
	For Duration `yaml:"for" json:"for"`
}

// RetryPolicy names a client retry behaviour.
type RetryPolicy string

// Retry policies.
const (
	// RetryNone sends each request once (default).
	RetryNone RetryPolicy = "none"
	// RetryFixed retries failures after a fixed Interval with no jitter (the
	// retry storm of BULKHEAD-PAY-001 ADV-IR-01).
	RetryFixed RetryPolicy = "fixed"
	// RetryAfter retries after the response's Retry-After (or Interval).
	RetryAfter RetryPolicy = "retry-after"
)

// Retry is the client's retry behaviour.
type Retry struct {
	// Policy is none, fixed or retry-after; required.
	Policy RetryPolicy `yaml:"policy" json:"policy"`
	// Interval between attempts for fixed; fallback for retry-after; default 50ms.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// MaxAttempts including the first; default 3, at most 100.
	MaxAttempts int `yaml:"maxAttempts,omitempty" json:"maxAttempts,omitempty"`
	// On lists status codes that trigger a retry; default 429, 502, 503, 504
	// and transport errors.
	On []int `yaml:"on,omitempty" json:"on,omitempty"`
	// AttemptHeader names a request header each retry carries with its
	// number: 1 on the first retry, 2 on the second (a payment client's
	// X-Retry-Attempt, which BULKHEAD-PAY-001 ADV-IR-01 counts); the
	// first attempt goes without it. Empty: retries look like the first.
	AttemptHeader string `yaml:"attemptHeader,omitempty" json:"attemptHeader,omitempty"`
}

// LagBudget bounds how far behind its schedule the load generator may fall.
type LagBudget struct {
	// Late is the lag beyond which a request counts as late; default 10ms.
	Late Duration `yaml:"late,omitempty" json:"late,omitempty"`
	// Fraction is the share of late requests allowed, 0..1; default 0.01.
	Fraction float64 `yaml:"fraction,omitempty" json:"fraction,omitempty"`
}

// Upper bounds drill run would otherwise meet only after it started the
// scenario's dependencies and services. Validate (and so drill validate and
// drill plan) refuses anything beyond them before anything starts.
const (
	// MaxStreamRate bounds every rate of a stream (rate, ramp.from,
	// ramp.to, steps[].rate) in req/s: 1,000,000/s. drill's engine sends
	// tens of thousands of requests per second per core, and its schedule
	// needs a send interval of at least 1 ns (at most 1e9/s); a figure
	// above a million per second is a typo, not a load test.
	MaxStreamRate = 1_000_000
	// MaxStreamWorkers bounds a stream's maxWorkers: 100,000. Each worker
	// holds an in-flight request and its connection (a file descriptor);
	// the engine's own default stops at 10,000.
	MaxStreamWorkers = 100_000
)

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	RetryPolicies  = []string{string(RetryFixed), string(RetryNone), string(RetryAfter)}
	TargetsFormats = []string{"http", "json"}
)

// streams checks every stream: a unique name, then what each sends, at
// which rate, when, and with which client and validity budgets.
func (v *validator) streams() {
	s := v.s
	names := make([]string, len(s.Streams))
	for i, st := range s.Streams {
		names[i] = st.Name
	}
	v.unique("stream", names, func(i int) string { return fmt.Sprintf("streams[%d]", i) })
	for i := range s.Streams {
		st := &s.Streams[i]
		p := fmt.Sprintf("streams[%d]", i)
		v.streamRequests(p, st)
		v.streamShape(p, st)
		v.streamSpan(p, st)
		v.streamClient(p, st)
		v.streamBudgets(p, st)
		v.streamChecks(p, st)
	}
}

// streamRequests checks what the stream at p sends: targets or a targets
// file, and its basic authentication.
func (v *validator) streamRequests(p string, st *Stream) {
	if len(st.Targets) == 0 && st.TargetsFile == nil {
		v.errorf(p, "a stream needs targets or targetsFile")
	}
	if len(st.Targets) > 0 && st.TargetsFile != nil {
		v.errorf(p+".targetsFile", "set targets or targetsFile, not both")
	}
	for j, t := range st.Targets {
		v.target(fmt.Sprintf("%s.targets[%d]", p, j), t, st.BasicAuth != nil)
	}
	if ba := st.BasicAuth; ba != nil {
		v.basicAuth(p+".basicAuth", ba)
	}
	if tf := st.TargetsFile; tf != nil {
		v.targetsFile(p+".targetsFile", tf)
	}
}

// target checks one request template at tp: its method, URL, header names
// and body template. basicAuth says that the stream sets Authorization.
func (v *validator) target(tp string, t Target, basicAuth bool) {
	if !tokenRE.MatchString(t.Method) {
		v.errorf(tp+".method", "invalid HTTP method %q", t.Method)
	}
	if t.URL == "" {
		v.errorf(tp+".url", "url is required")
	} else {
		v.checkURL(tp+".url", t.URL)
	}
	for k := range t.Headers {
		if !tokenRE.MatchString(k) {
			v.errorf(mapKeyPath(tp+".headers", k), "invalid header name %q", k)
		}
		if basicAuth && strings.EqualFold(k, "Authorization") {
			v.errorf(mapKeyPath(tp+".headers", k), "the stream's basicAuth sets Authorization; drop this header or basicAuth")
		}
	}
	if t.Body != "" {
		if msg := checkBodyTemplate(t.Body); msg != "" {
			v.errorf(tp+".body", "%s", msg)
		}
	}
}

// basicAuth checks a stream's basicAuth at p: a username without ':'.
func (v *validator) basicAuth(p string, ba *BasicAuth) {
	if ba.Username == "" {
		v.errorf(p+".username", "username is required (it may use ${env.NAME})")
	} else if strings.Contains(ba.Username, ":") {
		v.errorf(p+".username", "a basic auth username must not contain ':' (RFC 7617)")
	}
}

// targetsFile checks a stream's targetsFile at p: a path and a known format.
func (v *validator) targetsFile(p string, tf *TargetsFile) {
	if tf.Path == "" {
		v.errorf(p+".path", "path is required")
	}
	if !oneOf(tf.Format, TargetsFormats) {
		v.errorf(p+".format", "%s", unknownValue("targets format", tf.Format, TargetsFormats))
	}
}

// streamShape checks that the stream at p sets exactly one of rate, ramp
// and steps, each above 0 and within MaxStreamRate.
func (v *validator) streamShape(p string, st *Stream) {
	shapes := 0
	if st.Rate != nil {
		shapes++
		if st.Rate.Freq <= 0 {
			v.errorf(p+".rate", "rate must be above 0 (e.g. 2800/s), got %s", st.Rate)
		}
		v.rateBound(p+".rate", *st.Rate)
	}
	if st.Ramp != nil {
		shapes++
		v.ramp(p+".ramp", st.Ramp)
	}
	if len(st.Steps) > 0 {
		shapes++
		v.steps(p, st)
	}
	if shapes != 1 {
		v.errorf(p, "set exactly one of rate, ramp or steps (has %d)", shapes)
	}
}

// ramp checks a stream's ramp at p: a from rate, some rate above 0, and
// both rates within MaxStreamRate.
func (v *validator) ramp(p string, r *Ramp) {
	if r.From.Per == 0 {
		v.errorf(p+".from", "from is required (e.g. 100/s)")
	}
	if r.To.Freq <= 0 && r.From.Freq <= 0 {
		v.errorf(p, "a ramp must reach a rate above 0")
	}
	v.rateBound(p+".from", r.From)
	v.rateBound(p+".to", r.To)
}

// steps checks the steps of the stream at p: each rate and length above 0,
// and a written duration equal to their sum.
func (v *validator) steps(p string, st *Stream) {
	var sum time.Duration
	for j, step := range st.Steps {
		sp := fmt.Sprintf("%s.steps[%d]", p, j)
		if step.Rate.Freq <= 0 {
			v.errorf(sp+".rate", "rate must be above 0 (e.g. 200/s), got %s", step.Rate)
		}
		v.rateBound(sp+".rate", step.Rate)
		if step.For.D() <= 0 {
			v.errorf(sp+".for", "for must be above 0")
		}
		sum += step.For.D()
	}
	if st.Duration.D() != sum {
		v.errorf(p+".duration", "duration (%s) must equal the sum of the steps (%s); leave it out", st.Duration.D(), sum)
	}
}

// streamSpan checks that the stream at p starts and ends inside the run.
func (v *validator) streamSpan(p string, st *Stream) {
	end := v.s.Timeline.Duration.D()
	if st.Start.D() >= end {
		v.errorf(p+".start", "stream starts (%s) at or after the end of the run (%s)", st.Start.D(), end)
	} else if st.Duration.D() <= 0 {
		v.errorf(p+".duration", "duration must be above 0")
	} else if st.Start.D()+st.Duration.D() > end {
		where := p + ".duration"
		if _, wrote := v.s.Positions[where]; !wrote && len(st.Steps) > 0 {
			where = p + ".steps"
		}
		v.errorf(where, "stream ends (%s) after the run (duration %s)", st.Start.D()+st.Duration.D(), end)
	}
}

// streamClient checks the client of the stream at p: its request timeout,
// connection and worker caps, and retry behaviour.
func (v *validator) streamClient(p string, st *Stream) {
	if st.Timeout.D() <= 0 {
		v.errorf(p+".timeout", "timeout must be above 0")
	}
	if st.MaxConnections < 0 {
		v.errorf(p+".maxConnections", "must not be negative")
	}
	if st.MaxWorkers < 0 {
		v.errorf(p+".maxWorkers", "must not be negative")
	} else if st.MaxWorkers > MaxStreamWorkers {
		v.errorf(p+".maxWorkers", "maxWorkers %d is above drill's limit of %d concurrent requests per stream", st.MaxWorkers, MaxStreamWorkers)
	}
	if r := st.Retry; r != nil {
		v.retry(p+".retry", r)
	}
}

// retry checks a stream's retry at p: a known policy, at most 100
// attempts, and HTTP statuses to retry on.
func (v *validator) retry(p string, r *Retry) {
	if !oneOf(string(r.Policy), RetryPolicies) {
		v.errorf(p+".policy", "%s", unknownValue("retry policy", string(r.Policy), RetryPolicies))
	}
	if r.MaxAttempts < 0 || r.MaxAttempts > 100 {
		v.errorf(p+".maxAttempts", "maxAttempts must be between 1 and 100, got %d", r.MaxAttempts)
	}
	for j, c := range r.On {
		if c < 100 || c > 599 {
			v.errorf(fmt.Sprintf("%s.on[%d]", p, j), "status %d is not an HTTP status (100-599)", c)
		}
	}
	if h := r.AttemptHeader; h != "" && !tokenRE.MatchString(h) {
		v.errorf(p+".attemptHeader", "invalid header name %q", h)
	}
}

// streamBudgets checks the validity budgets of the stream at p: the share
// of connection errors and of late requests, each between 0 and 1.
func (v *validator) streamBudgets(p string, st *Stream) {
	if m := st.MaxConnectionErrors; m != nil && !(*m >= 0 && *m <= 1) {
		v.errorf(p+".maxConnectionErrors", "maxConnectionErrors must be between 0 and 1, got %v", *m)
	}
	if lb := st.LagBudget; lb != nil && !(lb.Fraction >= 0 && lb.Fraction <= 1) {
		v.errorf(p+".lagBudget.fraction", "fraction must be between 0 and 1, got %v", lb.Fraction)
	}
}

// rateBound refuses a rate above MaxStreamRate at field.
func (v *validator) rateBound(field string, r Rate) {
	if r.PerSecond() > MaxStreamRate {
		v.errorf(field, "rate %s (%.4g/s) is above drill's limit of %d/s per stream", r, r.PerSecond(), MaxStreamRate)
	}
}

// bodyData mirrors the fields a body template may use ({{.ID}}, {{.Seq}},
// {{.Time}}).
var bodyFields = []string{"ID", "Seq", "Time"}

// checkBodyTemplate parses a body template and checks the fields it uses.
func checkBodyTemplate(body string) string {
	t, err := template.New("body").Option("missingkey=error").Parse(body)
	if err != nil {
		return "invalid body template: " + strings.TrimPrefix(err.Error(), "template: ")
	}
	var bad string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if n == nil || bad != "" {
			return
		}
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(x.Pipe)
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range x.Args {
				walk(a)
			}
		case *parse.FieldNode:
			if len(x.Ident) > 0 && !oneOf(x.Ident[0], bodyFields) {
				bad = fmt.Sprintf("body template uses {{.%s}}; known: {{.ID}}, {{.Seq}}, {{.Time}}", x.Ident[0])
			}
		case *parse.IfNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.RangeNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.WithNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.TemplateNode:
			walk(x.Pipe)
		}
	}
	if t.Tree != nil {
		walk(t.Tree.Root)
	}
	return bad
}

func (v *validator) streamNames() []string {
	var out []string
	for _, st := range v.s.Streams {
		out = append(out, st.Name)
	}
	return out
}
