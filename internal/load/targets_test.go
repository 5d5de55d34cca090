package load

import (
	"bytes"
	"testing"
	"text/template"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// TestBodyTemplateFastPath: plain templates render without text/template
// and give exactly its bytes; others fall back to it.
func TestBodyTemplateFastPath(t *testing.T) {
	clock := event.NewClock()
	s := &stream{idPrefix: "run1-orders-", clock: clock, sched: nil}
	var err error
	if s.sched, err = newSchedule(scenario.Stream{Rate: &scenario.Rate{Freq: 100, Per: time.Second}}, time.Second); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body string
		fast bool
	}{
		{`{"id":"{{.ID}}","sku":"SKU-1","quantity":1}`, true},
		{`{"ID":"{{.ID}}","Seq":{{.Seq}},"Time":"{{.Time}}"}`, true},
		{`{{.Seq}}`, true},
		{`{{- .ID -}} x {{ .Seq }}`, true},
		{`no actions`, true},
		{`{{.ID | printf "%q"}}`, false},
		{`{{if .Seq}}odd{{end}}`, false},
		{`{{$x := .ID}}{{$x}}`, false},
		{`{{printf "%05d" .Seq}}`, false},
	}
	for _, tt := range tests {
		tpl := template.Must(template.New("b").Option("missingkey=error").Parse(tt.body))
		bt := newBodyTemplate(tpl)
		if got := bt.parts != nil; got != tt.fast {
			t.Errorf("%s: fast path %v, want %v", tt.body, got, tt.fast)
		}
		for _, seq := range []uint64{0, 7, 12345678901} {
			got, err := bt.render(s, seq)
			if err != nil {
				t.Fatalf("%s: render: %v", tt.body, err)
			}
			var want bytes.Buffer
			data := BodyData{ID: s.idPrefix + itoa(seq), Seq: seq, Time: s.intendedWall(seq).UTC().Format(time.RFC3339Nano)}
			if err := tpl.Execute(&want, data); err != nil {
				t.Fatal(err)
			}
			if string(got) != want.String() {
				t.Errorf("%s seq %d: got %s, want %s", tt.body, seq, got, want.String())
			}
		}
	}
}

func itoa(n uint64) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
