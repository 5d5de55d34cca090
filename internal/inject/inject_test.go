package inject

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

func TestKindsSortedAndComplete(t *testing.T) {
	want := []string{"bandwidth", "container-pause", "down", "drain", "latency", "limit_data", "pod-kill", "process-pause",
		"reset_peer", "rollout", "slicer", "slow_close", "timeout"}
	if got := Kinds(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Kinds() = %v, want %v", got, want)
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate register did not panic")
		}
	}()
	register(scenario.FaultLatency, newLatency)
}

// fakeTP records calls; it is only used to check Build's output.
type fakeTP struct{ Toxiproxy }

func (fakeTP) APIURL() string { return "http://fake" }

// TestBuildErrors: Build refuses what the environment cannot serve with
// its own message, and a fault its kind's spec refuses (one that was not
// validated) with the spec's message: the rules live in the scenario's
// fault specs, not in inject.
func TestBuildErrors(t *testing.T) {
	env := &Env{Toxiproxy: fakeTP{}, RunID: "r1", Processes: map[string]int{"pg": 4242}}
	bs := scenario.ByteSize(64)
	const bySpec = "(the spec's message)"
	tests := []struct {
		name  string
		fault scenario.Fault
		want  string // substring of the error; "" = no error; bySpec = scenario.CheckFault's error
	}{
		{"unknown kind lists known", scenario.Fault{Name: "f", Type: "latncy"},
			`unknown type "latncy"; available: bandwidth, container-pause, down, drain, latency, limit_data, pod-kill, process-pause, reset_peer, rollout, slicer, slow_close, timeout`},
		{"latency ok", scenario.Fault{Name: "f", Type: "latency", Proxy: "pg", Latency: dur(100 * time.Millisecond)}, ""},
		{"latency missing", scenario.Fault{Name: "f", Type: "latency", Proxy: "pg"}, bySpec},
		{"jitter above latency", scenario.Fault{Name: "f", Type: "latency", Proxy: "pg", Latency: dur(10 * time.Millisecond), Jitter: dur(20 * time.Millisecond)}, bySpec},
		{"sub-ms latency", scenario.Fault{Name: "f", Type: "latency", Proxy: "pg", Latency: dur(300 * time.Microsecond)}, "rounds to 0ms"},
		{"foreign field", scenario.Fault{Name: "f", Type: "latency", Proxy: "pg", Latency: dur(time.Millisecond), Timeout: dur(0)}, bySpec},
		{"no proxy", scenario.Fault{Name: "f", Type: "timeout", Timeout: dur(0)}, bySpec},
		{"bad stream", scenario.Fault{Name: "f", Type: "timeout", Proxy: "pg", Timeout: dur(0), Stream: "sideways"}, bySpec},
		{"toxicity zero", scenario.Fault{Name: "f", Type: "timeout", Proxy: "pg", Timeout: dur(0), Toxicity: ptr(0.0)}, "toxicity 0 would never"},
		{"toxicity above one", scenario.Fault{Name: "f", Type: "timeout", Proxy: "pg", Timeout: dur(0), Toxicity: ptr(1.5)}, bySpec},
		{"bandwidth zero", scenario.Fault{Name: "f", Type: "bandwidth", Proxy: "pg", RateKBps: ptr(int64(0))}, "must be above 0"},
		{"slicer variation", scenario.Fault{Name: "f", Type: "slicer", Proxy: "pg", AverageSize: &bs, SizeVariation: &bs}, bySpec},
		{"limit_data missing", scenario.Fault{Name: "f", Type: "limit_data", Proxy: "pg"}, bySpec},
		{"down with stream", scenario.Fault{Name: "f", Type: "down", Proxy: "pg", Stream: "both"}, bySpec},
		{"pause unknown dep", scenario.Fault{Name: "f", Type: "process-pause", Dependency: "redis"}, `"redis" is not a local process; known: pg`},
		{"pause with proxy", scenario.Fault{Name: "f", Type: "process-pause", Dependency: "pg", Proxy: "pg"}, bySpec},
		{"container unknown", scenario.Fault{Name: "f", Type: "container-pause", Dependency: "pg"}, `"pg" is not a container; known: none`},
		{"bad fault name", scenario.Fault{Name: "a b", Type: "down", Proxy: "pg"}, "name:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == bySpec {
				specErr := scenario.CheckFault(tc.fault)
				if specErr == nil {
					t.Fatal("the fault spec accepts the fault")
				}
				want = specErr.Error()
			}
			_, err := Build(tc.fault, env)
			switch {
			case want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestToxicAttributesInToxiproxyUnits(t *testing.T) {
	env := &Env{Toxiproxy: fakeTP{}, RunID: "r1"}
	avg, vari := scenario.ByteSize(100), scenario.ByteSize(10)
	tests := []struct {
		fault scenario.Fault
		typ   string
		attrs map[string]any
	}{
		{scenario.Fault{Type: "latency", Latency: dur(1500 * time.Microsecond), Jitter: dur(time.Millisecond)}, "latency", map[string]any{"latency": int64(2), "jitter": int64(1)}},
		{scenario.Fault{Type: "timeout", Timeout: dur(3 * time.Second)}, "timeout", map[string]any{"timeout": int64(3000)}},
		{scenario.Fault{Type: "bandwidth", RateKBps: ptr(int64(10))}, "bandwidth", map[string]any{"rate": int64(10)}},
		{scenario.Fault{Type: "slow_close", Delay: dur(time.Second)}, "slow_close", map[string]any{"delay": int64(1000)}},
		{scenario.Fault{Type: "reset_peer", Timeout: dur(0)}, "reset_peer", map[string]any{"timeout": int64(0)}},
		{scenario.Fault{Type: "slicer", AverageSize: &avg, SizeVariation: &vari, Delay: dur(time.Millisecond)}, "slicer",
			map[string]any{"average_size": int64(100), "size_variation": int64(10), "delay": int64(1000)}},
		{scenario.Fault{Type: "limit_data", Bytes: &avg}, "limit_data", map[string]any{"bytes": int64(100)}},
	}
	for _, tc := range tests {
		t.Run(string(tc.fault.Type), func(t *testing.T) {
			tc.fault.Name, tc.fault.Proxy = "f", "pg"
			inj, err := Build(tc.fault, env)
			if err != nil {
				t.Fatal(err)
			}
			ti := inj.(*toxicInjector)
			if ti.typ != tc.typ || !reflect.DeepEqual(ti.attrs, tc.attrs) || ti.toxicity != 1 {
				t.Fatalf("got %s %v toxicity %v, want %s %v", ti.typ, ti.attrs, ti.toxicity, tc.typ, tc.attrs)
			}
		})
	}
}

func TestNaming(t *testing.T) {
	id := NewRunID(time.Date(2026, 11, 30, 7, 57, 0, 0, time.UTC))
	if !strings.HasPrefix(id, "20261130.075700.") || ValidRunID(id) != nil {
		t.Fatalf("run id %q", id)
	}
	name := ToxicName(id, "pg-pause", "up")
	if name != "drill-"+id+"-pg-pause-up" {
		t.Fatalf("toxic name %q", name)
	}
	if run, ok := RunOfToxic(name); !ok || run != id {
		t.Fatalf("RunOfToxic(%q) = %q %v", name, run, ok)
	}
	for _, s := range []string{"latency_downstream", "drill_meter_upstream", "drill-", "drill-UP-x"} {
		if _, ok := RunOfToxic(s); ok {
			t.Errorf("RunOfToxic(%q) claimed a drill toxic", s)
		}
	}
	if ValidRunID("a-b") == nil || ValidRunID("") == nil {
		t.Fatal("ValidRunID accepted a bad id")
	}
}

func TestJournalPendingAndTornLine(t *testing.T) {
	state := t.TempDir()
	j, err := OpenJournal(state, "r1")
	if err != nil {
		t.Fatal(err)
	}
	a := Entry{Op: OpApply, Key: "toxic/pg/a", Kind: KindToxic, Proxy: "pg", Toxic: "a"}
	b := Entry{Op: OpApply, Key: "toxic/pg/b", Kind: KindToxic, Proxy: "pg", Toxic: "b"}
	for _, e := range []Entry{a, b, {Op: OpRevert, Key: "toxic/pg/a", Kind: KindToxic}} {
		if err := j.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	// A run killed mid-write leaves a torn last line.
	f, _ := os.OpenFile(JournalPath(state, "r1"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"op":"apply","ke`)
	f.Close()
	entries, err := ReadJournal(JournalPath(state, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	p := Pending(entries)
	if len(p) != 1 || p[0].Toxic != "b" || p[0].Run != "r1" || p[0].Time.IsZero() {
		t.Fatalf("pending %+v", p)
	}
	runs, err := JournalRuns(state)
	if err != nil || !reflect.DeepEqual(runs, []string{"r1"}) {
		t.Fatalf("JournalRuns = %v %v", runs, err)
	}
}

func TestListJournals(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"r2.json", "r1.json", "r3.jsonl", "r4.json.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "r5.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	runs, err := ListJournals(dir, ".json")
	if err != nil || !reflect.DeepEqual(runs, []string{"r1", "r2"}) {
		t.Fatalf("ListJournals(.json) = %v %v, want [r1 r2]", runs, err)
	}
	runs, err = ListJournals(filepath.Join(dir, "missing"), ".json")
	if err != nil || runs != nil {
		t.Fatalf("ListJournals(missing dir) = %v %v, want none", runs, err)
	}
	if _, err := ListJournals(filepath.Join(dir, "r1.json"), ".json"); err == nil {
		t.Fatal("ListJournals of a file: no error")
	}
}

func TestPendingLaterApplySupersedes(t *testing.T) {
	e := func(op, key string, pids ...int) Entry {
		var procs []proctree.ID
		for _, p := range pids {
			procs = append(procs, proctree.ID{PID: p, Start: 1})
		}
		return Entry{Run: "r1", Op: op, Key: key, Kind: KindProcessPause, Procs: procs}
	}
	tests := []struct {
		name    string
		entries []Entry
		want    []Entry
	}{
		{"second apply replaces the first in place",
			[]Entry{e(OpApply, "p", 1), e(OpApply, "t"), e(OpApply, "p", 1, 2)},
			[]Entry{e(OpApply, "p", 1, 2), e(OpApply, "t")}},
		{"revert closes every apply before it",
			[]Entry{e(OpApply, "p", 1), e(OpApply, "p", 1, 2), e(OpRevert, "p")}, nil},
		{"apply after revert opens again",
			[]Entry{e(OpApply, "p", 1), e(OpRevert, "p"), e(OpApply, "t"), e(OpApply, "p", 3)},
			[]Entry{e(OpApply, "t"), e(OpApply, "p", 3)}},
		{"revert without apply is ignored", []Entry{e(OpRevert, "p")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pending(tc.entries); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Pending = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDefaultStateDir(t *testing.T) {
	env := map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d, _ := DefaultStateDir(get); d != "/x/state/drill" {
		t.Fatalf("got %s", d)
	}
	delete(env, "XDG_STATE_HOME")
	if d, _ := DefaultStateDir(get); d != "/home/u/.local/state/drill" {
		t.Fatalf("got %s", d)
	}
	delete(env, "HOME")
	if _, err := DefaultStateDir(get); err == nil {
		t.Fatal("no error without HOME")
	}
}

func TestStackLIFOIdempotentJoined(t *testing.T) {
	var order []string
	var s Stack
	mk := func(name string, fail *atomic.Int32) Revert {
		return func(ctx context.Context) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			order = append(order, name)
			if fail != nil && fail.Add(-1) >= 0 {
				return errors.New(name + " broke")
			}
			return nil
		}
	}
	var failsOnce atomic.Int32
	failsOnce.Store(1)
	first := s.Push("a", mk("a", nil))
	s.Push("b", mk("b", &failsOnce))
	s.Push("c", mk("c", nil))

	if err := first(context.Background()); err != nil { // fault a ends on time
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a cancelled run still reverts
	err := s.RevertAll(ctx)
	if err == nil || !strings.Contains(err.Error(), "revert b: b broke") {
		t.Fatalf("RevertAll error %v", err)
	}
	if got := strings.Join(order, ","); got != "a,c,b" {
		t.Fatalf("order %s, want a,c,b", got)
	}
	if s.Pending() != 1 {
		t.Fatalf("pending %d, want 1", s.Pending())
	}
	if err := s.RevertAll(context.Background()); err != nil { // retry only b
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "a,c,b,b" || s.Pending() != 0 {
		t.Fatalf("order %s pending %d", got, s.Pending())
	}
	if err := s.RevertAll(context.Background()); err != nil || len(order) != 4 {
		t.Fatalf("third RevertAll ran something: %v %v", order, err)
	}
}

func TestUnverifiedMessage(t *testing.T) {
	left := []Leftover{{RunID: "r1", Kind: KindToxic, Toxiproxy: "http://tp:8474", Proxy: "pg", Toxic: "drill-r1-pause-up"}}
	msg := UnverifiedMessage("r1", "http://tp:8474", left, nil)
	want := "cleanup of run r1 could not be verified; still in effect:\n" +
		"  - toxic drill-r1-pause-up on proxy pg at http://tp:8474\n" +
		"remove with: drill cleanup --run r1 --toxiproxy http://tp:8474"
	if msg != want {
		t.Fatalf("got:\n%s\nwant:\n%s", msg, want)
	}
}
