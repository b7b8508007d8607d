# Metalambda Python zygote: a fork server for Python workers.
#
# It runs in a sandbox of its own (package sandbox, Sandbox.StartZygote), as root
# of a user namespace that maps onto the gateway's range of users, holding only
# CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_SETPCAP and CAP_NET_ADMIN there. It
# loads the interpreter, the worker module (python_worker.py, whose source comes
# in its configuration) and a few common modules, freezes that image, writes
# "ready" and then serves fork requests on its control socket, one JSON object per
# message with descriptors attached:
#   <- {"id", "uid", "limits": [{"resource", "value"}], "tmpSize", "cgroups": n}
#      + stdin, stdout, stderr and n cgroup files
#   -> {"id", "pid"} or {"id", "error"}
#   -> {"exit": pid, "status": wait status} when a child exits
# Nothing of any function ever reaches it. Each child forks the worker, which
# specializes itself (become_worker) before it reads its function on stdin,
# and stays its init: on amd64 it executes the gateway's reaper (exec_reaper),
# elsewhere it serves as serve_init.
#
# A zygote whose configuration names a program ("exec": {"path", "args",
# "env"}, the gateway's JavaScript or Jsonnet worker) loads no Python worker:
# each worker it forks, once specialized, executes that program with those
# arguments and that environment alone (exec_worker), so that it starts
# without bubblewrap and the launcher, in the same bounds. The program is the
# file the gateway opened and handed over ("executable", a descriptor), not
# whatever its path shows in the zygote's view. Where the gateway also hands
# over metalambda-spawn ("spawn", a sealed memfd; amd64), each child executes
# it at once (spawn_child), and it does in a few KiB of code what child and
# become_worker do here, without a second copy of the interpreter.
import base64
import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import types

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SECCOMP_MODE_FILTER = 2
# SECBIT_NOROOT and SECBIT_NO_CAP_AMBIENT_RAISE set, the fix-up of capabilities at
# a change of user kept, and all three locked with SECBIT_KEEP_CAPS off.
SECUREBITS = 1 | 2 | 8 | 32 | 64 | 128
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1

libc = ctypes.CDLL(None, use_errno=True)


def check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None
    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), "mount " + target)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def loopback_up():
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


def isolate(cfg, fds):
    # Runs in the worker, pid 2 of its own PID namespace, before anything of a
    # function is read: its descriptors 0-2 become the gateway's pipes, it joins
    # its cgroup and takes its own mount, IPC, UTS, cgroup and (without network)
    # network namespaces, a fresh /tmp and /proc of its PID namespace and the
    # hostname.
    for i in range(3):
        os.dup2(fds[i], i)
    for fd in fds[3:]:
        os.write(fd, b"0")
    flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
    if not cfg["network"]:
        flags |= CLONE_NEWNET
    check(libc.unshare(flags), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=%d,mode=1777" % cfg["tmpSize"])
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    check(libc.sethostname(b"sandbox", 7), "sethostname")
    if not cfg["network"]:
        loopback_up()
    os.chdir("/tmp")
    os.setsid()


def close_all(keep, also=None):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > keep and fd != also:
            try:
                os.close(fd)
            except OSError:
                pass


def drop(cfg, uid):
    # Every capability goes, for good (an empty bounding set, securebits
    # locked); the worker also becomes a user of its own.
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    check(libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "locking securebits")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    header, data = CapHeader(0x20080522, 0), (CapData * 2)()
    check(libc.capset(ctypes.byref(header), data), "clearing capabilities")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")


def install_filter(prog):
    # A zygote is only built where the sandbox has seccomp filters: a missing
    # one is refused, not skipped.
    if not prog or len(prog) % 8:
        raise OSError("the seccomp filter is missing or not whole instructions")
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "installing the seccomp filter")


def become_worker(cfg, req, fds):
    # The worker isolates itself, closes every descriptor but 0-2 (the control
    # socket, the cgroup files, the pipes' other copies) and the program it
    # executes (close-on-exec), drops to its user and takes its limits and
    # filter.
    gc.enable()
    isolate(cfg, fds)
    close_all(2, cfg.get("executable"))
    drop(cfg, req["uid"])
    import resource

    for limit in req["limits"]:
        v = limit["value"]
        if v >= 1 << 63:
            v = resource.RLIM_INFINITY
        resource.setrlimit(limit["resource"], (v, v))
    install_filter(cfg["filter"])
    os.environ["PWD"] = "/tmp"


