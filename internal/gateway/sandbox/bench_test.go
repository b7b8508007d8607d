package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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

// BenchmarkStartFloor is what a sandboxed worker's start is made of here, each
// started and waited for: a fork and execution of /usr/bin/true (the floor of
// any process), bubblewrap alone running it with the sandbox's namespaces and
// mounts (no launcher, reaper, seccomp filter or cgroup), and the whole
// sandbox with the launcher make build puts in bin/ (the launcher that
// BenchmarkStartTrue starts elsewhere is this test's own, larger, binary).
// Each also reports the machine's processor time per start (machine-ms/op),
// the kernel's threads included, read from /proc/stat: a shared machine's
// other work counts too.
func BenchmarkStartFloor(b *testing.B) {
	launcher, err := filepath.Abs("../../../bin/" + LauncherExecutable)
	if err == nil {
		_, err = os.Stat(launcher)
	}
	if err != nil {
		b.Skipf("no launcher in bin/ (make build): %v", err)
	}
	s, err := New(Options{Launcher: launcher})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if s.mode != ModeNamespaces {
		b.Skip("the floors are those of a namespace sandbox")
	}
	bwrapArgs := append(s.args(Spec{}, Limits{}.withDefaults(), 0, nil), "/usr/bin/true")
	for _, tt := range []struct {
		name  string
		start func() error
	}{
		{"exec", func() error { return exec.Command("/usr/bin/true").Run() }},
		{"bwrap", func() error { return exec.Command(s.bwrap, bwrapArgs...).Run() }},
		{"sandbox", func() error {
			cmd, err := s.Command(Spec{Args: []string{"/usr/bin/true"}})
			if err != nil {
				return err
			}
			if err := cmd.Start(); err != nil {
				return err
			}
			return cmd.Wait()
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			before := machineTicks(b)
			for b.Loop() {
				if err := tt.start(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(machineTicks(b)-before)*1000/100/float64(b.N), "machine-ms/op")
		})
	}
}

// machineTicks is the processor time the machine has spent working, in
// hundredths of a second (USER_HZ): user, nice, system, irq and softirq.
func machineTicks(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])
	var sum int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += n
	}
	return sum
}
