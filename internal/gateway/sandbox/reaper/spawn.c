/*
 * metalambda-spawn: what a script zygote's child executes, for linux/amd64.
 *
 * A zygote that forks workers which execute a program of their own (a
 * JavaScript or Jsonnet worker; ZygoteSpec.Executable) does not specialize
 * its children in Python: each child, pid 1 of a new PID namespace, still
 * root of the zygote's user namespace with the zygote's capabilities there,
 * executes this program from a sealed memfd (see ../spawn.go) with
 *
 *   metalambda-spawn UID TMPSIZE NETWORK EXEFD FILTERFD NCG CGFD... NLIM
 *                    RESOURCE VALUE ... -- ARG...
 *
 * and the worker's environment, its stdin, stdout and stderr on 0-2. It joins
 * the worker's cgroups (the descriptors CGFD), reads the seccomp filter from
 * FILTERFD, and forks the worker, which, before it executes anything:
 *
 *   takes its own mount, IPC, UTS, cgroup and (NETWORK 0) network
 *   namespaces, a fresh /tmp of TMPSIZE bytes, a /proc of its PID namespace,
 *   the hostname "sandbox" and (NETWORK 0) its own loopback, up; enters /tmp
 *   and a session of its own; closes every descriptor but 0-2 and EXEFD;
 *   empties its bounding and ambient capability sets, locks its securebits
 *   (NOROOT, no fix-up, no ambient raise), drops to UID (group UID, no
 *   supplementary groups) and empties its other capability sets; sets
 *   no_new_privs and the parent-death signal SIGKILL, the rlimits given, every
 *   signal back to its default with none blocked, and installs the filter;
 *   then executes EXEFD (the worker executable the gateway opened) with ARG...
 *   and the environment it was given. Everything fails closed: a step that
 *   fails writes its name to stderr and ends the process with status 126.
 *
 * This process stays the worker's init: it closes every descriptor, drops
 * every capability the same way (staying root of the user namespace, so that
 * the worker, another user, may neither signal nor read it), sets
 * no_new_privs, installs the same filter, makes itself not dumpable and then
 * does what the reaper (reaper.c) does: reaps every orphan and, once the
 * worker has ended, exits with its status (128+n for signal n).
 *
 * This is what python_zygote.py's child and become_worker do for a Python
 * worker, without the Python: a forked interpreter that specializes itself
 * and then executes costs two copies of the zygote's image and their
 * interpretation, about half a script worker's start.
 *
 * No libc, no allocation. Rebuild with build.sh (go generate
 * ./internal/gateway/sandbox).
 */

#define SYS_read 0
#define SYS_write 1
#define SYS_close 3
#define SYS_fcntl 72
#define SYS_rt_sigaction 13
#define SYS_rt_sigprocmask 14
#define SYS_ioctl 16
#define SYS_socket 41
#define SYS_fork 57
#define SYS_wait4 61
#define SYS_chdir 80
#define SYS_setsid 112
#define SYS_setgroups 116
#define SYS_setresuid 117
#define SYS_setresgid 119
#define SYS_capset 126
#define SYS_prctl 157
#define SYS_setrlimit 160
#define SYS_mount 165
#define SYS_sethostname 170
#define SYS_exit_group 231
#define SYS_unshare 272
#define SYS_execveat 322
#define SYS_close_range 436

#define EINTR 4
#define CLONE_NEWNS 0x00020000
#define CLONE_NEWCGROUP 0x02000000
#define CLONE_NEWUTS 0x04000000
#define CLONE_NEWIPC 0x08000000
#define CLONE_NEWNET 0x40000000
#define MS_NOSUID 2
#define MS_NODEV 4
#define MS_NOEXEC 8
#define MS_REC 16384
#define MS_PRIVATE (1 << 18)
#define PR_SET_PDEATHSIG 1
#define PR_SET_DUMPABLE 4
#define PR_SET_SECCOMP 22
#define PR_CAPBSET_DROP 24
#define PR_SET_SECUREBITS 28
#define PR_SET_NO_NEW_PRIVS 38
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#define SECCOMP_MODE_FILTER 2
/* SECBIT_NOROOT and SECBIT_NO_CAP_AMBIENT_RAISE set, the fix-up of
 * capabilities at a change of user kept, and all three locked, as
 * python_zygote.py's SECUREBITS. */
#define SECUREBITS (1 | 2 | 8 | 32 | 64 | 128)
#define CAPABILITY_VERSION_3 0x20080522
#define AT_EMPTY_PATH 0x1000
#define F_SETFD 2
#define FD_CLOEXEC 1
#define AF_INET 2
#define SOCK_DGRAM 2
#define SOCK_CLOEXEC 0x80000
#define SIOCGIFFLAGS 0x8913
#define SIOCSIFFLAGS 0x8914
#define IFF_UP 1
#define SIGKILL 9
#define NSIG 64
#define SIG_DFL 0

