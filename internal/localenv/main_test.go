package localenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/testutil/testproc"
)

// testServerEnv switches the test binary into the controllable test server.
const testServerEnv = "DRILL_RUNTIME_TESTSERVER"

func TestMain(m *testing.M) {
	testproc.HelperMain(testServerEnv, testServer)
	os.Exit(m.Run())
}

// testServer is a tiny service whose probe answers can be flipped at run
// time. It listens on $PORT and serves:
//
//	/startup /live /ready   the probe endpoints
//	/control?live=503&ready=fail:2&startup=200&exit=3
//	                        set an endpoint's answer: a status code, "hang"
//	                        (sleep 30s), or fail:N (503 for the next N
//	                        probes, then 200); exit=N exits with code N
//	/env?name=X             the value of environment variable X
//	/                       "pid=<pid> port=<port>"
//
// Environment: STARTUP, LIVE, READY give initial answers (default 200);
// EXIT_AFTER (a duration) exits with code 3 after that long; IGNORE_TERM=1
// ignores SIGTERM; TERM_LINGER (a duration) lingers that long after
// SIGTERM before it exits (a service that takes its time to shut down,
// still serving meanwhile); CHILD=1 starts "sleep 300" and prints its pid;
// LISTEN_ENV names the variable to read the listen address from instead
// of PORT (a port, host:port or :port, all on 127.0.0.1); LISTEN_ON is an
// address to listen on whatever it was given.
func testServer() int {
	port := os.Getenv("PORT")
	fmt.Printf("test server pid %d starting on port %s\n", os.Getpid(), port)
	if os.Getenv("IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		linger, _ := time.ParseDuration(os.Getenv("TERM_LINGER"))
		go func() {
			<-ch
			if linger > 0 {
				fmt.Printf("got SIGTERM, exiting in %s\n", linger)
				time.Sleep(linger)
			}
			fmt.Println("got SIGTERM, exiting")
			os.Exit(0)
		}()
	}
	if os.Getenv("CHILD") == "1" {
		c := exec.Command("sleep", "300")
		if err := c.Start(); err != nil {
			fmt.Println("start child:", err)
			return 1
		}
		fmt.Printf("child pid %d\n", c.Process.Pid)
	}
	if d, err := time.ParseDuration(os.Getenv("EXIT_AFTER")); err == nil {
		time.AfterFunc(d, func() {
			fmt.Println("exiting by myself")
			os.Exit(3)
		})
	}
	ep := map[string]*answer{
		"startup": newAnswer(os.Getenv("STARTUP")),
		"live":    newAnswer(os.Getenv("LIVE")),
		"ready":   newAnswer(os.Getenv("READY")),
	}
	mux := http.NewServeMux()
	for name, a := range ep {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			code := a.next()
			if code == 0 {
				time.Sleep(30 * time.Second)
				code = 200
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "%s: %d\n", name, code)
		})
	}
	mux.HandleFunc("/control", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for name, a := range ep {
			if v := q.Get(name); v != "" {
				a.set(v)
				fmt.Printf("control: %s=%s\n", name, v)
			}
		}
		if v := q.Get("exit"); v != "" {
			code, _ := strconv.Atoi(v)
			fmt.Printf("control: exit %d\n", code)
			defer func() { go func() { time.Sleep(50 * time.Millisecond); os.Exit(code) }() }()
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, os.Getenv(r.URL.Query().Get("name")))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "pid=%d port=%s\n", os.Getpid(), port)
	})
	addr := "127.0.0.1:" + port
	if v := os.Getenv("LISTEN_ENV"); v != "" {
		addr = os.Getenv(v)
		switch {
		case strings.HasPrefix(addr, ":"):
			addr = "127.0.0.1" + addr
		case !strings.Contains(addr, ":"):
			addr = "127.0.0.1:" + addr
		}
	}
	if v := os.Getenv("LISTEN_ON"); v != "" {
		addr = v
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	if err := http.Serve(ln, mux); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Println("serve:", err)
		return 1
	}
	return 0
}

// answer is one probe endpoint's programmed answer.
type answer struct {
	mu        sync.Mutex
	code      int // 0 = hang
	failsLeft int // fail:N
}

func newAnswer(v string) *answer {
	a := &answer{code: 200}
	if v != "" {
		a.set(v)
	}
	return a
}

func (a *answer) set(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failsLeft = 0
	switch {
	case v == "hang":
		a.code = 0
	case strings.HasPrefix(v, "fail:"):
		a.failsLeft, _ = strconv.Atoi(strings.TrimPrefix(v, "fail:"))
		a.code = 200
	default:
		a.code, _ = strconv.Atoi(v)
	}
}

func (a *answer) next() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failsLeft > 0 {
		a.failsLeft--
		return 503
	}
	return a.code
}
