package workers

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/measure"
)

// TestJournalLinesSkipsOtherLines: a pod's log with the worker's stderr
// lines between its journal lines reads as the journal lines alone; the
// others go to other, in order.
func TestJournalLinesSkipsOtherLines(t *testing.T) {
	log := strings.Join([]string{
		`time=2026-01-02T03:04:05Z level=INFO msg="worker ready" worker=1`,
		`{"kind":"worker","data":{"event":"ready","index":1,"at":-5000000}}`,
		``,
		`[drill] a line of someone else`,
		`{"kind":"worker","data":{"event":"done","index":1,"at":3000000000,"sent":7}}`,
		`{"kind":"worker","data":{"event":"alive"`, // cut: the log ended mid-line
	}, "\n")
	var others []string
	jl := &journalLines{br: bufio.NewReader(strings.NewReader(log)), other: func(l []byte) { others = append(others, strings.TrimSpace(string(l))) }}
	var events []string
	err := measure.ReadJournal(jl, measure.JournalReader{Data: func(kind string, data json.RawMessage) error {
		var s Status
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		events = append(events, kind+":"+s.Event)
		return nil
	}})
	if err != nil {
		t.Fatalf("ReadJournal: %v", err)
	}
	if strings.Join(events, ",") != "worker:ready,worker:done" {
		t.Errorf("journal events %v, want worker:ready, worker:done", events)
	}
	if len(others) != 2 || !strings.HasPrefix(others[0], "time=") || !strings.HasPrefix(others[1], "[drill]") {
		t.Errorf("other lines %q, want the two non-journal lines in order", others)
	}
}
