package workers

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drillhq/drill/internal/scenario"
)

func jobSpec() Spec {
	return Spec{
		RunID:   "20261202t0700z.ab12",
		Workers: 4,
		Start:   time.Date(2026, 12, 2, 7, 0, 30, 0, time.UTC),
		Streams: []scenario.Stream{{
			Name:     "orders",
			Targets:  []scenario.Target{{Method: "POST", URL: "http://orders.load.svc/orders", Headers: map[string]string{"Authorization": "Bearer s3cret"}}},
			Rate:     &scenario.Rate{Freq: 2800, Per: time.Second},
			Start:    scenario.Duration{Duration: 5 * time.Second},
			Duration: scenario.Duration{Duration: 60 * time.Second},
		}},
	}
}

// TestNewJob: an Indexed Job of N pods, never retried, deadline past the
// schedule's end, the spec from the Secret (not in the Job).
func TestNewJob(t *testing.T) {
	spec := jobSpec()
	created := spec.Start.Add(-30 * time.Second)
	job, err := NewJob(JobOptions{Namespace: "load", Image: "drill:1", Spec: spec, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	js := job.Spec
	checks := []struct {
		what string
		ok   bool
	}{
		{"name", job.Name == "drill-20261202t0700z-ab12-workers"},
		{"indexed", js.CompletionMode != nil && *js.CompletionMode == batchv1.IndexedCompletion},
		{"parallelism", *js.Parallelism == 4 && *js.Completions == 4},
		{"no retries", *js.BackoffLimit == 0},
		// 30 s to t=0, 5 s + 60 s of schedule, 2 min margin.
		{"deadline", *js.ActiveDeadlineSeconds == 30+65+120},
		{"ttl", *js.TTLSecondsAfterFinished == 600},
		{"restart never", js.Template.Spec.RestartPolicy == corev1.RestartPolicyNever},
		{"labels", job.Labels[LabelRun] == spec.RunID && js.Template.Labels[LabelRole] == RoleWorker},
		{"command", strings.Join(js.Template.Spec.Containers[0].Command, " ") == "/drill worker"},
		{"spec from secret", js.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name == job.Name},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: wrong in %+v", c.what, job)
		}
	}
	if strings.Contains(job.String(), "s3cret") {
		t.Error("the Job carries the streams' secret header")
	}
	sec, err := NewSpecSecret(JobOptions{Namespace: "load", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSpec(sec.StringData[SpecKey])
	if err != nil {
		t.Fatal(err)
	}
	if !got.Start.Equal(spec.Start) || got.Duration() != 65*time.Second || got.Streams[0].Rate.Freq != 2800 || got.Streams[0].Targets[0].Headers["Authorization"] != "Bearer s3cret" {
		t.Errorf("spec did not survive the Secret: %+v", got)
	}
}

func TestNewJobErrors(t *testing.T) {
	good := JobOptions{Namespace: "load", Image: "drill:1", Spec: jobSpec()}
	tests := []struct {
		name string
		edit func(*JobOptions)
		want string
	}{
		{"no namespace", func(o *JobOptions) { o.Namespace = "" }, "namespace is required"},
		{"no image", func(o *JobOptions) { o.Image = "" }, "image is required"},
		{"no workers", func(o *JobOptions) { o.Spec.Workers = 0 }, "workers 0 must be at least 1"},
		{"no start", func(o *JobOptions) { o.Spec.Start = time.Time{} }, "start (the shared t=0) is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			_, err := NewJob(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewJob: %v, want %q", err, tc.want)
			}
		})
	}
}
