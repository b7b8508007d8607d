package sandbox

import "testing"

// BenchmarkCgroup makes and removes a command's cgroup, as each worker start and
// exit does where the sandbox gives commands cgroups.
func BenchmarkCgroup(b *testing.B) {
	cs := newCgroups()
	if len(cs.parents) == 0 {
		b.Skipf("no cgroups here: %v", cs.reason)
	}
	l := Limits{}.withDefaults()
	for b.Loop() {
		cg, err := cs.create(l)
		if err != nil {
			b.Fatal(err)
		}
		cg.remove()
	}
}

// BenchmarkStartTrue starts /usr/bin/true in a sandbox and waits for it: the
// fixed cost of every worker's start, with and without a cgroup of its own.
func BenchmarkStartTrue(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	noCgroups := *s
	noCgroups.cgroups = nil
	for name, sb := range map[string]*Sandbox{"cgroup": s, "no-cgroup": &noCgroups} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cmd, err := sb.Command(Spec{Args: []string{"/usr/bin/true"}})
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
