package benchkit

import (
	"flag"
	"path/filepath"
	"testing"
)

// Without make build's executables, a benchmark's gateway keeps its default
// sandbox, which starts the benchmark's own executable, and says so.
func TestExecutablesMissingLeaveTheBenchmarksOwn(t *testing.T) {
	dir := t.TempDir()
	var e Executables
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	e.RegisterFlags(fs)
	if err := fs.Parse([]string{"-worker", filepath.Join(dir, "none"), "-workers-dir", dir, "-launcher", filepath.Join(dir, "none")}); err != nil {
		t.Fatal(err)
	}
	sb, desc, err := e.Sandbox()
	if err != nil || sb != nil {
		t.Fatalf("Sandbox() = %v, %q, %v; want no sandbox", sb, desc, err)
	}
	if desc != "the benchmark's own executable" {
		t.Errorf("description %q", desc)
	}
}

// The flags default to where make build puts the executables.
func TestExecutablesDefaultToBin(t *testing.T) {
	var e Executables
	e.RegisterFlags(flag.NewFlagSet("bench", flag.ContinueOnError))
	if e.WorkersDir != "bin" || filepath.Dir(e.Worker) != "bin" || filepath.Dir(e.Launcher) != "bin" {
		t.Errorf("defaults %+v, want all in bin/", e)
	}
}
