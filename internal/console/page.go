package console

import (
	_ "embed"
	"net/http"
)

// pageHTML is the console page: markup, style and a small hand-written
// script, all inline; it loads nothing but this console's own API.
//
//go:embed page.html
var pageHTML []byte

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(pageHTML)
}
