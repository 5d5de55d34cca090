package load

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/scenario"
)

// tplHeader marks a target whose body is a template; its value indexes
// the stream's templates. The transport renders the body with the exact
// sequence number vegeta gave the hit and removes the header.
const tplHeader = "X-Drill-Body-Template"

// BodyData is what a body template sees.
type BodyData struct {
	// ID is unique per request across runs: "<run id>-<stream>-<seq>".
	ID string
	// Seq is the hit's sequence number in its stream's whole schedule (0-based; with
	// [Options.Partition], across all workers).
	Seq uint64
	// Time is the intended send time, RFC 3339 with nanoseconds (UTC).
	Time string
}

// buildTargets returns the stream's targets (inline first, then the
// targets file's, read eagerly) and the parsed body templates they use.
// With st.BasicAuth (its values already expanded) every target carries
// its Authorization header.
func buildTargets(st scenario.Stream, dir string) ([]vegeta.Target, []*bodyTemplate, error) {
	var tgts []vegeta.Target
	var tpls []*bodyTemplate
	for i, t := range st.Targets {
		method := strings.ToUpper(strings.TrimSpace(t.Method))
		if method == "" {
			method = http.MethodGet
		}
		if err := checkURL(t.URL); err != nil {
			return nil, nil, fmt.Errorf("targets[%d]: %w", i, err)
		}
		vt := vegeta.Target{Method: method, URL: t.URL, Header: http.Header{}}
		for k, v := range t.Headers {
			vt.Header.Set(k, v)
		}
		if strings.Contains(t.Body, "{{") {
			tpl, err := template.New(fmt.Sprintf("%s.targets[%d].body", st.Name, i)).Option("missingkey=error").Parse(t.Body)
			if err != nil {
				return nil, nil, fmt.Errorf("targets[%d]: parse body template: %w", i, err)
			}
			// Render once now so a template that names an unknown field fails before load starts.
			if err := tpl.Execute(&bytes.Buffer{}, BodyData{ID: "check", Time: time.Unix(0, 0).UTC().Format(time.RFC3339Nano)}); err != nil {
				return nil, nil, fmt.Errorf("targets[%d]: body template: %w", i, err)
			}
			vt.Header.Set(tplHeader, strconv.Itoa(len(tpls)))
			tpls = append(tpls, newBodyTemplate(tpl))
		} else if t.Body != "" {
			vt.Body = []byte(t.Body)
		}
		tgts = append(tgts, vt)
	}
	if st.TargetsFile != nil {
		ft, err := readTargetsFile(*st.TargetsFile, dir)
		if err != nil {
			return nil, nil, err
		}
		tgts = append(tgts, ft...)
	}
	if len(tgts) == 0 {
		return nil, nil, fmt.Errorf("has no targets (give targets or targetsFile)")
	}
	if ba := st.BasicAuth; ba != nil {
		// The header net/http's SetBasicAuth writes (RFC 7617).
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(ba.Username+":"+ba.Password))
		for i := range tgts {
			if tgts[i].Header == nil {
				tgts[i].Header = http.Header{}
			}
			tgts[i].Header.Set("Authorization", auth)
		}
	}
	return tgts, tpls, nil
}

// readTargetsFile reads a vegeta targets file (format http or json) whole.
// Relative paths are taken from dir.
func readTargetsFile(tf scenario.TargetsFile, dir string) ([]vegeta.Target, error) {
	path := tf.Path
	if path == "" {
		return nil, fmt.Errorf("targetsFile: path is empty")
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read targets file: %w", err)
	}
	var tr vegeta.Targeter
	switch strings.ToLower(tf.Format) {
	case "", "http":
		tr = vegeta.NewHTTPTargeter(bytes.NewReader(data), nil, nil)
	case "json":
		tr = vegeta.NewJSONTargeter(bytes.NewReader(data), nil, nil)
	default:
		return nil, fmt.Errorf("targets file %s: unknown format %q; use http or json", path, tf.Format)
	}
	tgts, err := vegeta.ReadAllTargets(tr)
	if err != nil {
		return nil, fmt.Errorf("read targets file %s: %w", path, err)
	}
	for i, t := range tgts {
		if err := checkURL(t.URL); err != nil {
			return nil, fmt.Errorf("targets file %s: target %d: %w", path, i+1, err)
		}
	}
	return tgts, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("invalid url %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q must be absolute http:// or https://", s)
	}
	return nil
}

// bodyTemplate is a parsed body template. One made only of text and the
// plain actions {{.ID}}, {{.Seq}} and {{.Time}} (the common case) is
// rendered by appending its parts, without text/template's reflection;
// any other goes through text/template. Both give the same bytes.
type bodyTemplate struct {
	tpl   *template.Template
	parts []tplPart // nil: not a plain template
	time  bool      // a part uses .Time
	size  int       // bytes of text, for sizing the output
}

// tplPart is literal text, or (field != "") one field of BodyData.
type tplPart struct {
	text  string
	field string
}

func newBodyTemplate(tpl *template.Template) *bodyTemplate {
	bt := &bodyTemplate{tpl: tpl}
	if tpl.Tree == nil || tpl.Root == nil || len(tpl.Templates()) != 1 {
		return bt
	}
	var parts []tplPart
	for _, n := range tpl.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, tplPart{text: string(n.Text)})
			bt.size += len(n.Text)
		case *parse.ActionNode:
			if len(n.Pipe.Decl) != 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return bt
			}
			f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 {
				return bt
			}
			switch f.Ident[0] {
			case "ID", "Seq":
			case "Time":
				bt.time = true
			default:
				return bt
			}
			parts = append(parts, tplPart{field: f.Ident[0]})
		default:
			return bt
		}
	}
	bt.parts = parts
	return bt
}

// render returns the body of hit seq of stream s (a new slice).
func (bt *bodyTemplate) render(s *stream, seq uint64) ([]byte, error) {
	var when string
	if bt.time || bt.parts == nil {
		when = s.intendedWall(seq).UTC().Format(time.RFC3339Nano)
	}
	if bt.parts == nil {
		var buf bytes.Buffer
		g := s.part.Global(seq)
		data := BodyData{ID: s.idPrefix + strconv.FormatUint(g, 10), Seq: g, Time: when}
		if err := bt.tpl.Execute(&buf, data); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	b := make([]byte, 0, bt.size+len(s.idPrefix)+len(when)+40)
	for _, p := range bt.parts {
		switch p.field {
		case "":
			b = append(b, p.text...)
		case "ID":
			b = strconv.AppendUint(append(b, s.idPrefix...), s.part.Global(seq), 10)
		case "Seq":
			b = strconv.AppendUint(b, s.part.Global(seq), 10)
		case "Time":
			b = append(b, when...)
		}
	}
	return b, nil
}
