package clock

import (
	"testing"
	"time"
)

func TestReal(t *testing.T) {
	c := Real(func() time.Duration { return 42 * time.Second })
	if got := c.Now(); got != 42*time.Second {
		t.Fatalf("Now() = %v, want the reading of now (42s)", got)
	}

	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if tm.Stop() {
		t.Fatal("Stop of a fired timer returned true")
	}
	if tm := c.NewTimer(time.Hour); !tm.Stop() {
		t.Fatal("Stop of a live timer returned false")
	}

	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	<-tk.C()
	tk.Stop()
}