static long syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define sys(n, a, b, c, d, e) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static __attribute__((noreturn)) void quit(int code)
{
	for (;;)
		sys(SYS_exit_group, code, 0, 0, 0, 0);
}

static unsigned long length(const char *s)
{
	unsigned long n = 0;

	while (s[n])
		n++;
	return n;
}

/* fail writes "metalambda-spawn: WHAT" to stderr and ends with 126. */
static __attribute__((noreturn)) void fail(const char *what)
{
	static const char prefix[] = "metalambda-spawn: ";

	sys(SYS_write, 2, prefix, sizeof prefix - 1, 0, 0);
	sys(SYS_write, 2, what, length(what), 0, 0);
	sys(SYS_write, 2, "\n", 1, 0, 0);
	quit(126);
}

static void must(long ret, const char *what)
{
	if (ret < 0)
		fail(what);
}

/* number parses an unsigned decimal number that fits 64 bits; it fails on
 * anything else. */
static unsigned long number(const char *s)
{
	unsigned long v = 0;

	if (s == 0 || *s == 0)
		fail("bad arguments");
	for (; *s; s++) {
		unsigned long d = (unsigned long)(*s - '0');

		if (*s < '0' || *s > '9' || v > (~0UL - d) / 10)
			fail("bad arguments");
		v = v * 10 + d;
	}
	return v;
}

static int small(const char *s)
{
	unsigned long v = number(s);

	if (v > 0x7fffffff)
		fail("bad arguments");
	return (int)v;
}

