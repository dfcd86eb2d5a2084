package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdRefLink  = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	mdHeading  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// githubAnchor is the anchor GitHub gives a heading: lower case, inline
// markup and punctuation dropped, spaces turned into hyphens.
func githubAnchor(heading string) string {
	// Links and images keep their text.
	heading = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a markdown file, numbered the way GitHub
// numbers repeated headings (-1, -2, ...), skipping fenced code.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := mdHeading.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, " ") {
			continue
		}
		a := githubAnchor(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// withoutCode drops fenced blocks and inline code, where brackets are not links.
func withoutCode(text string) string {
	var b strings.Builder
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			b.WriteString("\n")
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			b.WriteString("\n")
			continue
		}
		b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(line, ""))
		b.WriteString("\n")
	}
	return b.String()
}

// Every relative link and anchor in README.md and the markdown under docs/ leads to a file
// that exists and, for an anchor, to a heading in it.
func TestDocsLinks(t *testing.T) {
	root := "../../.."
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := withoutCode(string(data))
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range mdRefLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		rel, _ := filepath.Rel(root, file)
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file", rel, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				continue
			}
			if cache[dest] == nil {
				cache[dest] = anchors(t, dest)
			}
			if !cache[dest][anchor] {
				t.Errorf("%s: link %q: no heading with that anchor", rel, target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the checker reads nothing")
	}
	t.Logf("%d relative links checked in %d files", checked, len(files))
}
