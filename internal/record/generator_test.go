package record

import (
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// TestCheckGenerator: requests drill could not send for want of file
// descriptors make a problem per stream, naming the count, the first
// second and the limit; seconds outside the judged span and streams
// without such failures make none.
func TestCheckGenerator(t *testing.T) {
	series := func(fails map[int]int64) *measure.Series {
		s := &measure.Series{}
		for i := range 10 {
			b := measure.NewBucket(time.Duration(i)*time.Second, time.Second)
			if n := fails[i]; n > 0 {
				b.Errors[measure.ErrGeneratorFiles] = n
			}
			s.Buckets = append(s.Buckets, b)
		}
		return s
	}
	tests := []struct {
		name   string
		series map[string]*measure.Series
		want   []string
	}{
		{"none", map[string]*measure.Series{"orders": series(nil)}, nil},
		{"outside the judged span", map[string]*measure.Series{"orders": series(map[int]int64{0: 5, 9: 5})}, nil},
		{"two streams", map[string]*measure.Series{
			"tax":    series(map[int]int64{4: 3}),
			"orders": series(map[int]int64{2: 40, 6: 2}),
			"auth":   series(nil),
		}, []string{
			`stream "orders": drill ran out of file descriptors (open-file limit 20000) and could not send 42 requests, the first due in t=2s..3s`,
			`stream "tax": drill ran out of file descriptors (open-file limit 20000) and could not send 3 requests, the first due in t=4s..5s`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckGenerator(tc.series, time.Second, 9*time.Second, 20000)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems %q, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}
