package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultSlicer, newSlicer) }

// newSlicer builds a Toxiproxy slicer toxic: chunks are split into writes of
// averageSize ± sizeVariation bytes, delay µs apart (whole µs). The fault
// has passed its spec's checks ([scenario.CheckFault]).
func newSlicer(f scenario.Fault, env *Env) (Injector, error) {
	avg := int64(*f.AverageSize)
	var vari, us int64
	if f.SizeVariation != nil {
		vari = int64(*f.SizeVariation)
	}
	if f.Delay != nil {
		us = f.Delay.D().Microseconds()
	}
	return newToxic(f, env,
		map[string]any{"average_size": avg, "size_variation": vari, "delay": us},
		fmt.Sprintf("slicer %d±%d bytes every %dµs", avg, vari, us))
}
