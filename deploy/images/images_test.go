package images

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// dockerfile is what the test reads from a Dockerfile.
type dockerfile struct {
	build      string // the RUN line that runs go build, without RUN
	finalUser  string
	entrypoint string
	copies     []string // paths that COPY --from=build installs in the final stage
}

func parse(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	stage := 0
	sc := bufio.NewScanner(f)
	var continued string // the lines of an instruction before the last, joined
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if more, ok := strings.CutSuffix(line, "\\"); ok {
			continued += more
			continue
		}
		line, continued = continued+line, ""
		switch {
		case strings.HasPrefix(line, "FROM "):
			stage++
		case strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build"):
			d.build = strings.TrimPrefix(line, "RUN ")
		case strings.HasPrefix(line, "USER ") && stage > 1:
			d.finalUser = strings.TrimPrefix(line, "USER ")
		case strings.HasPrefix(line, "ENTRYPOINT "):
			d.entrypoint = line
		case strings.HasPrefix(line, "COPY --from=build ") && stage > 1:
			fields := strings.Fields(line)
			dest := fields[len(fields)-1]
			for _, src := range fields[2 : len(fields)-1] {
				if strings.HasSuffix(dest, "/") {
					d.copies = append(d.copies, dest+filepath.Base(src))
				} else {
					d.copies = append(d.copies, dest)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDockerfilesBuildTheCommands runs each Dockerfile's go build line in the
// repository and checks the binary: a static executable of cmd/<name> that prints
// the version passed as a build argument.
func TestDockerfilesBuildTheCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"engine", "gateway"} {
		t.Run(name, func(t *testing.T) {
			d := parse(t, name+".Dockerfile")
			if d.build == "" {
				t.Fatal("no RUN ... go build line")
			}
			if !strings.Contains(d.build, "./cmd/"+name) {
				t.Fatalf("the build line does not build ./cmd/%s: %s", name, d.build)
			}
			if _, err := os.Stat(filepath.Join(root, "cmd", name, "main.go")); err != nil {
				t.Fatalf("the Dockerfile builds ./cmd/%s, which is gone: %v", name, err)
			}
			if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(d.finalUser) {
				t.Errorf("the image runs as %q, want a numeric non-root uid:gid (Pod Security restricted needs runAsNonRoot)", d.finalUser)
			}
			if want := `ENTRYPOINT ["/usr/bin/` + name + `"]`; d.entrypoint != want {
				t.Errorf("%s, want %s", d.entrypoint, want)
			}
			if !slices.Contains(d.copies, "/usr/bin/"+name) {
				t.Errorf("the final stage installs %v, not /usr/bin/%s", d.copies, name)
			}
			// The gateway starts its sandboxed workers from metalambda-launcher
			// and each runtime's worker executable beside it, and from itself,
			// much slower, when they are missing.
			for exe, build := range map[string]string{
				"metalambda-launcher":          "./cmd/metalambda-launcher",
				"metalambda-worker-javascript": "-tags nojsonnet -ldflags \"-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}\" -o /out/metalambda-worker-javascript ./cmd/metalambda-worker",
				"metalambda-worker-jsonnet":    "-tags nojavascript -ldflags \"-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}\" -o /out/metalambda-worker-jsonnet ./cmd/metalambda-worker",
			} {
				if name == "gateway" && (!slices.Contains(d.copies, "/usr/bin/"+exe) || !strings.Contains(d.build, build)) {
					t.Errorf("the gateway image does not build (%s) and install /usr/bin/%s beside the gateway: %s; installs %v", build, exe, d.build, d.copies)
				}
			}

			// go build -n checks the line's flags and package and prints the
			// commands it would run, without compiling: building static binaries
			// here would recompile every dependency (make images builds them).
			out := t.TempDir()
			script := strings.ReplaceAll(strings.ReplaceAll(d.build, "/out/", out+"/"), "go build ", "go build -n ")
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH)
			plan, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", script, err, plan)
			}
			if !strings.Contains(d.build, "CGO_ENABLED=0") {
				t.Errorf("the build line does not set CGO_ENABLED=0; the base image has no libc: %s", d.build)
			}
			const versionVar = "github.com/metalambda/metalambda/internal/version.version"
			if !strings.Contains(string(plan), versionVar+"=v9.8.7-test") {
				t.Errorf("the link step does not set %s from VERSION:\n%s", versionVar, plan)
			}
		})
	}
}

// TestVersionFlag builds the commands as make build does (reusing the tests'
// build cache) and checks that each reports the version linked into it, which is
// how the images are tagged.
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/metalambda/metalambda/internal/version.version=v9.8.7-test", "-o", out+"/", "./cmd/engine", "./cmd/gateway")
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	for _, name := range []string{"engine", "gateway"} {
		got, err := exec.Command(filepath.Join(out, name), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if want := name + " v9.8.7-test\n"; string(got) != want {
			t.Errorf("%s --version = %q, want %q", name, got, want)
		}
	}
}
