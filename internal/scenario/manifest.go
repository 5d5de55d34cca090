package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ManifestPath returns the file a service's manifest reference points at:
// Path itself when absolute, else Path relative to the scenario file.
func (s *Scenario) ManifestPath(m *ManifestRef) string {
	if filepath.IsAbs(m.Path) {
		return m.Path
	}
	return filepath.Join(filepath.Dir(s.File), m.Path)
}

// loadManifests reads the probes of each service's Deployment manifest into
// Service.Probes (a probe written inline wins), and its container's
// resources.limits.cpu into Service.Resources and its lifecycle into
// Service.Lifecycle (each unless written inline). Positions of values read
// from a manifest carry the manifest's file name, so later errors point
// into the manifest. Errors are *Errors.
func (s *Scenario) loadManifests() error {
	var errs errorList
	for i := range s.Services {
		svc := &s.Services[i]
		if svc.Manifest == nil || svc.Manifest.Path == "" {
			continue
		}
		base := fmt.Sprintf("services[%d]", i)
		mpath := s.ManifestPath(svc.Manifest)
		fail := func(msg string) {
			e := &Error{File: s.File, Path: base + ".manifest.path", Msg: msg}
			if p, ok := s.Positions[e.Path]; ok {
				e.Line, e.Column = p.Line, p.Column
			}
			errs.add(e)
		}
		data, err := readLimited(mpath)
		if err != nil {
			fail(fmt.Sprintf("manifest %s: %s", mpath, strings.TrimPrefix(err.Error(), "read scenario: ")))
			continue
		}
		d := &decoder{file: mpath, pos: map[string]Position{}}
		container, msg := findContainer(d, data, svc.Manifest.Container)
		if container == nil {
			if msg != "" {
				fail(fmt.Sprintf("manifest %s: %s", mpath, msg))
			}
			for _, e := range d.errs.list {
				errs.add(e)
			}
			continue
		}
		// Only a preStop sleep is read (the one hook drill runs); a
		// manifest's other hooks are left to the cluster.
		if sl := get(get(get(container, "lifecycle"), "preStop"), "sleep"); sl != nil && svc.Lifecycle == nil {
			var a SleepAction
			path := base + ".lifecycle.preStop.sleep"
			before := len(d.errs.list)
			d.decode(sl, reflect.ValueOf(&a).Elem(), path, 0)
			if len(d.errs.list) == before {
				svc.Lifecycle = &Lifecycle{PreStop: &LifecycleHandler{Sleep: &a}}
				s.adoptPositions(d.pos, path, mpath)
			}
		}
		var probes Probes
		pv := reflect.ValueOf(&probes).Elem()
		pi := infoFor(pv.Type())
		for k := 0; k+1 < len(container.Content); k += 2 {
			key := container.Content[k].Value
			if idx, ok := pi.byName[key]; ok {
				d.decode(container.Content[k+1], pv.Field(pi.fields[idx].index), base+".probes."+key, 0)
			}
		}
		if cpu := get(get(get(container, "resources"), "limits"), "cpu"); cpu != nil && svc.CPULimit() == 0 {
			var q CPUQuantity
			path := base + ".resources.limits.cpu"
			before := len(d.errs.list)
			d.decode(cpu, reflect.ValueOf(&q).Elem(), path, 0)
			if len(d.errs.list) == before && q > 0 {
				if svc.Resources == nil {
					svc.Resources = &Resources{}
				}
				svc.Resources.Limits = &ResourceLimits{CPU: q}
				s.adoptPositions(d.pos, path, mpath)
			}
		}
		for _, e := range d.errs.list {
			errs.add(e)
		}
		if probes.StartupProbe != nil && svc.Probes.StartupProbe == nil {
			svc.Probes.StartupProbe = probes.StartupProbe
			s.adoptPositions(d.pos, base+".probes.startupProbe", mpath)
		}
		if probes.LivenessProbe != nil && svc.Probes.LivenessProbe == nil {
			svc.Probes.LivenessProbe = probes.LivenessProbe
			s.adoptPositions(d.pos, base+".probes.livenessProbe", mpath)
		}
		if probes.ReadinessProbe != nil && svc.Probes.ReadinessProbe == nil {
			svc.Probes.ReadinessProbe = probes.ReadinessProbe
			s.adoptPositions(d.pos, base+".probes.readinessProbe", mpath)
		}
	}
	return errs.err(s.File)
}

// adoptPositions copies the positions under prefix from a manifest decode.
func (s *Scenario) adoptPositions(pos map[string]Position, prefix, file string) {
	if s.Positions == nil {
		s.Positions = map[string]Position{}
	}
	for k, p := range pos {
		if k == prefix || strings.HasPrefix(k, prefix+".") {
			p.File = file
			s.Positions[k] = p
		}
	}
}

// findContainer returns the container mapping named name (or the only
// container when name is empty) of the first Deployment, StatefulSet,
// DaemonSet or Pod in the manifest. On failure it returns nil and a message
// (or records a located error in d).
func findContainer(d *decoder, data []byte, name string) (*yaml.Node, string) {
	if line, col, msg, bad := binaryProblem(data); bad {
		d.errs.add(&Error{File: d.file, Line: line, Column: col, Msg: msg})
		return nil, ""
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, "no Deployment, StatefulSet, DaemonSet or Pod with containers found"
		}
		if err != nil {
			d.syntaxError(data, err)
			return nil, ""
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		root := doc.Content[0]
		var containers *yaml.Node
		switch kind := get(root, "kind"); {
		case kind != nil && kind.Value == "Pod":
			containers = get(get(root, "spec"), "containers")
		case kind != nil && (kind.Value == "Deployment" || kind.Value == "StatefulSet" || kind.Value == "DaemonSet"):
			containers = get(get(get(get(root, "spec"), "template"), "spec"), "containers")
		}
		if containers == nil || containers.Kind != yaml.SequenceNode || len(containers.Content) == 0 {
			continue
		}
		var names []string
		for _, c := range containers.Content {
			n := get(c, "name")
			if n == nil {
				continue
			}
			names = append(names, n.Value)
			if name != "" && n.Value == name {
				return c, ""
			}
		}
		if name == "" && len(containers.Content) == 1 {
			return containers.Content[0], ""
		}
		if name == "" {
			return nil, fmt.Sprintf("has %d containers (%s); set manifest.container", len(names), strings.Join(names, ", "))
		}
		return nil, fmt.Sprintf("no container %q; known: %s", name, strings.Join(names, ", "))
	}
}

// get returns the value of key in mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// FilePath resolves a path written in the scenario (a targets file):
// absolute paths stay, relative ones are relative to the scenario file.
func (s *Scenario) FilePath(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(s.File), path)
}

// checkFiles checks that the targets files streams name can be read, so a
// missing file is bad input found before anything starts. Errors are *Errors.
func (s *Scenario) checkFiles() error {
	var errs errorList
	for i, st := range s.Streams {
		if st.TargetsFile == nil || st.TargetsFile.Path == "" {
			continue
		}
		path := s.FilePath(st.TargetsFile.Path)
		f, err := os.Open(path)
		if err == nil {
			var info os.FileInfo
			info, err = f.Stat()
			f.Close()
			if err == nil && info.IsDir() {
				err = fmt.Errorf("is a directory")
			}
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			e := &Error{File: s.File, Path: fmt.Sprintf("streams[%d].targetsFile.path", i), Msg: fmt.Sprintf("targets file %s: %v", path, err)}
			if p, ok := s.Positions[e.Path]; ok {
				e.Line, e.Column = p.Line, p.Column
			}
			errs.add(e)
		}
	}
	return errs.err(s.File)
}
