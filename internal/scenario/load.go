package scenario

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxFileSize is the largest scenario or manifest file drill reads, in bytes.
const MaxFileSize = 4 << 20

// Load reads the scenario at path and returns it checked and ready to plan:
// it parses the file ([Parse]), reads the probes of any Deployment manifest
// a service points at (paths relative to the scenario file; inline probes
// win per probe), applies defaults ([Scenario.SetDefaults]) and validates
// ([Scenario.Validate]).
//
// Every problem in bad input comes back at once as *[Errors], each naming
// file:line:col and the field path. Decode problems (syntax, unknown keys,
// wrong types or units) are reported without the semantic checks, which run
// only on a file that decodes; manifest, targets-file and semantic problems
// are reported together.
func Load(path string) (*Scenario, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, &Errors{List: []*Error{{File: path, Msg: err.Error()}}}
	}
	return load(path, data)
}

// LoadReader is [Load] for a scenario read from r (e.g. standard input, at
// most MaxFileSize bytes); name stands for the file in errors and relative
// paths in the scenario (manifests, targets files) resolve against the
// working directory. Errors are *[Errors].
func LoadReader(name string, r io.Reader) (*Scenario, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err == nil && len(data) > MaxFileSize {
		err = fmt.Errorf("read scenario: larger than %d bytes", MaxFileSize)
	} else if err != nil {
		err = fmt.Errorf("read scenario: %w", err)
	}
	if err != nil {
		return nil, &Errors{List: []*Error{{File: name, Msg: err.Error()}}}
	}
	sc, err := load(name, data)
	if e := AsErrors(err); e != nil {
		for _, x := range e.List {
			if strings.HasSuffix(x.Path, ".path") && strings.Contains(x.Msg, "no such file") {
				x.Msg += " (relative paths of a scenario read from standard input resolve against the working directory)"
			}
		}
	}
	return sc, err
}

func load(path string, data []byte) (*Scenario, error) {
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	// Manifest, file and semantic problems are reported together.
	var all errorList
	collect := func(err error) {
		if e := AsErrors(err); e != nil {
			all.list = append(all.list, e.List...)
		}
	}
	collect(s.loadManifests()) // before defaults: manifest probes get them too
	collect(s.checkFiles())
	s.SetDefaults()
	collect(s.Validate())
	if err := all.err(path); err != nil {
		return nil, err
	}
	return s, nil
}

// readLimited reads a file of at most MaxFileSize bytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("read scenario: is a directory, not a YAML file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read scenario: file is larger than %d bytes", MaxFileSize)
	}
	return data, nil
}
