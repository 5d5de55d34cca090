package measure

import (
	"encoding/json"
	"fmt"
	"time"
)

// bucketJSON is the run.json form of a Bucket. Durations are nanoseconds
// (as event.Event.At); histograms are HdrHistogram V2 compressed encodings
// in base64 (values in µs), omitted when empty.
type bucketJSON struct {
	Start          time.Duration    `json:"start"`
	Width          time.Duration    `json:"width"`
	Intended       int64            `json:"intended"`
	Requests       int64            `json:"requests"`
	OK             int64            `json:"ok"`
	Codes          map[int]int64    `json:"codes,omitempty"`
	ServiceAnswers map[int]int64    `json:"serviceAnswers,omitempty"`
	Errors         map[string]int64 `json:"errors,omitempty"`
	BytesIn        int64            `json:"bytesIn,omitempty"`
	BytesOut       int64            `json:"bytesOut,omitempty"`
	Latency        string           `json:"latency,omitempty"`
	Lag            string           `json:"lag,omitempty"`
	Late           int64            `json:"late,omitempty"`
	Shed           string           `json:"shed,omitempty"`
	ShedRetryAfter int64            `json:"shedRetryAfter,omitempty"`
	Retries        int64            `json:"retries,omitempty"`
	// ServiceAnswersCounted: see Bucket; absent in records made before.
	ServiceAnswersCounted bool `json:"serviceAnswersCounted,omitempty"`
	// Success is absent in records made before it was kept.
	Success string `json:"success,omitempty"`
	// Checks is absent when the stream has no response checks (and in
	// records made before drill had them).
	Checks map[string]CheckCount `json:"checks,omitempty"`
}

// MarshalJSON writes b compactly (see bucketJSON).
func (b *Bucket) MarshalJSON() ([]byte, error) {
	j := bucketJSON{
		Start: b.Start, Width: b.Width, Intended: b.Intended, Requests: b.Requests, OK: b.OK,
		Codes: b.Codes, Errors: b.Errors, BytesIn: b.BytesIn, BytesOut: b.BytesOut,
		Late: b.Late, ShedRetryAfter: b.ShedRetryAfter, Retries: b.Retries,
		ServiceAnswers: b.ServiceAnswers, ServiceAnswersCounted: b.ServiceAnswersCounted,
		Checks: b.Checks,
	}
	var err error
	if j.Latency, err = b.Latency.Encode(); err != nil {
		return nil, err
	}
	if j.Lag, err = b.Lag.Encode(); err != nil {
		return nil, err
	}
	if j.Shed, err = b.Shed.Encode(); err != nil {
		return nil, err
	}
	if j.Success, err = b.Success.Encode(); err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote; histograms and maps are
// never nil afterwards, and the histograms are in packed form (a read
// bucket is a closed second or window: see [Hist]).
func (b *Bucket) UnmarshalJSON(data []byte) error {
	var j bucketJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("decode bucket: %w", err)
	}
	*b = Bucket{
		Start: j.Start, Width: j.Width, Intended: j.Intended, Requests: j.Requests, OK: j.OK,
		Codes: j.Codes, Errors: j.Errors, BytesIn: j.BytesIn, BytesOut: j.BytesOut,
		Late: j.Late, ShedRetryAfter: j.ShedRetryAfter, Retries: j.Retries,
		ServiceAnswers: j.ServiceAnswers, ServiceAnswersCounted: j.ServiceAnswersCounted,
		Checks: j.Checks,
	}
	if b.Codes == nil {
		b.Codes = map[int]int64{}
	}
	if b.Errors == nil {
		b.Errors = map[string]int64{}
	}
	var err error
	if b.Latency, err = DecodeHist(j.Latency); err != nil {
		return fmt.Errorf("decode bucket at %s latency: %w", j.Start, err)
	}
	if b.Lag, err = DecodeHist(j.Lag); err != nil {
		return fmt.Errorf("decode bucket at %s lag: %w", j.Start, err)
	}
	if b.Shed, err = DecodeHist(j.Shed); err != nil {
		return fmt.Errorf("decode bucket at %s shed: %w", j.Start, err)
	}
	if b.Success, err = DecodeHist(j.Success); err != nil {
		return fmt.Errorf("decode bucket at %s success: %w", j.Start, err)
	}
	return nil
}

type seriesJSON struct {
	Stream  string    `json:"stream"`
	Buckets []*Bucket `json:"buckets"`
}

// MarshalJSON writes {"stream": name, "buckets": [...]}.
func (s *Series) MarshalJSON() ([]byte, error) {
	return json.Marshal(seriesJSON{Stream: s.Stream, Buckets: s.Buckets})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *Series) UnmarshalJSON(data []byte) error {
	var j seriesJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("decode series: %w", err)
	}
	s.Stream, s.Buckets = j.Stream, j.Buckets
	return nil
}
