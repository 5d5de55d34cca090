package nodeagent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// DefaultKubeletListen is where the agent serves the kubelet's API when
// [Config.KubeletListen] is empty: a free port on loopback, reachable by
// an API server on this machine.
const DefaultKubeletListen = "127.0.0.1:0"

// logPoll is how often a followed container log is checked for new
// output.
const logPoll = 50 * time.Millisecond

// kubeletServer serves the part of the kubelet's HTTPS API that the API
// server proxies pods/log to: GET /containerLogs/{namespace}/{pod}/{container}
// (pkg/kubelet/server/server.go of Kubernetes v1.37.2).
type kubeletServer struct {
	ln   net.Listener
	srv  *http.Server
	host string // reported as the Node's Hostname address
	port int    // reported as status.daemonEndpoints.kubeletEndpoint.Port
}

// newKubeletServer listens on addr ("" means DefaultKubeletListen) with a
// fresh self-signed certificate for its host. The host must be one the API
// server can dial (not 0.0.0.0 or ::): it becomes the Node's address.
func newKubeletServer(addr string, h http.Handler) (*kubeletServer, error) {
	if addr == "" {
		addr = DefaultKubeletListen
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("kubelet listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return nil, fmt.Errorf("kubelet listen address %q: give the host the API server dials (e.g. 127.0.0.1), not an unspecified one", addr)
	}
	cert, err := selfSignedCert(host)
	if err != nil {
		return nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the kubelet API on %s: %w", addr, err)
	}
	ks := &kubeletServer{ln: ln, host: host, port: ln.Addr().(*net.TCPAddr).Port}
	ks.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	return ks, nil
}

// serve serves until close; it returns at once.
func (ks *kubeletServer) serve() {
	go func() { _ = ks.srv.ServeTLS(ks.ln, "", "") }()
}

// close stops serving and ends every open stream.
func (ks *kubeletServer) close() {
	_ = ks.srv.Close()
	_ = ks.ln.Close()
}

// selfSignedCert returns an ECDSA P-256 certificate for host (an IP or a
// DNS name), valid for a year. The API server does not check it unless it
// runs with --kubelet-certificate-authority.
func selfSignedCert(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "drill-agent@" + host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// kubeletHandler routes the kubelet API requests the agent answers.
func (a *Agent) kubeletHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return mux
}

// logQuery is the part of core/v1 PodLogOptions the agent honours.
type logQuery struct {
	follow     bool
	tailLines  int64 // -1: all
	limitBytes int64 // -1: no limit
}

// parseLogQuery reads the query the API server forwards (LogLocation in
// pkg/registry/core/pod/strategy.go). Options the agent cannot honour are
// refused rather than ignored: previous (one log per pod, appended across
// restarts), timestamps, sinceSeconds, sinceTime, and a stream other than
// All (the kubelet without PodLogsQuerySplitStreams refuses it too).
func parseLogQuery(q map[string][]string) (logQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lq := logQuery{tailLines: -1, limitBytes: -1}
	for _, k := range []string{"previous", "timestamps"} {
		if b, _ := strconv.ParseBool(get(k)); b {
			return lq, fmt.Errorf("%s=true is not supported by the drill node agent", k)
		}
	}
	for _, k := range []string{"sinceSeconds", "sinceTime"} {
		if get(k) != "" {
			return lq, fmt.Errorf("%s is not supported by the drill node agent", k)
		}
	}
	if s := get("stream"); s != "" && s != "All" {
		return lq, fmt.Errorf("unable to return the given log stream: %q (the drill node agent keeps stdout and stderr together)", s)
	}
	if v := get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return lq, fmt.Errorf("follow=%q: %w", v, err)
		}
		lq.follow = b
	}
	for k, dst := range map[string]*int64{"tailLines": &lq.tailLines, "limitBytes": &lq.limitBytes} {
		if v := get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || (k == "limitBytes" && n == 0) {
				return lq, fmt.Errorf("%s=%q: want a positive integer", k, v)
			}
			*dst = n
		}
	}
	return lq, nil
}

// containerLogs serves a container's output as the kubelet does: plain
// text, stdout and stderr in one stream; with follow=true it stays open
// until the container ends (its process has exited and all its output is
// written) or the client goes away.
func (a *Agent) containerLogs(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	lq, err := parseLogQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	r := a.pods[ns+"/"+pod]
	a.mu.Unlock()
	if r == nil {
		http.Error(w, fmt.Sprintf("pod %q does not exist", pod), http.StatusNotFound)
		return
	}
	r.mu.Lock()
	name, path, waiting := r.view.container, r.outPath, r.view.waitingReason
	r.mu.Unlock()
	if name != container {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, pod), http.StatusNotFound)
		return
	}
	rep := r.replica()
	if rep == nil || path == "" {
		if waiting == "" {
			waiting = "ContainerCreating"
		}
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod, waiting), http.StatusBadRequest)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, fmt.Sprintf("open the log of container %q in pod %q: %v", container, pod, err), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	if lq.tailLines >= 0 {
		off, err := tailOffset(f, lq.tailLines)
		if err == nil {
			_, err = f.Seek(off, io.SeekStart)
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("read the log of container %q in pod %q: %v", container, pod, err), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	fl, _ := w.(http.Flusher)
	out := io.Writer(w)
	if lq.limitBytes > 0 {
		out = &limitWriter{w: w, n: lq.limitBytes}
	}
	done := rep.Done()
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	buf := make([]byte, 32<<10)
	ended := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return // the client went away, or limitBytes reached
			}
			if fl != nil {
				fl.Flush()
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		if !lq.follow || ended {
			return
		}
		select {
		case <-done:
			ended = true // read what the last moment wrote, then end
		case <-req.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// tailOffset returns the offset of the n-th last line of f (0 when f has
// fewer lines); a last line without its newline counts as a line.
func tailOffset(f *os.File, n int64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if n == 0 {
		return size, nil
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return int64(i + 1), nil
			}
		}
	}
	return 0, nil
}

// limitWriter writes at most n bytes to w, then fails.
type limitWriter struct {
	w io.Writer
	n int64
}

var errLimit = errors.New("limitBytes reached")

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errLimit
	}
	cut := false
	if int64(len(p)) > l.n {
		p, cut = p[:l.n], true
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	if err == nil && cut {
		err = errLimit
	}
	return n, err
}

// kubeletEndpoint is the host and port the Node reports for its kubelet
// API (nil server: none).
func (a *Agent) kubeletEndpoint() (string, int32) {
	if a.kubelet == nil {
		return "", 0
	}
	return a.kubelet.host, int32(a.kubelet.port)
}
