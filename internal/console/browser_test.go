package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// chromium finds a headless-capable Chromium, or skips the test saying why
// (under CI=true: fails it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	needs.Part(t, "Chromium", errors.New("none of chromium, chromium-browser, google-chrome on PATH (Debian: apt-get install chromium; .ci/run installs it)"))
	return ""
}

// TestConsoleInBrowser opens the console of a short drill in headless
// Chromium, watches the clock, plots and timeline update, starts and ends
// the manual fault by clicking, adds an annotation, and checks in run.json
// that the fault's window is the clicked one, the annotation is there and
// cleanup was verified. The console closes when the run ends, as without
// --ui-linger: the page keeps the verdict and the three plots as drawn at
// the end. With DRILL_CONSOLE_SCREENSHOT=FILE it saves a PNG of the page
// mid-fault there. A run that comes back INVALID before load starts is
// run once more, then fails the test (needs.ValidRun).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 60 s drill in a browser")
	}
	exe := chromium(t)
	needs.ValidRun(t, func(int) (struct{}, string) { return struct{}{}, consoleInBrowser(t, exe) })
}

// consoleInBrowser is one run of TestConsoleInBrowser with the Chromium at
// exe. It returns why the run was INVALID when it ended before load
// started, "" when the test ran through.
func consoleInBrowser(t *testing.T, exe string) (invalid string) {
	t.Helper()
	d := startDrillClosing(t, "browser.yaml", Options{})

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
				return fmt.Sprintf("the run ended before load (exit 4): %v", o.err)
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
	// The console has closed; the page still shows the last plots.
	if resp, err := http.Get(d.url("/api/state")); err == nil {
		resp.Body.Close()
		t.Fatalf("the console still answers after the run: %s", resp.Status)
	}
	run("let the page notice the console closed", chromedp.Sleep(1500*time.Millisecond))
	var widths []int
	for deadline := time.Now().Add(10 * time.Second); ; {
		widths, err = chromedp.Run(ctx, chromedp.Evaluate[[]int](`["latency", "throughput", "ready"].map(function (n) { var i = document.getElementById("plot-" + n); return i.complete ? i.naturalWidth : -1; })`))
		if err != nil {
			t.Fatalf("read the plots' widths: %v", err)
		}
		if !slices.Contains(widths, -1) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, n := range []string{"latency", "throughput", "ready"} {
		if widths[i] <= 0 {
			t.Errorf("after the run, with the console closed, plot %s is no image (naturalWidth %d; -1: still loading)", n, widths[i])
		}
	}
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
	return ""
}

// TestConsolePageLightInBrowser feeds a console's page in headless
// Chromium four seconds of the run per second (no drill: the test sets
// the console's state itself) and counts the page's plot fetches: the
// plots are fetched every 5 s, not on every second's point; while the
// tab is hidden nothing is fetched or redrawn, and when it shows again the
// page draws the newest state and fetches the plots at once.
func TestConsolePageLightInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium for about 30 s")
	}
	exe := chromium(t)
	srv, err := Listen(Options{})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = srv.Close(ctx)
	})
	// feed publishes the run at second n, as the console's follow loop
	// does each second.
	feed := func(n int) {
		st := control.State{Scenario: "light", RunID: "r1", Now: time.Duration(n) * time.Second, Duration: 600 * time.Second,
			Phase: "run", Running: true,
			Streams:  []control.StreamLive{{Name: "orders", State: "running", IntendedRate: 100, AchievedRate: 100, P50: 3 * time.Millisecond, P99: 9 * time.Millisecond}},
			Services: []control.ServiceLive{{Name: "api", Ready: 2, Replicas: 2}}}
		p := srv.live.setState(st)
		srv.hub.publish("state", st)
		srv.hub.publish("point", p)
	}
	second := 0
	feedFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			second++
			feed(second)
		}
	}
	feed(0)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1400, 1100), chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 120*time.Second)
	defer cancel()
	eval := func(what, js string) int {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	const plotFetches = `performance.getEntriesByType("resource").filter(function (e) { return e.name.indexOf("/api/plots/") >= 0; }).length`
	const clock = `Math.round(parseFloat(document.getElementById("clock").textContent))`
	setVisibility := func(state string) {
		t.Helper()
		eval("set the tab "+state, `(function () {
			Object.defineProperty(document, "visibilityState", { configurable: true, get: function () { return "`+state+`"; } });
			document.dispatchEvent(new Event("visibilitychange"));
			return 0;
		})()`)
	}

	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL()+"?token="+srv.Token())); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); eval("count the first plot fetches", plotFetches) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the page did not fetch its three plots on opening")
		}
	}

	// 11 s of four points a second (44 points): the first fetch, then at
	// most one every 5 s.
	eval("clear the resource timings", `(performance.clearResourceTimings(), 0)`)
	feedFor(11 * time.Second)
	if n := eval("count the plot fetches", plotFetches); n < 3 || n > 9 {
		t.Errorf("%d plot fetches over 11 s of %d points; want 3 to 9 (the three plots every 5 s)", n, second)
	}

	// Hidden: neither fetches nor redraws.
	setVisibility("hidden")
	shown := eval("read the clock", clock)
	eval("clear the resource timings", `(performance.clearResourceTimings(), 0)`)
	feedFor(7 * time.Second)
	if n := eval("count the plot fetches while hidden", plotFetches); n != 0 {
		t.Errorf("%d plot fetches while the tab was hidden; want 0", n)
	}
	if c := eval("read the clock while hidden", clock); c != shown {
		t.Errorf("the clock was redrawn while the tab was hidden: %d s, then %d s", shown, c)
	}

	// Shown again: the newest state and the plots at once.
	setVisibility("visible")
	if c := eval("read the clock when shown", clock); c != second {
		t.Errorf("the clock shows t+%d s when the tab shows again; want the newest, t+%d s", c, second)
	}
	for deadline := time.Now().Add(5 * time.Second); eval("count the plot fetches when shown", plotFetches) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the page did not fetch its plots when the tab showed again")
		}
	}
}
