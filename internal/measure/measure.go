// Package measure holds the load streams' measurements as per-second
// buckets: an HDR histogram of latency (from the intended send time, so no
// coordinated omission), counts per status code and per error kind, bytes,
// dispatch lag, and shed responses. Memory is bounded by run length in
// seconds, never by request count. Windows (baseline, fault:<name>, ...)
// are cut from these buckets by merging.
//
// A run's closed seconds go to a journal file as they close ([Journal],
// [SecondsFile]: JSON lines, flushed per line) instead of staying in
// memory; [ReadJournal] streams them back one line at a time and
// [LoadSeries] gathers them into a [Series] per stream for judging.
package measure

import (
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 120 s at 3 significant figures. Values are µs.
const (
	histMin     = 1
	histMax     = int64(120 * time.Second / time.Microsecond)
	histSigFigs = 3
)

// newDense returns an empty dense HDR histogram in µs with the
// geometry of every [Hist] (1 µs .. 120 s, 3 significant figures): about
// 147 KB of buckets.
func newDense() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histSigFigs)
}

// Record adds d (clamped to 1 µs .. 120 s) to h ([Hist.Record]).
func Record(h *Hist, d time.Duration) { h.Record(d) }

// Quantile returns the q-th percentile (q in 0..100) of h as a duration;
// 0 for a nil or empty h ([Hist.Quantile]).
func Quantile(h *Hist, q float64) time.Duration { return h.Quantile(q) }

// Error kinds of requests that got no HTTP response.
const (
	// ErrTimeout: the request's timeout ended it after it had a connection
	// (a slow or hanging server), or while it waited for one of the
	// stream's connection slots.
	ErrTimeout = "timeout"
	// ErrRefused: the target refused the connection.
	ErrRefused = "connection-refused"
	// ErrReset: the connection was reset or closed before a response.
	ErrReset = "connection-reset"
	// ErrDialTimeout: no connection was made within the request's timeout.
	ErrDialTimeout = "dial-timeout"
	// ErrUnreachable: the connection could not be opened for another
	// reason (no route, network unreachable, unknown host).
	ErrUnreachable = "unreachable"
	// ErrGeneratorFiles: drill itself could not open a socket for the
	// request: its process reached its open-file limit (EMFILE or ENFILE).
	// The request never reached the target, so this is the generator's
	// failure, not the system's: it makes the measurement invalid
	// ([GeneratorFailures]) and is neither a connection-level error nor a
	// target error in any judgement.
	ErrGeneratorFiles = "generator-out-of-files"
	// ErrOther: anything else.
	ErrOther = "other"
)

// ServiceAnswerHeader is the response header drill's local Service (the
// request-level balancer of the local runtime, standing in for the
// cluster's load balancer) puts on every answer it gives itself instead
// of a replica's, and strips from the replicas' answers: its value says
// why, "no-endpoints" (503: no ready endpoint) or "backend-error" (502:
// the chosen replica could not be reached). The load generator reads it
// from the response, whatever process it runs in, and counts those
// answers in [Bucket.ServiceAnswers], apart from the service's own.
const ServiceAnswerHeader = "X-Drill-Proxy"

// GeneratorFailures counts b's requests that the generator itself failed
// to send ([ErrGeneratorFiles]).
func (b *Bucket) GeneratorFailures() int64 { return b.Errors[ErrGeneratorFiles] }

// ConnectionLevel reports whether an error kind means the request never
// reached a server's HTTP handling: refused, unreachable, dial timeout, or
// reset before a response. HTTP error statuses and timeouts of a request
// that had a connection are not connection-level.
func ConnectionLevel(kind string) bool {
	switch kind {
	case ErrRefused, ErrReset, ErrDialTimeout, ErrUnreachable:
		return true
	}
	return false
}

// ConnectionErrors counts b's requests that failed at connection level
// (see [ConnectionLevel]).
func (b *Bucket) ConnectionErrors() int64 {
	var n int64
	for kind, c := range b.Errors {
		if ConnectionLevel(kind) {
			n += c
		}
	}
	return n
}

// Bucket is one stream's measurements for requests whose intended send time
// falls in [Start, Start+Width). Not safe for concurrent use.
type Bucket struct {
	// Start is the offset on the run's clock; Width is usually 1s.
	Start time.Duration
	Width time.Duration
	// Intended counts requests the schedule asked for in this bucket.
	Intended int64
	// Requests counts completed requests (response or error).
	Requests int64
	// OK counts responses with status 200-399.
	OK int64
	// Codes counts responses per HTTP status code.
	Codes map[int]int64
	// ServiceAnswers counts, per status code, the responses drill's local
	// Service gave itself ([ServiceAnswerHeader]) rather than a replica: a
	// part of Codes, never in Shed or ShedRetryAfter. Nil when there were
	// none.
	ServiceAnswers map[int]int64
	// ServiceAnswersCounted says the generator told the local Service's
	// own answers apart by [ServiceAnswerHeader] for this bucket (it does
	// for every bucket it records); false in records made before it did,
	// where ServiceAnswers is empty whoever answered.
	ServiceAnswersCounted bool
	// Errors counts requests without a response per kind (ErrTimeout, ...).
	Errors map[string]int64
	// BytesIn and BytesOut are body bytes received and sent.
	BytesIn, BytesOut int64
	// Latency of every completed request in µs, from its intended send time.
	Latency *Hist
	// Lag is the dispatch lag (actual - intended send time) in µs.
	Lag *Hist
	// Late counts requests whose lag exceeded the stream's budget.
	Late int64
	// Shed is the latency in µs of shed responses (503 and 429) of the
	// service (not those in ServiceAnswers).
	Shed *Hist
	// ShedRetryAfter counts the Shed responses that carried Retry-After.
	ShedRetryAfter int64
	// Retries counts retry attempts (not included in Requests).
	Retries int64
	// Success is the latency in µs, from the intended send time, of the
	// successful requests: those counted in OK (status 200-399). Its count
	// equals OK in every bucket drill records; a record made before it was
	// kept has it empty ([Bucket.SuccessRecorded]).
	Success *Hist
	// Checks tallies the stream's response checks (streams[].checks), by
	// check name: the responses each applied to, how many failed it, and
	// its first failures. Nil when the stream has no checks (and in
	// records made before drill had them).
	Checks map[string]CheckCount
}