static char *utoa(char *end, unsigned long v)
{
	*--end = 0;
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

static char *append(char *dst, const char *src)
{
	while (*src)
		*dst++ = *src++;
	*dst = 0;
	return dst;
}

static struct {
	unsigned short len;
	unsigned char *filter;
} fprog;
static unsigned char filter[65536];

/* drop empties every capability set for good (bounding and ambient sets,
 * locked securebits), becomes uid (when not negative) and sets no_new_privs
 * and the parent-death signal. */
static void drop(long uid)
{
	struct {
		unsigned int version;
		int pid;
	} header = {CAPABILITY_VERSION_3, 0};
	struct {
		unsigned int effective, permitted, inheritable;
	} data[2] = {{0, 0, 0}, {0, 0, 0}};

	for (long cap = 0; sys(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) == 0; cap++)
		;
	must(sys(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities");
	must(sys(SYS_prctl, PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "locking securebits");
	if (uid >= 0) {
		must(sys(SYS_setgroups, 0, 0, 0, 0, 0), "setgroups");
		must(sys(SYS_setresgid, uid, uid, uid, 0, 0), "setresgid");
		must(sys(SYS_setresuid, uid, uid, uid, 0, 0), "setresuid");
	}
	must(sys(SYS_capset, &header, data, 0, 0, 0), "clearing capabilities");
	must(sys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
	must(sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "parent-death signal");
}

static void install_filter(void)
{
	must(sys(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0), "installing the seccomp filter");
}

/* close_from closes every descriptor from first on but keep (-1: none), by
 * close_range where the kernel has it (Linux 5.9), else one by one. */
static void close_from(int first, int keep)
{
	if (keep >= first) {
		if ((keep == first || sys(SYS_close_range, first, keep - 1, 0, 0, 0) == 0) &&
		    sys(SYS_close_range, keep + 1, ~0U, 0, 0, 0) == 0)
			return;
	} else if (sys(SYS_close_range, first, ~0U, 0, 0, 0) == 0) {
		return;
	}
	for (long fd = first; fd < 65536; fd++)
		if (fd != keep)
			sys(SYS_close, fd, 0, 0, 0, 0);
}

static void loopback_up(void)
{
	struct {
		char name[16];
		short flags;
		char pad[22];
	} req = {{'l', 'o'}, 0, {0}};
	long s = sys(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0, 0, 0);

	must(s, "loopback socket");
	must(sys(SYS_ioctl, s, SIOCGIFFLAGS, &req, 0, 0), "loopback flags");
	req.flags |= IFF_UP;
	must(sys(SYS_ioctl, s, SIOCSIFFLAGS, &req, 0, 0), "loopback up");
	sys(SYS_close, s, 0, 0, 0, 0);
}

struct args {
	long uid;
	unsigned long tmp_size;
	int network, exe, filter;
	char **limits; /* RESOURCE VALUE pairs */
	int nlimits;
	char **argv; /* the worker's command */
	char **envp;
};

static __attribute__((noreturn)) void become_worker(struct args *a)
{
	char data[64], digits[24];
	long flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
	struct {
		unsigned long handler, flags, restorer, mask;
	} dfl = {SIG_DFL, 0, 0, 0};
	unsigned long none = 0;

	if (!a->network)
		flags |= CLONE_NEWNET;
	must(sys(SYS_unshare, flags, 0, 0, 0, 0), "unshare");
	must(sys(SYS_mount, 0, "/", 0, MS_REC | MS_PRIVATE, 0), "mount / private");
	append(append(append(data, "size="), utoa(digits + sizeof digits, a->tmp_size)), ",mode=1777");
	must(sys(SYS_mount, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, data), "mount /tmp");
	must(sys(SYS_mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0), "mount /proc");
	must(sys(SYS_sethostname, "sandbox", 7, 0, 0, 0), "sethostname");
	if (!a->network)
		loopback_up();
	must(sys(SYS_chdir, "/tmp", 0, 0, 0, 0), "chdir /tmp");
	must(sys(SYS_setsid, 0, 0, 0, 0, 0), "setsid");
	/* Every descriptor but 0-2 and the executable, which the execution
	 * then closes. */
	must(sys(SYS_fcntl, a->exe, F_SETFD, FD_CLOEXEC, 0, 0), "the executable's descriptor");
	close_from(3, a->exe);
	drop(a->uid);
	for (int i = 0; i < a->nlimits; i++) {
		unsigned long v = number(a->limits[2 * i + 1]);
		unsigned long lim[2];

		if (v >= 1UL << 63)
			v = ~0UL; /* RLIM_INFINITY */
		lim[0] = lim[1] = v;
		must(sys(SYS_setrlimit, small(a->limits[2 * i]), lim, 0, 0, 0), "setrlimit");
	}
	for (int sig = 1; sig <= NSIG; sig++)
		if (sig != SIGKILL && sig != 19) /* SIGSTOP */
			sys(SYS_rt_sigaction, sig, &dfl, 0, 8, 0);
	must(sys(SYS_rt_sigprocmask, 2 /* SIG_SETMASK */, &none, 0, 8, 0), "sigprocmask");
	install_filter();
	syscall6(SYS_execveat, a->exe, (long)"", (long)a->argv, (long)a->envp, AT_EMPTY_PATH, 0);
	fail("executing the worker");
}

static int is_dashdash(const char *s)
{
	return s != 0 && s[0] == '-' && s[1] == '-' && s[2] == 0;
}

__attribute__((noreturn, used)) void spawn_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	struct args a;
	int i = 6, ncg, worker;
	long n;

	/* Not dumpable: the worker, once it is another user, may not read or
	 * write this process's memory or descriptors. */
	must(sys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable");
	if (argc < 8)
		fail("bad arguments");
	a.uid = small(argv[1]);
	a.tmp_size = number(argv[2]);
	a.network = small(argv[3]) != 0;
	a.exe = small(argv[4]);
	a.filter = small(argv[5]);
	if (a.exe < 3 || a.filter < 3)
		fail("bad arguments");
	ncg = small(argv[i++]);
	if (ncg > argc - i)
		fail("bad arguments");
	/* The init joins the worker's cgroups before it forks the worker, which
	 * so starts there; it is counted there too. */
	for (int c = 0; c < ncg; c++) {
		int fd = small(argv[i++]);

		must(sys(SYS_write, fd, "0", 1, 0, 0), "joining the worker's cgroup");
	}
	if (i >= argc)
		fail("bad arguments");
	a.nlimits = small(argv[i++]);
	if (a.nlimits > (argc - i) / 2)
		fail("bad arguments");
	a.limits = argv + i;
	i += 2 * a.nlimits;
	if (i + 1 >= argc || !is_dashdash(argv[i]))
		fail("bad arguments");
	a.argv = argv + i + 1;
	a.envp = argv + argc + 1;
	/* The filter, from a pipe the zygote's child filled. */
	for (n = 0;;) {
		long r = sys(SYS_read, a.filter, filter + n, sizeof filter - n, 0, 0);

		if (r == -EINTR)
			continue;
		must(r, "reading the seccomp filter");
		if (r == 0)
			break;
		n += r;
		if (n == sizeof filter)
			fail("the seccomp filter is too long");
	}
	if (n == 0 || n % 8 != 0)
		fail("the seccomp filter is missing or not whole instructions");
	fprog.len = (unsigned short)(n / 8);
	fprog.filter = filter;
	sys(SYS_close, a.filter, 0, 0, 0, 0);

	worker = (int)sys(SYS_fork, 0, 0, 0, 0, 0);
	if (worker == 0)
		become_worker(&a);
	must(worker, "fork");
	/* The init holds nothing: no descriptor, no capability, the filter. */
	close_from(0, -1);
	drop(-1);
	install_filter();
	for (;;) {
		int status = 0;
		long pid = sys(SYS_wait4, -1, &status, 0, 0, 0);

		if (pid == -EINTR)
			continue;
		if (pid < 0)
			quit(1); /* ECHILD: no child left */
		if (pid != worker)
			continue; /* an orphan, reaped */
		if (status & 0x7f)
			quit(128 + (status & 0x7f));
		quit((status >> 8) & 0xff);
	}
}

/* The kernel starts the program with argc, argv... on the stack. */
__asm__(".text\n"
	".global _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call spawn_main\n"
	"	hlt\n");
