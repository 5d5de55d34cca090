package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
)

// chromium finds a headless-capable Chromium, or skips the test saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it): the browser test needs one")
	return ""
}

// TestConsoleInBrowser opens the console of a short drill in headless
// Chromium, watches the clock, plots and timeline update, starts and ends
// the manual fault by clicking, adds an annotation, and checks in run.json
// that the fault's window is the clicked one, the annotation is there and
// cleanup was verified. With DRILL_CONSOLE_SCREENSHOT=FILE it saves a PNG
// of the page mid-fault there.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 60 s drill in a browser")
	}
	exe := chromium(t)
	d := startDrill(t, "browser.yaml", Options{})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // containers and root: Chromium's sandbox cannot start
		chromedp.WindowSize(1400, 1100),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 240*time.Second)
	defer cancel()

	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			select {
			case o := <-d.done:
				t.Fatalf("%s: %v (the drill ended: exit %d, %v)", what, err, o.res.Code, o.err)
			default:
				t.Fatalf("%s: %v (the drill still runs)", what, err)
			}
		}
	}
	text := func(what string, sel chromedp.ID) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	// The printed URL carries the token; the console sets its cookie and
	// redirects to /.
	run("open the console", chromedp.Navigate(d.srv.URL()+"?token="+d.srv.Token()))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("read the address: %v", err)
	}
	if strings.Contains(loc, "token=") {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	// Load has started once the manual fault's start button is enabled; a
	// verdict instead means the run ended before load started.
	for deadline := time.Now().Add(90 * time.Second); ; {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function () { var b = document.getElementById("fault-slow-db-start"); return document.getElementById("verdict").textContent !== "" ? "over" : (b && !b.disabled ? "live" : ""); })()`))
		if err != nil {
			t.Fatalf("wait for load: %v", err)
		}
		if state == "live" {
			break
		}
		if state == "over" || time.Now().After(deadline) {
			o := d.wait(t)
			if o.res.Code == exitcode.InvalidMeasurement {
				t.Skipf("the run ended before load on this busy machine (exit 4): %v", o.err)
			}
			t.Fatalf("load never started: exit %d, %v", o.res.Code, o.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	clockAt := func() float64 {
		t.Helper()
		s := text("read the clock", "clock")
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			t.Fatalf("clock %q: %v", s, err)
		}
		return v
	}
	first := clockAt()
	run("wait for the next second", chromedp.Sleep(2500*time.Millisecond))
	if next := clockAt(); next <= first {
		t.Errorf("the run clock did not move: %.1f then %.1f", first, next)
	}
	run("wait for the timeline", chromedp.WaitVisible(chromedp.CSS(`#events tr`)))

	run("click start", chromedp.Click(chromedp.ID("fault-slow-db-start")))
	run("wait for the fault on", chromedp.WaitVisible(chromedp.CSS(`#fault-slow-db td.state-on`)))
	run("wait for the fault-on row", chromedp.WaitVisible(chromedp.CSS(`#events tr.ev-fault-on`)))
	// Let the plots show a few seconds of the fault.
	run("let the fault show", chromedp.Sleep(3500*time.Millisecond))
	plotWidth, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.min(document.getElementById("plot-latency").naturalWidth, document.getElementById("plot-throughput").naturalWidth)`))
	if err != nil || plotWidth == 0 {
		t.Errorf("the plots did not load (width %d, %v)", plotWidth, err)
	}
	run("wait for a provisional verdict", chromedp.WaitVisible(chromedp.CSS(`#assertions td.v-pass`)))
	run("annotate", chromedp.SendKeys(chromedp.ID("note"), "dashboard X lagged"), chromedp.Click(chromedp.ID("annotate-btn")))
	run("wait for the annotation row", chromedp.WaitVisible(chromedp.CSS(`#events tr.ev-operator`)))
	if shot := os.Getenv("DRILL_CONSOLE_SCREENSHOT"); shot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Errorf("save the screenshot: %v", err)
		}
	}
	run("click end", chromedp.WaitEnabled(chromedp.ID("fault-slow-db-end")), chromedp.Click(chromedp.ID("fault-slow-db-end")))
	run("wait for the fault ended", chromedp.WaitVisible(chromedp.CSS(`#fault-slow-db td.state-ended`)))
	run("wait for the verdict", chromedp.WaitVisible(chromedp.ID("report-link")))
	verdict := text("read the verdict", "verdict")

	o := d.wait(t)
	if o.res.Code != exitcode.OK && o.res.Code != exitcode.InvalidMeasurement {
		t.Errorf("exit %d: %v", o.res.Code, o.err)
	}
	if !strings.Contains(verdict, "exit "+strconv.Itoa(o.res.Code)) {
		t.Errorf("the page's verdict %q does not match exit %d", verdict, o.res.Code)
	}
	rec, err := record.Load(filepath.Join(d.outDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Cleanup.Verified {
		t.Errorf("cleanup not verified: %+v", rec.Cleanup)
	}
	var start, on, end, off time.Duration = -1, -1, -1, -1
	var annotated bool
	for _, e := range rec.Events {
		switch {
		case e.Kind == event.Operator && e.Reason == "start":
			start = e.At
		case e.Kind == event.Operator && e.Reason == "end":
			end = e.At
		case e.Kind == event.Operator && e.Reason == "annotation":
			annotated = e.Detail == "dashboard X lagged"
		case e.Kind == event.FaultOn && e.Fault == "slow-db":
			on = e.At
		case e.Kind == event.FaultOff && e.Fault == "slow-db":
			off = e.At
		}
	}
	if !annotated {
		t.Error("run.json has no annotation from the page")
	}
	// The fault went on and off when clicked: right after each click.
	if start < 0 || on < start || on-start > time.Second || end < on || off < end || off-end > time.Second {
		t.Errorf("clicks start %s end %s, fault on %s off %s", start, end, on, off)
	}
	w, ok := rec.Plan.Window("fault:slow-db")
	if !ok || w.Start != on || w.End != off {
		t.Errorf("window fault:slow-db = [%s, %s), want the clicked [%s, %s)", w.Start, w.End, on, off)
	}
}
