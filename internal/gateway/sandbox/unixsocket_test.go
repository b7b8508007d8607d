package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestNetworkReachesNoHostUNIXSocket: a command with the host's network
// (spec.network) has its TCP and UDP, not the UNIX sockets of the host's file
// system (a container runtime's, a database's, the gateway's own), which
// Landlock does not confine: a namespace sandbox does not show their paths, and
// a Landlock one makes no UNIX socket. The socket here is one every user may
// connect to.
func TestNetworkReachesNoHostUNIXSocket(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "metalambda-socket-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host-service\n"))
			c.Close()
		}
	}()
	program := `import errno, socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("` + path + `")
    print(s.recv(100).decode().strip())
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))`
	for name, command := range modes(t) {
		want := "ENOENT" // not in its view
		if isLandlock(name) {
			want = "EAFNOSUPPORT"
		}
		t.Run(name, func(t *testing.T) {
			if got := run(t, command, Spec{Network: true}, program); got != want {
				t.Errorf("connecting to a UNIX socket of the host: %q, want %q", got, want)
			}
		})
	}
}
