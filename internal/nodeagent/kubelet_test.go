package nodeagent

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLogQuery(t *testing.T) {
	tests := []struct {
		query string
		want  logQuery
		err   string
	}{
		{"", logQuery{tailLines: -1, limitBytes: -1}, ""},
		{"follow=true", logQuery{follow: true, tailLines: -1, limitBytes: -1}, ""},
		{"follow=true&tailLines=5&limitBytes=100&stream=All", logQuery{follow: true, tailLines: 5, limitBytes: 100}, ""},
		{"follow=maybe", logQuery{}, "follow"},
		{"tailLines=-1", logQuery{}, "tailLines"},
		{"limitBytes=0", logQuery{}, "limitBytes"},
		{"previous=true", logQuery{}, "previous=true is not supported"},
		{"timestamps=true", logQuery{}, "timestamps=true is not supported"},
		{"sinceSeconds=10", logQuery{}, "sinceSeconds is not supported"},
		{"stream=Stdout", logQuery{}, "log stream"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseLogQuery(q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseLogQuery = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestTailOffset(t *testing.T) {
	tests := []struct {
		content string
		n       int64
		want    string // what remains from the offset
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		off, err := tailOffset(f, tc.n)
		f.Close()
		if err != nil || tc.content[off:] != tc.want {
			t.Errorf("tailOffset(%q, %d) = %d (%q), %v; want %q", tc.content, tc.n, off, tc.content[min(int(off), len(tc.content)):], err, tc.want)
		}
	}
}