def exec_worker(cfg, prog):
    # The worker has specialized itself; it now becomes the configured
    # program. Signals the interpreter ignores (SIGPIPE, SIGXFSZ) would stay
    # ignored past the execution: they get their defaults back, as a worker
    # the launcher executes has them, and none is blocked.
    for sig in signal.valid_signals():
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    env = dict(e.split("=", 1) for e in prog["env"])
    env["PWD"] = "/tmp"
    try:
        os.execve(cfg["executable"], prog["args"], env)
    except OSError as exc:
        os.write(2, ("metalambda zygote: executing %s: %s\n" % (prog["path"], exc)).encode())
        os._exit(126)


def serve_init(worker_pid):
    # pid 1 of the worker's PID namespace: it holds nothing (no descriptor, no
    # capability; root of the zygote's user namespace, so that the worker, of
    # another user, may not signal it), reaps orphans and ends with the worker,
    # with its status (128+n for signal n, as bubblewrap's init).
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == worker_pid:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.waitstatus_to_exitcode(status))


def exec_reaper(cfg, worker_pid):
    # The init runs the gateway's reaper (metalambda-init, a static program of
    # a few hundred bytes that does what serve_init does) from the sealed memfd
    # the zygote was given, rather than stay a forked interpreter whose pages
    # cost about 1 MiB per worker. It has dropped every capability (SECBIT_NOROOT
    # locked, an empty bounding set: executing as root of the user namespace
    # gains none), set no_new_privs and installed its filter already; the
    # memfd's descriptor is close-on-exec, so the reaper holds none. Where
    # there is no reaper, or it cannot be executed, serve_init serves instead.
    fd = cfg.get("reaper")
    if not fd:
        return
    try:
        os.execve(fd, ["metalambda-init", str(worker_pid)], {})
    except OSError:
        os.close(fd)


def start_child(own_pidns):
    """Forks a child as pid 1 of a new PID namespace. Returns its pid, 0 in
    the child. On an error the zygote is back in its own namespace, for its
    next children; one it cannot go back to ends it, for the gateway to
    replace."""
    check(libc.unshare(CLONE_NEWPID), "unshare")
    try:
        return os.fork()
    except BaseException:
        # A second unshare fails while the first one's namespace has no
        # child: go back before the next request.
        if libc.setns(own_pidns, CLONE_NEWPID) != 0:
            sys.exit("metalambda zygote: cannot go back to its own PID namespace: %s" % os.strerror(ctypes.get_errno()))
        raise


def spawn_child(cfg, req, fds):
    # pid 1 of the worker's PID namespace, still root of the zygote's user
    # namespace: it executes metalambda-spawn with the request, its pipes on
    # 0-2, the cgroup files, the program and a pipe holding the seccomp
    # filter, which it alone is given (every other descriptor of the zygote
    # is close-on-exec).
    try:
        signal.set_wakeup_fd(-1)
        for i in range(3):
            os.dup2(fds[i], i)
        for fd in fds[:3]:
            if fd > 2:
                os.close(fd)
        cgroups = fds[3:]
        r, w = os.pipe()
        prog = cfg["filter"]
        while prog:
            prog = prog[os.write(w, prog):]
        os.close(w)
        for fd in cgroups + [cfg["executable"], r]:
            os.set_inheritable(fd, True)
        args = ["metalambda-spawn", str(req["uid"]), str(req["tmpSize"]), "1" if cfg["network"] else "0", str(cfg["executable"]), str(r), str(len(cgroups))]
        args += [str(fd) for fd in cgroups]
        args.append(str(len(req["limits"])))
        for limit in req["limits"]:
            args += [str(limit["resource"]), str(limit["value"])]
        exe = cfg["config"]["exec"]
        env = dict(e.split("=", 1) for e in exe["env"])
        env["PWD"] = "/tmp"
        os.execve(cfg["spawn"], args + ["--"] + exe["args"], env)
    except BaseException as exc:
        try:
            os.write(2, ("metalambda zygote: starting metalambda-spawn: %s\n" % exc).encode())
        finally:
            os._exit(126)


