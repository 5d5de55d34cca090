package compose

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/composefile"
)

// failingInspect is an engine whose containers start but cannot be
// inspected; it records what is removed.
type failingInspect struct {
	Docker  // methods the test does not reach panic
	removed []string
}

func (f *failingInspect) ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	return client.ImageInspectResult{}, nil
}

func (f *failingInspect) ContainerCreate(context.Context, client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	return client.ContainerCreateResult{ID: "c1"}, nil
}

func (f *failingInspect) ContainerStart(context.Context, string, client.ContainerStartOptions) (client.ContainerStartResult, error) {
	return client.ContainerStartResult{}, nil
}

func (f *failingInspect) ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	return client.ContainerInspectResult{}, errors.New("engine busy")
}

func (f *failingInspect) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.removed = append(f.removed, id)
	return client.ContainerRemoveResult{}, nil
}

// TestStartFailureAfterStartIsRemoved: a container that started but whose
// start failed later (inspect) is still the stack's, so Down removes it.
func TestStartFailureAfterStartIsRemoved(t *testing.T) {
	f := &failingInspect{}
	st := &Stack{cli: f, run: "r", Network: "drill-r-p", Project: &composefile.Project{Name: "p"}}
	err := st.Start(context.Background(), &composefile.Project{Name: "p", Services: []composefile.Service{{Name: "api", Image: "x"}}})
	if err == nil {
		t.Fatal("Start passed with an engine that cannot inspect")
	}
	if err := st.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.removed) != 1 || f.removed[0] != "c1" {
		t.Errorf("Down removed %q, want the started container c1", f.removed)
	}
}

// TestServiceHealthyNeedsHealthcheck: depends_on with condition
// service_healthy on a container without a healthcheck fails, as docker
// compose does, instead of starting the dependent once the other runs.
func TestServiceHealthyNeedsHealthcheck(t *testing.T) {
	f := &failingInspect{}
	st := &Stack{cli: f, run: "r", Network: "drill-r-p", Project: &composefile.Project{Name: "p"},
		Containers: []*Container{{Service: "db", Name: "drill-r-db", ID: "c0"}}}
	err := st.Start(context.Background(), &composefile.Project{Name: "p", Services: []composefile.Service{
		{Name: "api", Image: "x", DependsOn: map[string]string{"db": "service_healthy"}}}})
	if err == nil || !strings.Contains(err.Error(), "container drill-r-db has no healthcheck configured") {
		t.Fatalf("err %v, want the dependency's missing healthcheck named", err)
	}
}
