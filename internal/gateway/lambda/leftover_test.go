package lambda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkerDirectoryIsRemovedWhateverItsModes: a Landlock worker's directory,
// on the gateway's TMPDIR, is removed once the worker exits. A function may
// change the modes of what it made there (chmod is no access Landlock
// confines): a directory it made unreadable, or its own directory, must not
// stay behind with what it holds, filling the gateway's TMPDIR worker after
// worker, when the gateway runs as the workers' user and so holds no more
// rights on them than they do.
func TestWorkerDirectoryIsRemovedWhateverItsModes(t *testing.T) {
	if !inLandlockChild() {
		t.Skip("a namespace sandbox's /tmp is a tmpfs of its own")
	}
	source := `import os, tempfile
def sync(request):
    top = tempfile.gettempdir()
    d = os.path.join(top, "kept")
    os.makedirs(os.path.join(d, "inner"))
    with open(os.path.join(d, "inner", "data"), "wb") as f:
        f.write(b"x" * (1 << 20))
    os.chmod(os.path.join(d, "inner"), 0)
    os.chmod(d, 0)
    os.chmod(top, 0o500)
    return {"dir": top}
`
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	c := mustCompile(t, rt, pyFn("leftover", source))
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Dir string }
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(got.Dir), "metalambda-worker-") {
		t.Fatalf("the worker's directory is %q", got.Dir)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Lstat(got.Dir); os.IsNotExist(err) {
			return
		}
	}
	t.Errorf("the worker's directory %s is left behind", got.Dir)
}
