package gcpercent

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestGCPercentYieldsToGOGC: --gc-percent sets the collector's target unless GOGC is
// in the environment, which the runtime has applied already.
func TestGCPercentYieldsToGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "200")
	if got := Set(30); got != "GOGC=200" || debug.SetGCPercent(100) != 100 {
		t.Errorf("with GOGC=200 set, Set(30) = %q and changed the target", got)
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := Set(30); got != "30" || debug.SetGCPercent(100) != 30 {
		t.Errorf("without GOGC, Set(30) = %q, want the target set to 30", got)
	}
}

func TestContainerLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v2, v1 := write("memory.max", "536870912\n"), write("memory.limit_in_bytes", "268435456\n")
	unlimited, v1Unlimited := write("max", "max\n"), write("v1max", "9223372036854771712\n")
	for _, tt := range []struct {
		files []string
		want  int64
	}{
		{[]string{v2, v1}, 512 << 20},
		{[]string{dir + "/absent", v1}, 256 << 20},
		{[]string{unlimited, v1}, 0},
		{[]string{dir + "/absent", v1Unlimited}, 0},
		{[]string{dir + "/absent"}, 0},
	} {
		if got, _ := containerLimit(tt.files); got != tt.want {
			t.Errorf("containerLimit(%v) = %d, want %d", tt.files, got, tt.want)
		}
	}
}

// TestSetMemoryLimit: --memory-limit sets the runtime's soft limit unless GOMEMLIMIT
// is in the environment.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "300MiB")
	if got := SetMemoryLimit(100 << 20); got != "GOMEMLIMIT=300MiB" || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("with GOMEMLIMIT set, SetMemoryLimit = %q and changed the limit", got)
	}
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}
	if got := SetMemoryLimit(100 << 20); got != "100MiB (--memory-limit)" || debug.SetMemoryLimit(-1) != 100<<20 {
		t.Errorf("SetMemoryLimit(100MiB) = %q, want the limit set", got)
	}
}