def child(cfg, worker, req, fds):
    if cfg.get("spawn"):
        spawn_child(cfg, req, fds)
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        cfg["tmpSize"] = req["tmpSize"]
        # The init forks the worker at once and does as little as it can:
        # every page it shares with the worker and writes, or that the worker
        # writes, becomes a copy of its own.
        gc.disable()  # no collection walks the young objects' pages
        # The init is counted in the worker's cgroup too, and joins it before
        # it forks the worker: joined after, it could be counted only once the
        # worker had loaded its function, and the gateway, which takes the
        # count then as the worker's own, would take the init for a process
        # the first call left behind and stop the worker after it.
        for fd in fds[3:]:
            os.write(fd, b"0")
        pid = os.fork()
        if pid == 0:
            become_worker(cfg, req, fds)
        else:
            reaper = cfg.get("reaper")
            if reaper:
                os.closerange(0, reaper)
                os.closerange(reaper + 1, 1 << 16)
            else:
                os.closerange(0, 1 << 16)
            drop(cfg, None)
            install_filter(cfg["filter"])
    except BaseException as exc:
        try:
            os.write(2, ("metalambda zygote: specializing a worker: %s\n" % exc).encode())
        finally:
            os._exit(126)
    if pid != 0:
        exec_reaper(cfg, pid)
        serve_init(pid)
    code = 0
    try:
        if worker is None:
            exec_worker(cfg, cfg["config"]["exec"])
        worker.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def preload(cfg):
    if cfg["config"].get("exec"):
        return None  # its workers execute a program of their own
    worker = types.ModuleType("metalambda_worker")
    worker.__file__ = "<metalambda-worker>"
    exec(compile(cfg["config"]["worker"], "<metalambda-worker>", "exec"), worker.__dict__)
    worker.add_site_packages()
    for name in cfg["config"].get("preload", []):
        try:
            __import__(name)
        except ImportError:
            pass
    gc.collect()
    gc.freeze()  # the image's objects keep their headers unwritten in children
    return worker


def serve(cfg, worker, ctl):
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = set()
    while True:
        ready, _, _ = select.select([ctl, wake_r], [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            ctl.send(json.dumps({"exit": pid, "status": status}).encode())
        if ctl not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 4096, 16, socket.MSG_CMSG_CLOEXEC)
        except InterruptedError:
            continue
        if not msg:
            return  # the gateway closed its end
        req = json.loads(msg)
        try:
            pid = start_child(own_pidns)
        except Exception as exc:  # the kernel refused the namespace or the fork
            ctl.send(json.dumps({"id": req["id"], "error": str(exc)}).encode())
            for fd in fds:
                os.close(fd)
            continue
        if pid == 0:
            child(cfg, worker, req, fds)
        check(libc.setns(own_pidns, CLONE_NEWPID), "setns")
        for fd in fds:
            os.close(fd)
        children.add(pid)
        ctl.send(json.dumps({"id": req["id"], "pid": pid}).encode())


# The capabilities the zygote keeps: CAP_SETGID, CAP_SETUID, CAP_SETPCAP,
# CAP_NET_ADMIN, CAP_SYS_ADMIN (in its user namespace).
ZYGOTE_CAPS = (6, 7, 8, 12, 21)


def narrow_bounding_set():
    # bubblewrap, run as root of the user namespace, leaves the bounding set
    # whole: an execution would give back every capability.
    cap = 0
    while True:
        if cap not in ZYGOTE_CAPS and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
        cap += 1
        if cap > 63:
            break


def main():
    narrow_bounding_set()
    with os.fdopen(3, "rb") as f:
        cfg = json.loads(f.read())
    cfg["filter"] = base64.b64decode(cfg["filter"] or "")
    for fd in cfg["cgroups"]:
        os.write(fd, b"0")
    ctl = socket.socket(fileno=cfg["control"])
    os.set_inheritable(cfg["control"], False)
    keep = {cfg["control"]}
    for name in ("reaper", "executable", "spawn"):
        if cfg.get(name):
            # Kept for the inits (exec_reaper) and the workers (exec_worker),
            # but never past an execution.
            os.set_inheritable(cfg[name], False)
            keep.add(cfg[name])
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    worker = preload(cfg)
    os.write(1, b"ready\n")
    serve(cfg, worker, ctl)


if __name__ == "__main__":
    main()
