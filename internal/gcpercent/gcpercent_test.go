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
