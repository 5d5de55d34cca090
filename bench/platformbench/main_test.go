package main

import (
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestStreamsAt: every shipped seed scenario's streams, aimed at a stub,
// make a valid scenario for drill load with the same rates and bodies.
func TestStreamsAt(t *testing.T) {
	for _, f := range []string{"orders-db-brownout", "payment-tax-brownout", "orders-overload-routing", "probe-tutorial-latency"} {
		t.Run(f, func(t *testing.T) {
			sc, err := scenario.Load("../../scenarios/" + f + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			b, err := streamsAt(sc, "http://127.0.0.1:9/")
			if err != nil {
				t.Fatal(err)
			}
			alone, err := scenario.Parse(f+"-load-alone.yaml", b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if len(alone.Streams) != len(sc.Streams) {
				t.Fatalf("%d streams, want %d", len(alone.Streams), len(sc.Streams))
			}
			for i, st := range alone.Streams {
				orig := sc.Streams[i]
				for j, tg := range st.Targets {
					if !strings.HasPrefix(tg.URL, "http://127.0.0.1:9/") || tg.Body != orig.Targets[j].Body || tg.Method != orig.Targets[j].Method {
						t.Errorf("stream %s target %d: %+v, from %+v", st.Name, j, tg, orig.Targets[j])
					}
				}
				if (st.Rate == nil) != (orig.Rate == nil) || len(st.Steps) != len(orig.Steps) || st.Timeout != orig.Timeout {
					t.Errorf("stream %s: rate %v steps %d timeout %v, want %v %d %v", st.Name, st.Rate, len(st.Steps), st.Timeout, orig.Rate, len(orig.Steps), orig.Timeout)
				}
			}
		})
	}
}
