package sandbox

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestALargeLaunchDoesNotHoldTheCaller: a Function's environment is its
// command's, and it travels in the launch document. One larger than a pipe's
// buffer (64 KiB; a few KiB once the user has used up its pipe pages) must
// neither hold the caller, which makes the command while it starts a worker (the
// gateway's one reconciler among others), nor fail: the launch was written whole
// into the pipe before the launcher that reads it was started.
func TestALargeLaunchDoesNotHoldTheCaller(t *testing.T) {
	var env []string
	for i := range 64 {
		env = append(env, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 4<<10)))
	}
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) {
			made := make(chan *Command, 1)
			go func() {
				made <- command(Spec{Args: []string{python, "-I", "-c", `import os; print(sum(len(v) for k, v in os.environ.items() if k.startswith("BIG")))`}, Env: env})
			}()
			var cmd *Command
			select {
			case cmd = <-made:
			case <-time.After(30 * time.Second):
				t.Fatal("making the command of a 256 KiB environment has not returned in 30 s")
			}
			got := run(t, func(Spec) *Command { return cmd }, Spec{}, "")
			if got != "262144" {
				t.Errorf("the command saw %s bytes of its variables, want 262144", got)
			}
		})
	}
}
