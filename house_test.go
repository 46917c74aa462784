package comm_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// diaryComment matches what belongs in a commit message or docs/, not in a
// code comment: an ISO date, a machine named "this VM", a pointer into
// docs/results (see STYLE.md, "Where measurements live").
var diaryComment = regexp.MustCompile(`20\d\d-[01]\d-[0-3]\d|(?i:this VM)|docs/results`)

// moduleFiles calls f for every file of the module under the root, skipping
// .git, testdata and nested modules.
func moduleFiles(t *testing.T, f func(path string, d fs.DirEntry) error) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			if name := d.Name(); name == ".git" || name == "testdata" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		return f(path, d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoDiaryInComments: no comment of a non-test .go file carries an ISO
// date, "this VM" or a docs/results pointer. Tests may pin a dated
// regression.
func TestNoDiaryInComments(t *testing.T) {
	fset := token.NewFileSet()
	perFile := map[string]int{}
	var lines []string
	moduleFiles(t, func(path string, d fs.DirEntry) error {
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				line := fset.Position(c.Pos()).Line
				for i, text := range strings.Split(c.Text, "\n") {
					if diaryComment.MatchString(text) {
						perFile[path]++
						lines = append(lines, fmt.Sprintf("%s:%d: %s", path, line+i, strings.TrimSpace(text)))
					}
				}
			}
		}
		return nil
	})
	if len(lines) == 0 {
		return
	}
	files := make([]string, 0, len(perFile))
	for p := range perFile {
		files = append(files, p)
	}
	sort.Strings(files)
	var counts strings.Builder
	for _, p := range files {
		fmt.Fprintf(&counts, "\n  %4d %s", perFile[p], p)
	}
	t.Errorf("%d comment lines carry a date, \"this VM\" or a docs/results pointer (the figures go to docs/performance.md or docs/tuning.md, the history to commit messages); by file:%s\n%s",
		len(lines), counts.String(), strings.Join(lines, "\n"))
}

// maxFuzzBytes bounds the committed fuzz inputs (testdata/fuzz/FuzzX of
// every package), counted as du does, in 4 KiB blocks: go test replays
// them all, so they are minimised regressions, not a growing corpus.
const maxFuzzBytes = 2 << 20

// TestFuzzInputsStaySmall: every package's testdata/fuzz stays under
// maxFuzzBytes in all, and the long-running corpus (bench/fuzz.sh's, in
// Go's fuzz cache) is not kept in the tree as testdata/fuzzcorpus.
func TestFuzzInputsStaySmall(t *testing.T) {
	var total int64
	var files int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if d.Name() == "fuzzcorpus" && filepath.Base(filepath.Dir(path)) == "testdata" {
				t.Errorf("%s exists: the long-running fuzz corpus lives in Go's fuzz cache (bench/fuzz.sh); promote a finding into the package's testdata/fuzz/FuzzX instead", path)
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.Contains(filepath.ToSlash(path), "/testdata/fuzz/") && !strings.HasPrefix(filepath.ToSlash(path), "testdata/fuzz/") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		total += (info.Size() + 4095) &^ 4095
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > maxFuzzBytes {
		t.Errorf("committed fuzz inputs: %d files, %d bytes in 4 KiB blocks, over %d: minimise them (keep the inputs that add coverage)", files, total, maxFuzzBytes)
	}
	if files == 0 {
		t.Errorf("no committed fuzz inputs found under any testdata/fuzz: the walk is wrong")
	}
}
