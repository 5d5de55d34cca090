package measure

import (
	"encoding/json"
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
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
	Errors         map[string]int64 `json:"errors,omitempty"`
	BytesIn        int64            `json:"bytesIn,omitempty"`
	BytesOut       int64            `json:"bytesOut,omitempty"`
	Latency        string           `json:"latency,omitempty"`
	Lag            string           `json:"lag,omitempty"`
	Late           int64            `json:"late,omitempty"`
	Shed           string           `json:"shed,omitempty"`
	ShedRetryAfter int64            `json:"shedRetryAfter,omitempty"`
	Retries        int64            `json:"retries,omitempty"`
}

// EncodeHistogram returns h in the HdrHistogram V2 compressed encoding,
// base64; "" for a nil or empty histogram.
func EncodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	if h == nil || h.TotalCount() == 0 {
		return "", nil
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return string(b), nil
}

// DecodeHistogram reads a histogram written by EncodeHistogram; "" gives
// an empty histogram. The result is merged into a NewHistogram so its
// range is always 1 µs .. 120 s.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	h := NewHistogram()
	if s == "" {
		return h, nil
	}
	d, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	if dropped := h.Merge(d); dropped > 0 {
		return nil, fmt.Errorf("decode histogram: %d values outside 1µs..120s", dropped)
	}
	return h, nil
}

// MarshalJSON writes b compactly (see bucketJSON).
func (b *Bucket) MarshalJSON() ([]byte, error) {
	j := bucketJSON{
		Start: b.Start, Width: b.Width, Intended: b.Intended, Requests: b.Requests, OK: b.OK,
		Codes: b.Codes, Errors: b.Errors, BytesIn: b.BytesIn, BytesOut: b.BytesOut,
		Late: b.Late, ShedRetryAfter: b.ShedRetryAfter, Retries: b.Retries,
	}
	var err error
	if j.Latency, err = EncodeHistogram(b.Latency); err != nil {
		return nil, err
	}
	if j.Lag, err = EncodeHistogram(b.Lag); err != nil {
		return nil, err
	}
	if j.Shed, err = EncodeHistogram(b.Shed); err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote; histograms and maps are
// never nil afterwards.
func (b *Bucket) UnmarshalJSON(data []byte) error {
	var j bucketJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("decode bucket: %w", err)
	}
	*b = Bucket{
		Start: j.Start, Width: j.Width, Intended: j.Intended, Requests: j.Requests, OK: j.OK,
		Codes: j.Codes, Errors: j.Errors, BytesIn: j.BytesIn, BytesOut: j.BytesOut,
		Late: j.Late, ShedRetryAfter: j.ShedRetryAfter, Retries: j.Retries,
	}
	if b.Codes == nil {
		b.Codes = map[int]int64{}
	}
	if b.Errors == nil {
		b.Errors = map[string]int64{}
	}
	var err error
	if b.Latency, err = DecodeHistogram(j.Latency); err != nil {
		return fmt.Errorf("decode bucket at %s latency: %w", j.Start, err)
	}
	if b.Lag, err = DecodeHistogram(j.Lag); err != nil {
		return fmt.Errorf("decode bucket at %s lag: %w", j.Start, err)
	}
	if b.Shed, err = DecodeHistogram(j.Shed); err != nil {
		return fmt.Errorf("decode bucket at %s shed: %w", j.Start, err)
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
