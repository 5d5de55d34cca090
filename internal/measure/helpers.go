package measure

import "time"

// Quantile returns the q-th percentile (q in 0..100) of b's latency, from
// the intended send time; 0 when b has no completed request.
func (b *Bucket) Quantile(q float64) time.Duration { return Quantile(b.Latency, q) }

// Max returns the largest latency in b (HDR resolution); 0 when empty.
func (b *Bucket) Max() time.Duration { return b.Latency.Max() }

// ErrorRate is Failures/Requests in 0..1; 0 when b has no request.
func (b *Bucket) ErrorRate() float64 {
	if b.Requests == 0 {
		return 0
	}
	return float64(b.Failures()) / float64(b.Requests)
}

// TransportErrors counts requests that got no HTTP response (all kinds).
func (b *Bucket) TransportErrors() int64 {
	var n int64
	for _, c := range b.Errors {
		n += c
	}
	return n
}

// AchievedRate is completed requests per second over b's width (req/s).
func (b *Bucket) AchievedRate() float64 {
	if b.Width <= 0 {
		return 0
	}
	return float64(b.Requests) / b.Width.Seconds()
}

// IntendedRate is the schedule's requests per second over b's width (req/s).
func (b *Bucket) IntendedRate() float64 {
	if b.Width <= 0 {
		return 0
	}
	return float64(b.Intended) / b.Width.Seconds()
}

// ShedCount counts the responses the service shed (503 and 429) in b;
// those drill's local Service answered itself ([Bucket.ServiceAnswers])
// are not the service's shedding and are left out.
func (b *Bucket) ShedCount() int64 {
	return b.Codes[503] + b.Codes[429] - b.ServiceAnswers[503] - b.ServiceAnswers[429]
}

// Span returns the start of the first bucket and the end of the last one;
// both 0 when s is empty.
func (s *Series) Span() (from, to time.Duration) {
	if len(s.Buckets) == 0 {
		return 0, 0
	}
	first, last := s.Buckets[0], s.Buckets[len(s.Buckets)-1]
	return first.Start, last.Start + last.Width
}

// Total merges every bucket of s into one (the run window).
func (s *Series) Total() *Bucket {
	from, to := s.Span()
	return s.Window(from, to)
}
