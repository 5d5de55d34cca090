package workers

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

// Environment variables a worker pod reads.
const (
	// EnvSpec holds the worker [Spec] as JSON.
	EnvSpec = "DRILL_WORKER_SPEC"
	// EnvIndex is the worker's index. Kubernetes sets it in every pod of an
	// Indexed Job.
	EnvIndex = "JOB_COMPLETION_INDEX"
)

// Spec is what every worker of a run gets: the same for all of them (the
// index comes from the Job), so it fits one pod template.
type Spec struct {
	// RunID is the run's id; it prefixes {{.ID}} of body templates.
	RunID string `json:"runId"`
	// Workers is the number of workers N (>= 1).
	Workers int `json:"workers"`
	// Start is t=0 of the run: an absolute wall-clock time shared by every
	// worker. Stream start offsets count from it.
	Start time.Time `json:"start"`
	// Streams are the scenario's streams with their ${...} references
	// already expanded; at least one.
	Streams []scenario.Stream `json:"streams"`
}

// Validate returns every problem of s joined: no run id, fewer than one
// worker, no start time, no stream.
func (s Spec) Validate() error {
	var errs []error
	if s.RunID == "" {
		errs = append(errs, errors.New("runId is required"))
	}
	if s.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d must be at least 1", s.Workers))
	}
	if s.Start.IsZero() {
		errs = append(errs, errors.New("start (the shared t=0) is required"))
	}
	if len(s.Streams) == 0 {
		errs = append(errs, errors.New("at least one stream is required"))
	}
	return errors.Join(errs...)
}

// Duration is how long after t=0 the last stream's schedule ends.
func (s Spec) Duration() time.Duration {
	var end time.Duration
	for _, st := range s.Streams {
		d := st.Duration.D()
		if d == 0 {
			for _, step := range st.Steps {
				d += step.For.D()
			}
		}
		end = max(end, st.Start.D()+d)
	}
	return end
}

// FirstStart is the earliest stream start offset from t=0.
func (s Spec) FirstStart() time.Duration {
	first := time.Duration(-1)
	for _, st := range s.Streams {
		if first < 0 || st.Start.D() < first {
			first = st.Start.D()
		}
	}
	return max(first, 0)
}

// Encode returns s as the JSON a worker reads from [EnvSpec].
func (s Spec) Encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode worker spec: %w", err)
	}
	return string(b), nil
}

// DecodeSpec reads a worker spec from its JSON and checks it
// ([Spec.Validate]). Errors say what is wrong.
func DecodeSpec(data string) (Spec, error) {
	var s Spec
	if data == "" {
		return s, fmt.Errorf("no worker spec: %s is empty", EnvSpec)
	}
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		return s, fmt.Errorf("decode worker spec: %w", err)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("worker spec: %w", err)
	}
	return s, nil
}

// ParseIndex reads a worker index (decimal) and checks it against n
// workers.
func ParseIndex(v string, n int) (int, error) {
	if v == "" {
		return 0, fmt.Errorf("no worker index: %s is empty (run the worker in an Indexed Job, or pass --index)", EnvIndex)
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("worker index %q: %w", v, err)
	}
	if i < 0 || i >= n {
		return 0, fmt.Errorf("worker index %d must be within 0..%d", i, n-1)
	}
	return i, nil
}
