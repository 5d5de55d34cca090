package load

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestExpandStreams: every field a stream may reference is expanded, the
// input is left alone, and an unknown reference names its field.
func TestExpandStreams(t *testing.T) {
	in := []scenario.Stream{{
		Name: "orders",
		Targets: []scenario.Target{{
			URL:     "${services.api.url}/orders",
			Headers: map[string]string{"X-Token": "${env.TOKEN}"},
			Body:    `{"run":"${run.id}","id":"{{.ID}}"}`,
		}},
		BasicAuth: &scenario.BasicAuth{Username: "u", Password: "${env.PASS}"},
	}}
	vars := map[string]string{"services.api.url": "http://127.0.0.1:9", "env.TOKEN": "t0k", "run.id": "r1", "env.PASS": "s3cret"}
	got, err := ExpandStreams(in, vars)
	if err != nil {
		t.Fatal(err)
	}
	tg := got[0].Targets[0]
	if tg.URL != "http://127.0.0.1:9/orders" || tg.Headers["X-Token"] != "t0k" || tg.Body != `{"run":"r1","id":"{{.ID}}"}` || got[0].BasicAuth.Password != "s3cret" {
		t.Errorf("expanded %+v %+v", tg, got[0].BasicAuth)
	}
	if in[0].Targets[0].URL != "${services.api.url}/orders" || in[0].Targets[0].Headers["X-Token"] != "${env.TOKEN}" || in[0].BasicAuth.Password != "${env.PASS}" {
		t.Errorf("input changed: %+v", in[0])
	}
	delete(vars, "env.PASS")
	_, err = ExpandStreams(in, vars)
	var xe *ExpandError
	if !errors.As(err, &xe) || xe.Field != "streams[0].basicAuth.password" {
		t.Fatalf("err %v, want an ExpandError for streams[0].basicAuth.password", err)
	}
}

// TestRequests: a request is built as the engine sends it: method
// upper-cased, headers, basicAuth and the body template rendered.
func TestRequests(t *testing.T) {
	st := scenario.Stream{Name: "orders", Targets: []scenario.Target{
		{Method: "post", URL: "http://127.0.0.1:9/orders", Headers: map[string]string{"X-A": "1"}, Body: `{"id":"{{.ID}}","seq":{{.Seq}}}`},
		{URL: "http://127.0.0.1:9/plain", Body: "x"},
	}, BasicAuth: &scenario.BasicAuth{Username: "u", Password: "p"}}
	reqs, err := NewRequests(st, "")
	if err != nil {
		t.Fatal(err)
	}
	if reqs.Len() != 2 {
		t.Fatalf("Len() = %d", reqs.Len())
	}
	req, err := reqs.Request(context.Background(), 0, BodyData{ID: "w-1", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.Header.Get("X-A") != "1" || req.Header.Get(tplHeader) != "" || string(body) != `{"id":"w-1","seq":1}` {
		t.Errorf("request %s %v %q", req.Method, req.Header, body)
	}
	if u, p, ok := req.BasicAuth(); !ok || u != "u" || p != "p" {
		t.Errorf("basic auth %q %q %v", u, p, ok)
	}
	req, err = reqs.Request(context.Background(), 1, BodyData{})
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(req.Body); req.Method != "GET" || string(body) != "x" {
		t.Errorf("plain request %s %q", req.Method, body)
	}
	if _, err := reqs.Request(context.Background(), 2, BodyData{}); err == nil {
		t.Error("target out of range: no error")
	}
}
