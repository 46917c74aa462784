package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Binary is the program of the package under test (a command or an
// example), built once per test binary by go build, without -race: it is
// the program under test, not the test. The zero value is ready to use;
// Path may be called from parallel tests.
type Binary struct {
	Name string // the file name of the built program

	once sync.Once
	path string
	err  error
}

// Path builds the package in the working directory (the package's own, in
// a test) the first time it is called and returns the program's path;
// it fails the test if the build failed, then and at every later call.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = build(b.Name) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the built program, if any: call it after the tests ran
// (Main's after).
func (b *Binary) Remove() {
	if b.path != "" {
		os.RemoveAll(filepath.Dir(b.path))
	}
}

func build(name string) (string, error) {
	dir, err := os.MkdirTemp("", name+"-test")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return path, fmt.Errorf("building the binary under test needs the go command on PATH: %v", err)
	}
	if out, err := exec.Command(goCmd, "build", "-o", path, ".").CombinedOutput(); err != nil {
		return path, fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}
