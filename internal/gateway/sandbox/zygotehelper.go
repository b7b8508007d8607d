package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// zygoteHelper is what the launcher does to start a zygote's bubblewrap. A
// zygote runs as root of a user namespace mapped onto the caller's range of
// users, which may not traverse the paths only the host's root can (an
// interpreter under /root): the launcher, started by the root caller in a
// mount namespace of its own, first shows each of Sources read-only at
// Stage/<index> (a directory anyone may traverse, on a tmpfs of that mount
// namespace alone), then starts bubblewrap in the user namespace, with its
// descriptors from 4 on as bubblewrap's from 3 on, and waits for it.
type zygoteHelper struct {
	Stage   string   `json:"stage"`
	Sources []string `json:"sources"`
	Bwrap   string   `json:"bwrap"`
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	UIDBase int      `json:"uidBase"`
	Files   int      `json:"files"` // descriptors after launchFD to hand on
}

// stagedPath is where a zygote's bubblewrap finds ReadOnly path i.
func stagedPath(stage string, i int) string {
	return filepath.Join(stage, strconv.Itoa(i))
}

func runZygoteHelper(h *zygoteHelper) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("zygote: making the mount namespace private: %w", err)
	}
	if err := unix.Mount("tmpfs", h.Stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("zygote: the stage: %w", err)
	}
	for i, src := range h.Sources {
		dst := stagedPath(h.Stage, i)
		fi, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("zygote: read-only path: %w", err)
		}
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("zygote: the stage: %w", err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("zygote: showing %s: %w", src, err)
		}
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("zygote: showing %s read-only: %w", src, err)
		}
	}
	cmd := exec.Command(h.Bwrap, h.Args...)
	cmd.Env = h.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for fd := launchFD + 1; fd <= launchFD+h.Files; fd++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), "zygote"))
	}
	// Root of the user namespace maps onto the first user of the range, which
	// no command is given (Zygote.Fork); the creator's root is not mapped.
	idMap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: h.UIDBase, Size: uidSpan}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER, UidMappings: idMap, GidMappings: idMap, GidMappingsEnableSetgroups: true,
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
		Pdeathsig:  syscall.SIGKILL,
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("zygote: starting %s: %w", h.Bwrap, err)
	}
	os.Exit(0)
	return nil
}
