/*
 * metalambda-init: pid 1 of a worker's PID namespace, for linux/amd64.
 *
 * It serves two kinds of sandbox, by its arguments:
 *
 *   metalambda-init PID
 *     A zygote's child forks the worker, drops every capability (an empty
 *     bounding set, locked securebits with SECBIT_NOROOT, no_new_privs),
 *     installs the seccomp filter, closes every descriptor and then executes this program
 *     from a sealed memfd (see ../reaper.go), so that the worker's init costs a
 *     few pages rather than a forked CPython.
 *
 *   metalambda-init -- PATH ARG...
 *     bubblewrap (--as-pid-1) executes it as the first process of a namespace
 *     sandbox, in place of its own init (a forked bubblewrap of about 0.13 MiB
 *     per sandbox): it forks, the child executes PATH (the launcher) with the
 *     environment it was given, and it then holds nothing: it closes every
 *     descriptor, clears its capabilities (a subset of the ones it had, so
 *     that the kernel keeps the parent-death signal bubblewrap set on it) and
 *     sets no_new_privs. It stays the user bubblewrap ran it as, the same as
 *     bubblewrap's monitor, which may therefore still kill it with that
 *     signal when it dies; a process of the command's user could not be. It
 *     never executes anything itself.
 *
 * In both, it first makes itself not dumpable, so that no process without
 * CAP_SYS_PTRACE over it may read or write its memory or descriptors, not even
 * one of its own user. Then it does what the zygote's serve_init does: it
 * reaps every process orphaned into the namespace and, once the worker (the
 * forked command, or argv[1], its pid in the namespace) has ended, exits with
 * its status: 128+n for signal n (as bubblewrap's init), its exit code
 * otherwise; 1 when no child is left before that. Its own death ends the
 * namespace, and the kernel kills everything left in it.
 *
 * No libc, no allocation, no input but its arguments and the wait statuses:
 * once it serves, the only system calls it makes are wait4 and exit_group.
 * Signals sent from inside the namespace to its init without a handler are
 * dropped by the kernel.
 *
 * Rebuild with build.sh (go generate ./internal/gateway/sandbox).
 */

#define SYS_close 3
#define SYS_fork 57
#define SYS_execve 59
#define SYS_wait4 61
#define SYS_capset 126
#define SYS_prctl 157
#define SYS_exit_group 231
#define SYS_close_range 436
#define EINTR 4
#define SYS_write 1
#define PR_SET_DUMPABLE 4
#define PR_SET_NO_NEW_PRIVS 38
#define CAPABILITY_VERSION_3 0x20080522

static long syscall5(long n, long a, long b, long c, long d, long e)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}

static long syscall4(long n, long a, long b, long c, long d)
{
	return syscall5(n, a, b, c, d, 0);
}

static __attribute__((noreturn)) void quit(int code)
{
	for (;;)
		syscall4(SYS_exit_group, code, 0, 0, 0);
}

/* parse_pid reads a positive decimal pid; -1 for anything else. */
static int parse_pid(const char *s)
{
	long v = 0;

	if (s == 0 || *s == 0)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
		if (v > 0x7fffffff)
			return -1;
	}
	return v > 0 ? (int)v : -1;
}

/* spawn forks the command argv (argv[0] its path) with envp, then makes this
 * process hold nothing; the child's pid, or -1 when the fork failed. A child
 * that cannot execute the command exits 127. */
static int spawn(char **argv, char **envp)
{
	struct {
		unsigned int version;
		int pid;
	} header = {CAPABILITY_VERSION_3, 0};
	struct {
		unsigned int effective, permitted, inheritable;
	} data[2] = {{0, 0, 0}, {0, 0, 0}};
	long pid = syscall4(SYS_fork, 0, 0, 0, 0);

	if (pid == 0) {
		static const char failed[] = "metalambda-init: cannot execute the command\n";

		syscall4(SYS_execve, (long)argv[0], (long)argv, (long)envp, 0);
		syscall4(SYS_write, 2, (long)failed, sizeof failed - 1, 0);
		quit(127);
	}
	if (pid < 0)
		return -1;
	/* Every descriptor (the command's pipes, its launch, its cgroups), by
	 * one call where the kernel has close_range (Linux 5.9), else one by
	 * one. */
	if (syscall4(SYS_close_range, 0, ~0U, 0, 0) != 0)
		for (long fd = 0; fd < 65536; fd++)
			syscall4(SYS_close, fd, 0, 0, 0);
	/* Dropping capabilities, unlike a change of user, keeps the
	 * parent-death signal. An init that cannot drop them ends, and the
	 * sandbox with it. */
	if (syscall4(SYS_capset, (long)&header, (long)data, 0, 0) != 0 ||
	    syscall5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		quit(126);
	return (int)pid;
}

static int is_dashdash(const char *s)
{
	return s != 0 && s[0] == '-' && s[1] == '-' && s[2] == 0;
}

__attribute__((noreturn, used)) void reaper_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	int worker;

	/* Not dumpable: no process without CAP_SYS_PTRACE over it may read or
	 * write its memory (/proc/1/mem, which no seccomp filter refuses),
	 * open its descriptors or attach to it, not even one of its own user
	 * (a sandbox of a gateway that is not root runs the command as the
	 * same user). Its own children are made dumpable again by their
	 * execution. */
	if (syscall5(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		quit(126);
	if (argc >= 3 && is_dashdash(argv[1]))
		worker = spawn(argv + 2, envp);
	else
		worker = argc == 2 ? parse_pid(argv[1]) : -1;

	/* Called wrongly, or the fork failed: end at once (and the namespace
	 * with it), with the status of a child that could not be specialized. */
	if (worker < 0)
		quit(126);
	for (;;) {
		int status = 0;
		long pid = syscall4(SYS_wait4, -1, (long)&status, 0, 0);

		if (pid == -EINTR)
			continue;
		if (pid < 0)
			quit(1); /* ECHILD: no child left */
		if (pid != worker)
			continue; /* an orphan, reaped */
		/* Without WUNTRACED a stop is never reported: a status is an
		 * exit (low 7 bits 0) or a signal's end (its number there). */
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
	"	call reaper_main\n"
	"	hlt\n");