// SuccessRecorded reports whether b's [Bucket.Success] holds the latency
// of its successful requests: true when it counts exactly OK of them
// (trivially when none succeeded), false for a bucket of a record made
// before drill kept it (successes, but an empty histogram).
func (b *Bucket) SuccessRecorded() bool {
	var n int64
	if b.Success != nil {
		n = b.Success.TotalCount()
	}
	return n == b.OK
}

// SuccessLatency returns the latency histogram of b's successful requests
// and true: [Bucket.Success] where it was recorded; for a bucket of an
// older record in which every completed request succeeded (OK equals
// Requests), its Latency, which then holds exactly those requests. It
// returns false when they cannot be told apart: an older record's bucket
// in which some requests failed.
func (b *Bucket) SuccessLatency() (*Hist, bool) {
	switch {
	case b.SuccessRecorded():
		return b.Success, true
	case b.OK == b.Requests:
		return b.Latency, true
	}
	return nil, false
}

// NewBucket returns an empty bucket; its histograms take memory from their
// first value.
func NewBucket(start, width time.Duration) *Bucket {
	return &Bucket{
		Start: start, Width: width,
		Codes: map[int]int64{}, Errors: map[string]int64{},
		Latency: NewHist(), Lag: NewHist(), Shed: NewHist(), Success: NewHist(),
	}
}

// Failures counts requests that failed: transport errors plus responses
// with status >= 400.
func (b *Bucket) Failures() int64 {
	var n int64
	for _, c := range b.Errors {
		n += c
	}
	for code, c := range b.Codes {
		if code >= 400 {
			n += c
		}
	}
	return n
}

// Merge adds o into b (b's Start and Width are kept). Nil maps and
// histograms on either side are tolerated.
func (b *Bucket) Merge(o *Bucket) {
	if o == nil {
		return
	}
	b.mergeCounts(o)
	mergeHist(&b.Latency, o.Latency)
	mergeHist(&b.Lag, o.Lag)
	mergeHist(&b.Shed, o.Shed)
	mergeHist(&b.Success, o.Success)
}

// mergeCounts adds o's counters (everything but Start, Width and the
// histograms) into b, allocating b's maps when nil.
func (b *Bucket) mergeCounts(o *Bucket) {
	if b.Codes == nil {
		b.Codes = map[int]int64{}
	}
	if b.Errors == nil {
		b.Errors = map[string]int64{}
	}
	b.Intended += o.Intended
	b.Requests += o.Requests
	b.OK += o.OK
	for k, v := range o.Codes {
		b.Codes[k] += v
	}
	for k, v := range o.Errors {
		b.Errors[k] += v
	}
	if len(o.ServiceAnswers) > 0 && b.ServiceAnswers == nil {
		b.ServiceAnswers = make(map[int]int64, len(o.ServiceAnswers))
	}
	for k, v := range o.ServiceAnswers {
		b.ServiceAnswers[k] += v
	}
	b.ServiceAnswersCounted = b.ServiceAnswersCounted || o.ServiceAnswersCounted
	b.BytesIn += o.BytesIn
	b.BytesOut += o.BytesOut
	b.Late += o.Late
	b.ShedRetryAfter += o.ShedRetryAfter
	b.Retries += o.Retries
	b.mergeChecks(o)
}

// mergeHist adds src into *dst, allocating *dst when it is nil.
func mergeHist(dst **Hist, src *Hist) {
	if src.TotalCount() == 0 {
		return
	}
	if *dst == nil {
		*dst = NewHist()
	}
	(*dst).Merge(src)
}

// Series is one stream's buckets in time order.
type Series struct {
	Stream string
	// Buckets are contiguous, each Width long, sorted by Start.
	Buckets []*Bucket
}

// Within reports whether b lies wholly inside [from, to): the rule by which
// a second belongs to a window everywhere drill judges one.
func (b *Bucket) Within(from, to time.Duration) bool {
	return b.Start >= from && b.Start+b.Width <= to
}

// Window merges the buckets that lie wholly inside [from, to) into one
// bucket, whose Start and Width are the span those buckets cover (the
// window itself when none does), so a rate over it is per second measured.
// Windows on whole seconds line up exactly with 1 s buckets; a window with
// a fractional edge (a fault an operator started at t=11.93 s) leaves out
// the second it cuts, so a baseline never takes in the first requests of
// the fault, nor a fault window the first of its recovery.
func (s *Series) Window(from, to time.Duration) *Bucket {
	first, last := -1, -1
	for i, b := range s.Buckets {
		if b.Within(from, to) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return NewBucket(from, to-from)
	}
	end := s.Buckets[last].Start + s.Buckets[last].Width
	out := NewBucket(s.Buckets[first].Start, end-s.Buckets[first].Start)
	for _, b := range s.Buckets[first : last+1] {
		out.Merge(b)
	}
	return out
}

// String summarises a bucket for logs.
func (b *Bucket) String() string {
	return fmt.Sprintf("[%s+%s] n=%d ok=%d p99=%s", b.Start, b.Width, b.Requests, b.OK, Quantile(b.Latency, 99))
}
