package comm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layers of docs/architecture.md. A package may import packages of
// lower layers only (its tests may import anything); a package missing here
// fails the test until it is given a layer. Keep this table and the
// document's picture in step.
var layers = []struct {
	name     string
	packages []string
}{
	{"vocabulary", []string{"core"}},
	{"pure parts", []string{"algo", "internal/kernel", "internal/onebitkernel", "rendezvous", "profile", "env",
		"internal/netns", "internal/testkit", "internal/clock", "internal/cpubind", "internal/turn", "internal/release",
		"internal/commhook", "internal/gobwire", "internal/models"}},
	{"operation state", []string{"internal/bufpool", "internal/opctx"}},
	{"byte movement", []string{"internal/transport"}},
	{"shared-memory collectives", []string{"internal/shmcoll"}},
	{"backend seam", []string{"backend"}},
	{"backends", []string{"backend/native", "backend/mpi"}},
	{"public API", []string{""}},
	{"on the API", []string{"launch", "onebit", "object", "elastic", "internal/commtest"}},
	{"gradient reduction", []string{"ddp"}},
	{"on those", []string{"optim", "internal/bench", "conformance", "internal/faults"}},
	{"programs", []string{"cmd/commbench", "cmd/commfault", "cmd/commrun", "cmd/commtrace", "examples/train", "examples/train/trials"}},
}

// forbidden are imports the layers would allow but the design does not: a
// backend speaks to its own machinery only, and the launcher knows the
// environment contract, not the library.
var forbidden = map[string][]string{
	"backend/mpi":    {"internal/transport", "internal/shmcoll", "backend/native", "internal/bufpool"},
	"backend/native": {"backend/mpi"},
	"launch":         {""},
}

const module = "github.com/gocomm/comm"

type listedPackage struct {
	ImportPath string
	Imports    []string
}

// listPackages runs go list over the module, for build tags tags.
func listPackages(t *testing.T, tags string) []listedPackage {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the layer check needs the go command: %v", err)
	}
	args := []string{"list", "-json=ImportPath,Imports"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goCmd, append(args, module+"/...")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// checkLayers returns one line per import that breaks the layering.
func checkLayers(pkgs []listedPackage) []string {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			layerOf[p] = i
		}
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	show := func(p string) string {
		if p == "" {
			return "comm (the root)"
		}
		return p
	}
	var bad []string
	for _, p := range pkgs {
		me, _ := rel(p.ImportPath)
		mine, ok := layerOf[me]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no layer: give it one in docs/architecture.md and layers_test.go", show(me)))
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := rel(imp)
			if !ok {
				continue
			}
			theirs, known := layerOf[dep]
			switch {
			case !known:
				// Reported as a package of its own.
			case theirs >= mine:
				bad = append(bad, fmt.Sprintf("%s (layer %q) imports %s (layer %q): a package may import lower layers only",
					show(me), layers[mine].name, show(dep), layers[theirs].name))
			case slices.Contains(forbidden[me], dep):
				bad = append(bad, fmt.Sprintf("%s imports %s, which the design forbids", show(me), show(dep)))
			}
		}
	}
	return bad
}

// TestLayers keeps the import graph the shape docs/architecture.md draws,
// in the default build and with the mpi and portable build tags.
func TestLayers(t *testing.T) {
	for _, tags := range []string{"", "mpi", "gocomm_portable"} {
		if bad := checkLayers(listPackages(t, tags)); len(bad) > 0 {
			t.Errorf("build tags %q:\n\t%s", tags, strings.Join(bad, "\n\t"))
		}
	}
}

// TestLayersCatchUpwardImports: the check itself fails on an upward or a
// forbidden import.
func TestLayersCatchUpwardImports(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: module + "/internal/transport", Imports: []string{module + "/backend", "fmt"}},
		{ImportPath: module + "/backend/mpi", Imports: []string{module + "/internal/transport"}},
		{ImportPath: module + "/core", Imports: []string{module + "/algo"}},
		{ImportPath: module + "/newpkg"},
		{ImportPath: module + "/algo", Imports: []string{module + "/core"}},
	}
	bad := checkLayers(pkgs)
	for _, want := range []string{
		`transport (layer "byte movement") imports backend (layer "backend seam")`,
		"backend/mpi imports internal/transport, which the design forbids",
		`core (layer "vocabulary") imports algo`,
		"newpkg has no layer",
	} {
		if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("the check missed %q; it said:\n\t%s", want, strings.Join(bad, "\n\t"))
		}
	}
	if len(bad) != 4 {
		t.Errorf("want 4 findings, got %d:\n\t%s", len(bad), strings.Join(bad, "\n\t"))
	}
}
