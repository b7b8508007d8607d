package lambda

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The worker's loads and dumps answer as json.loads and json.dumps do: the same
// text, objects and errors, on a table and on random trees (their seed is
// PYTHON_JSON_SEED, 1 by default, printed on failure).
func TestPythonWorkerJSONMatchesTheJSONPackage(t *testing.T) {
	seed := "1"
	if s := os.Getenv("PYTHON_JSON_SEED"); s != "" {
		seed = s
	}
	cmd := exec.Command(DefaultPythonBinary, "-I", "-S", "testdata/python_worker_json.py", seed)
	cmd.Stdin = strings.NewReader(pythonWorkerScript)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("seed %s: %v\n%s", seed, err, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}

// A worker imports neither the json package (nor re, which it imports) nor
// traceback to serve calls, so that they are not in every warm worker's memory;
// a function that imports them has them, and an error's traceback is formatted.
func TestPythonWorkerImportsOnlyWhatACallNeeds(t *testing.T) {
	opts := sandboxed(t, Options{})
	rt := NewPython(opts)
	heavy := `import sys
HEAVY = ("json", "re", "traceback")
def sync(request):
    if request["parent"]["metadata"]["name"] == "fail":
        raise ValueError("asked to")
    return {"loaded": [m for m in HEAVY if m in sys.modules]}
`
	lean := mustCompile(t, rt, pyFn("lean", heavy))
	res, err := invoke(t, lean, echoRequest("ünïcode"))
	if err != nil {
		t.Fatal(err)
	}
	// A worker forked by a zygote has the zygote's image, which holds json and
	// the common modules of zygotePreload on purpose: their pages are shared.
	want := []any{}
	if opts.PythonZygote == "auto" {
		want = []any{"json", "re"}
	}
	if diff := cmp.Diff(map[string]any{"loaded": want}, decode(t, res.Response)); diff != "" {
		t.Errorf("modules the worker imported (-want +got):\n%s", diff)
	}
	_, err = invoke(t, lean, echoRequest("fail"))
	assertInvokeError(t, err, ReasonException, "ValueError: asked to")
	assertInvokeError(t, err, ReasonException, "line 5, in sync")

	withJSON := mustCompile(t, rt, pyFn("with-json", "import json\n"+heavy+`
_sync = sync
def sync(request):
    out = _sync(request)
    out["name"] = json.loads(json.dumps(request))["parent"]["metadata"]["name"]
    return out
`))
	res, err = invoke(t, withJSON, echoRequest("ünïcode"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"loaded": []any{"json", "re"}, "name": "ünïcode"}, decode(t, res.Response)); diff != "" {
		t.Errorf("a function that imports json (-want +got):\n%s", diff)
	}
}

// The worker compiles a function's source as compile() does, without making the
// ast module's classes (compile() makes them at its first call, and every warm
// worker kept them): the same code objects, errors and warnings, checked on a
// table against compile().
func TestPythonWorkerCompilesAsCompileDoes(t *testing.T) {
	cmd := exec.Command(DefaultPythonBinary, "-I", "-S", "testdata/python_worker_compile.py")
	cmd.Stdin = strings.NewReader(pythonWorkerScript)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// A worker started with its own interpreter runs the worker's code as the
// gateway compiled it, once: its command line does not carry the source, and
// it holds no ast classes (a worker forked by a zygote has the zygote's, which
// compiled the worker). A function's code keeps its file name, in its frames and
// tracebacks, and __main__ is the worker's, as it was.
func TestPythonWorkerRunsCompiledCode(t *testing.T) {
	opts := sandboxed(t, Options{})
	rt := NewPython(opts)
	source := `import gc, sys
def sync(request):
    if request["parent"]["metadata"]["name"] == "fail":
        raise ValueError("asked to")
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = f.read()
    main = vars(sys.modules["__main__"])
    return {
        "source on the command line": b"def serve(proto_in" in cmdline,
        "ast classes": sum(1 for o in gc.get_objects() if isinstance(o, type) and o.__module__ == "ast"),
        "file": sys._getframe().f_code.co_filename,
        "__main__": [n for n in ("_boot", "main", "serve", "__file__") if n in main],
        "argv[0]": sys.argv[0],
    }
`
	c := mustCompile(t, rt, pyFn("compiled", source))
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := decode(t, res.Response).(map[string]any)
	if opts.PythonZygote == ZygoteAuto {
		delete(got, "ast classes")
		delete(got, "source on the command line")
	}
	want := map[string]any{"file": "test/compiled", "__main__": []any{"main", "serve"}, "argv[0]": "-c"}
	if opts.PythonZygote != ZygoteAuto {
		want["ast classes"], want["source on the command line"] = 0.0, false
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the worker (-want +got):\n%s", diff)
	}
	_, err = invoke(t, c, echoRequest("fail"))
	assertInvokeError(t, err, ReasonException, `File "test/compiled", line 4, in sync`)
}

// A worker whose interpreter is not the one that compiled its code (replaced in
// place since the gateway started) exits before it runs any of it, saying so.
func TestPythonWorkerOfAnotherInterpreterSaysSo(t *testing.T) {
	p := NewPython(Options{InsecureNoSandbox: true}).(*python)
	if _, _, err := p.resolveInterpreter(); err != nil {
		t.Fatal(err)
	}
	p.worker.boot = strings.Replace(p.worker.boot, `bytes.fromhex("`, `bytes.fromhex("00`, 1)
	_, err := p.Compile(pyFn("other-interpreter", pyEcho))
	if err == nil || !strings.Contains(err.Error(), "not the one the gateway compiled the worker with") {
		t.Fatalf("error = %v, want one saying the interpreter changed", err)
	}
}
