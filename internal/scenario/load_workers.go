package scenario

import (
	"fmt"
)

// LoadSpec says where a run's load is generated. The zero value (or no load
// section) is the drill process itself.
type LoadSpec struct {
	// Workers spreads every stream's schedule over this many worker pods of
	// one Kubernetes Indexed Job (kubernetes environment only): worker i
	// sends the requests whose sequence number is i mod Workers, all timed
	// from one shared t=0, so together they send exactly the one-process
	// schedule. 0 (default): load from the drill process. At most 1000.
	Workers int `yaml:"workers,omitempty" json:"workers,omitempty"`
	// Image is the container image the workers run: a drill image with the
	// binary at /drill (the FROM scratch image of drill's static binary);
	// required with workers.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
}

// MaxLoadWorkers bounds load.workers.
const MaxLoadWorkers = 1000

// load checks the load section: workers within 0..MaxLoadWorkers, only in
// a kubernetes environment, with an image, and every stream on a schedule
// the workers can share (not rate 0, as fast as possible).
func (v *validator) load() {
	l := v.s.Load
	if l == nil {
		return
	}
	if l.Workers < 0 || l.Workers > MaxLoadWorkers {
		v.errorf("load.workers", "workers %d must be within 0..%d", l.Workers, MaxLoadWorkers)
		return
	}
	if l.Workers == 0 {
		if l.Image != "" {
			v.errorf("load.image", "image is for load workers; set load.workers too, or remove it")
		}
		return
	}
	if v.s.Environment.Type != EnvKubernetes {
		v.errorf("load.workers", "load workers run as a Kubernetes Job: they need environment.type kubernetes")
	}
	if l.Image == "" {
		v.errorf("load.image", "load.workers needs image: the drill image the workers run (binary at /drill)")
	}
	for i, st := range v.s.Streams {
		if st.Rate != nil && st.Rate.Freq == 0 {
			v.errorf(fmt.Sprintf("streams[%d].rate", i), "a stream spread over load workers needs a schedule to share: rate 0 (as fast as possible) has none")
		}
	}
}
