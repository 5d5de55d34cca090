package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is how long README.md, the landing page, may grow; the
// rest of the manual lives in the pages under docs/.
const maxReadmeLines = 300

var (
	// linkRE matches an inline link or image, [text](target) or
	// ![alt](target "title"); the text may run over several lines.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpanRE matches an inline code span, which holds no link.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	// atxRE matches an ATX heading: up to three spaces, 1-6 '#', its text.
	atxRE = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	// schemeRE matches a link with a URL scheme (https:, mailto:, ...),
	// which the test does not follow.
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// inlineLinkRE reduces a link in a heading to its text.
	inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// checkedDocs returns the Markdown files whose links are checked, relative
// to root: README.md, CONTRIBUTING.md, every .md under docs/ and
// scenarios/, and test/controlplane/README.md.
func checkedDocs(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", filepath.Join("test", "controlplane", "README.md")}
	for _, dir := range []string{"docs", "scenarios"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".md") {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestDocLinks: every relative link in the checked Markdown files names a
// file or directory of the repository, and every #fragment names a heading
// of the Markdown file it points into, by GitHub's anchor rules.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	for _, problem := range checkLinks(root, checkedDocs(t, root)) {
		t.Error(problem)
	}
}

// TestReadmeIsLandingPage: README.md stays a landing page of at most
// maxReadmeLines lines.
func TestReadmeIsLandingPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the details to a page under docs/ and link it", n, maxReadmeLines)
	}
}

// TestCheckLinksFindsBrokenLinks runs the checker on a small tree with
// good and broken links, so a checker that passes everything fails here.
func TestCheckLinksFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n"+
		"[guide](docs/guide.md), [its part](docs/guide.md#the-part-two), [again](docs/guide.md#repeat-1),\n"+
		"[kind](docs/guide.md#fault-slow_close), [here](#top), [site](https://example.com/x#y),\n"+
		"[gone](docs/missing.md), [no such heading](docs/guide.md#nowhere), [self](#nope),\n"+
		"[split\ntext](docs/guide.md#repeat-2) `[in code](missing.md)`\n\n"+
		"```\n[in a block](missing-too.md)\n```\n")
	write("docs/guide.md", "# Guide\n\n## The part: two!\n\n## Repeat\n\n## Repeat\n\n## Repeat\n\n##### fault `slow_close`\n\n"+
		"![plot](../img/plot.png) [up](../README.md#top) [out](../../elsewhere.md)\n")
	got := checkLinks(root, []string{"README.md", filepath.Join("docs", "guide.md")})
	want := []string{
		"README.md: link docs/missing.md: " + filepath.Join("docs", "missing.md") + " does not exist",
		"README.md: link docs/guide.md#nowhere: " + filepath.Join("docs", "guide.md") + " has no heading with anchor #nowhere",
		"README.md: link #nope: README.md has no heading with anchor #nope",
		filepath.Join("docs", "guide.md") + ": link ../img/plot.png: " + filepath.Join("img", "plot.png") + " does not exist",
		filepath.Join("docs", "guide.md") + ": link ../../elsewhere.md: it leaves the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkLinks found\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestAnchor pins GitHub's anchor rules on headings the docs use.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Faults: pause, down and process pause": "faults-pause-down-and-process-pause",
		"fault `slow_close`":                    "fault-slow_close",
		"assertion `error-rate`":                "assertion-error-rate",
		"Load workers: load beyond one machine": "load-workers-load-beyond-one-machine",
		"test/controlplane — a real control":    "testcontrolplane--a-real-control",
		"See [the guide](docs/x.md) *now*":      "see-the-guide-now",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// checkLinks returns one line per broken link in files (paths relative to
// root), in file order.
func checkLinks(root string, files []string) []string {
	var problems []string
	anchors := map[string]map[string]bool{} // file relative to root -> its anchors
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchors[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[rel] = a
		return a, nil
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, link := range links(string(b)) {
			if link == "" || schemeRE.MatchString(link) {
				continue
			}
			target, fragment, _ := strings.Cut(link, "#")
			rel := file
			if target != "" {
				unescaped, err := url.PathUnescape(target)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: link %s: %v", file, link, err))
					continue
				}
				if strings.HasPrefix(unescaped, "/") {
					rel = filepath.Clean(filepath.FromSlash(strings.TrimPrefix(unescaped, "/")))
				} else {
					rel = filepath.Join(filepath.Dir(file), filepath.FromSlash(unescaped))
				}
				if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					problems = append(problems, fmt.Sprintf("%s: link %s: it leaves the repository", file, link))
					continue
				}
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					problems = append(problems, fmt.Sprintf("%s: link %s: %s does not exist", file, link, rel))
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(rel, ".md") {
				problems = append(problems, fmt.Sprintf("%s: link %s: a #fragment needs a Markdown target", file, link))
				continue
			}
			a, err := anchorsOf(rel)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: link %s: %v", file, link, err))
				continue
			}
			if f, err := url.PathUnescape(fragment); err != nil || !a[f] {
				problems = append(problems, fmt.Sprintf("%s: link %s: %s has no heading with anchor #%s", file, link, rel, fragment))
			}
		}
	}
	return problems
}

// prose splits a Markdown text into its paragraphs outside fenced code
// blocks, with inline code spans blanked out, and returns the headings'
// texts apart.
func prose(text string) (paragraphs, headings []string) {
	var para []string
	flush := func() {
		if len(para) > 0 {
			paragraphs = append(paragraphs, codeSpanRE.ReplaceAllString(strings.Join(para, "\n"), "code"))
			para = nil
		}
	}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			flush()
			fence = trimmed[:3]
			continue
		}
		if m := atxRE.FindStringSubmatch(line); m != nil {
			flush()
			headings = append(headings, m[1])
			paragraphs = append(paragraphs, codeSpanRE.ReplaceAllString(m[1], "code"))
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		para = append(para, line)
	}
	flush()
	return paragraphs, headings
}

// links returns the targets of the inline links and images of a Markdown
// text, leaving out those in code.
func links(text string) []string {
	paragraphs, _ := prose(text)
	var out []string
	for _, p := range paragraphs {
		for _, m := range linkRE.FindAllStringSubmatch(p, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: the first of a kind as anchor() says, the next ones with
// -1, -2, ... appended.
func headingAnchors(text string) map[string]bool {
	_, headings := prose(text)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		a := anchor(h)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// anchor is GitHub's anchor for a heading's text: the text as rendered
// (links reduced to their text, code marks dropped), lower case, every
// character but letters, digits, '-', '_' and spaces dropped, spaces turned
// into '-'.
func anchor(heading string) string {
	text := inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
