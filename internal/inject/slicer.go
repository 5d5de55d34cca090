package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultSlicer, newSlicer) }

// newSlicer builds a Toxiproxy slicer toxic: chunks are split into writes of
// averageSize ± sizeVariation bytes, delay µs apart. Fields: averageSize
// (required, > 0), sizeVariation (default 0, < averageSize), delay (default
// 0, converted to whole µs).
func newSlicer(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "averageSize", "sizeVariation", "delay"); err != nil {
		return nil, err
	}
	if f.AverageSize == nil || *f.AverageSize <= 0 {
		return nil, errors.New("averageSize: required and > 0, e.g. averageSize: 64B")
	}
	avg := int64(*f.AverageSize)
	var vari int64
	if f.SizeVariation != nil {
		vari = int64(*f.SizeVariation)
		if vari < 0 || vari >= avg {
			return nil, fmt.Errorf("sizeVariation: %d bytes must be >= 0 and < averageSize (%d bytes)", vari, avg)
		}
	}
	var us int64
	if f.Delay != nil {
		us = f.Delay.D().Microseconds()
		if f.Delay.D() > 0 && us == 0 {
			return nil, fmt.Errorf("delay: %v is below 1µs, the slicer's unit", f.Delay.D())
		}
	}
	return newToxic(f, env, "slicer",
		map[string]any{"average_size": avg, "size_variation": vari, "delay": us},
		fmt.Sprintf("slicer %d±%d bytes every %dµs", avg, vari, us))
}
