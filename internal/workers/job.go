package workers

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels on the Job and its pods.
const (
	// LabelRun carries the run id.
	LabelRun = "drill.dev/run"
	// LabelRole is RoleWorker on everything this package creates.
	LabelRole  = "drill.dev/role"
	RoleWorker = "load-worker"
	// LabelManagedBy is app.kubernetes.io/managed-by: drill.
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// SpecKey is the key of the worker spec in the run's Secret.
const SpecKey = "spec"

// AnnotationIndex is the annotation Kubernetes puts on each pod of an
// Indexed Job with its completion index.
const AnnotationIndex = "batch.kubernetes.io/job-completion-index"

// Defaults of [JobOptions].
const (
	// DefaultTTL is how long a finished Job stays (ttlSecondsAfterFinished)
	// if drill could not delete it.
	DefaultTTL = 10 * time.Minute
	// DefaultDeadlineMargin is how long past the run's end the Job may
	// still run (activeDeadlineSeconds counts from its start).
	DefaultDeadlineMargin = 2 * time.Minute
)

// JobOptions describe the workers' Job.
type JobOptions struct {
	// Namespace is where the Job goes (one the scenario allows).
	Namespace string
	// Image is the drill image the workers run (a FROM scratch image with
	// the binary at /drill).
	Image string
	// Command runs the worker in the image; default ["/drill", "worker"].
	Command []string
	// Spec is what every worker runs; Spec.Workers is the Job's
	// parallelism and completions.
	Spec Spec
	// Created is when the Job is created (wall clock): activeDeadlineSeconds
	// covers from then to the end of the schedule plus DeadlineMargin.
	Created time.Time
	// DeadlineMargin: see DefaultDeadlineMargin.
	DeadlineMargin time.Duration
	// TTL: see DefaultTTL.
	TTL time.Duration
}

// JobName is the Job's name for a run: "drill-<run id>-workers", dots
// replaced by dashes (pod host names are DNS labels).
func JobName(runID string) string {
	return "drill-" + strings.ReplaceAll(runID, ".", "-") + "-workers"
}

// RunSelector is the label selector of everything of one run.
func RunSelector(runID string) string {
	return LabelRun + "=" + runID + "," + LabelRole + "=" + RoleWorker
}

// NewJob returns the Indexed Job of o's workers (their spec comes from
// the Secret [NewSpecSecret] returns, of the same name): completionMode Indexed,
// parallelism and completions Spec.Workers, no retries (backoffLimit 0:
// a worker that fails is reported, never silently replaced, which would
// send its hits twice), restartPolicy Never, labelled with the run id,
// activeDeadlineSeconds past the schedule's end, ttlSecondsAfterFinished.
// Errors: a bad spec, no namespace or image.
func NewJob(o JobOptions) (*batchv1.Job, error) {
	var errs []error
	if err := o.Spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("workers job: namespace is required"))
	}
	if o.Image == "" {
		errs = append(errs, errors.New("workers job: image is required (load.image: the drill image the workers run)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cmd := o.Command
	if len(cmd) == 0 {
		cmd = []string{"/drill", "worker"}
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	if o.DeadlineMargin <= 0 {
		o.DeadlineMargin = DefaultDeadlineMargin
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	end := o.Spec.Start.Add(o.Spec.Duration()).Add(o.DeadlineMargin)
	deadline := int64(math.Ceil(max(end.Sub(o.Created), time.Second).Seconds()))
	ttl := int32(math.Ceil(o.TTL.Seconds()))
	n := int32(o.Spec.Workers)
	labels := map[string]string{
		LabelRun:       o.Spec.RunID,
		LabelRole:      RoleWorker,
		LabelManagedBy: "drill",
	}
	mode := batchv1.IndexedCompletion
	grace := int64(5)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      JobName(o.Spec.RunID),
			Namespace: o.Namespace,
			Labels:    labels,
		},
		Spec: batchv1.JobSpec{
			CompletionMode:          &mode,
			Parallelism:             &n,
			Completions:             &n,
			BackoffLimit:            new(int32(0)),
			ActiveDeadlineSeconds:   &deadline,
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:    "worker",
						Image:   o.Image,
						Command: cmd,
						// The spec holds the streams' headers, secrets included:
						// it lives in the run's Secret, not in the Job.
						Env: []corev1.EnvVar{{Name: EnvSpec, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: JobName(o.Spec.RunID)},
							Key:                  SpecKey,
						}}}},
					}},
				},
			},
		},
	}
	return job, nil
}

// NewSpecSecret returns the Secret that holds the workers' spec (key
// SpecKey; the streams' headers may carry credentials), named and
// labelled like the Job. Errors: a bad spec, no namespace.
func NewSpecSecret(o JobOptions) (*corev1.Secret, error) {
	if err := o.Spec.Validate(); err != nil {
		return nil, err
	}
	if o.Namespace == "" {
		return nil, errors.New("workers secret: namespace is required")
	}
	env, err := o.Spec.Encode()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      JobName(o.Spec.RunID),
			Namespace: o.Namespace,
			Labels:    map[string]string{LabelRun: o.Spec.RunID, LabelRole: RoleWorker, LabelManagedBy: "drill"},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{SpecKey: env},
	}, nil
}

// podIndex returns the completion index of a pod of the Job, or an error
// when it has none or a bad one.
func podIndex(pod *corev1.Pod) (int, error) {
	v, ok := pod.Annotations[AnnotationIndex]
	if !ok {
		v, ok = pod.Labels[AnnotationIndex]
	}
	if !ok {
		return 0, fmt.Errorf("pod %s has no %s annotation", pod.Name, AnnotationIndex)
	}
	var i int
	if _, err := fmt.Sscanf(v, "%d", &i); err != nil {
		return 0, fmt.Errorf("pod %s: index %q: %w", pod.Name, v, err)
	}
	return i, nil
}
