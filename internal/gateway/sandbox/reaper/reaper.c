/*
 * metalambda-init: pid 1 of a forked worker's PID namespace, for linux/amd64.
 *
 * A zygote's child forks the worker, drops every capability (an empty bounding
 * set, locked securebits with SECBIT_NOROOT, no_new_privs), installs the
 * seccomp filter, closes every descriptor and then executes this program from
 * a sealed memfd (see ../reaper.go), so that the worker's init costs a few
 * pages rather than a forked CPython. It does what the zygote's serve_init
 * does: it reaps every process orphaned into the namespace and, once the
 * worker (argv[1], its pid in the namespace) has ended, exits with its status:
 * 128+n for signal n (as bubblewrap's init), its exit code otherwise; 1 when
 * no child is left before that. Its own death ends the namespace, and the
 * kernel kills everything left in it.
 *
 * No libc, no allocation, no input but argv[1] and the wait statuses: the only
 * system calls it makes are wait4 and exit_group. Signals sent from inside
 * the namespace to its init without a handler are dropped by the kernel, and
 * the worker, of another user, may not send any.
 *
 * Rebuild with build.sh (go generate ./internal/gateway/sandbox).
 */

#define SYS_wait4 61
#define SYS_exit_group 231
#define EINTR 4

static long syscall4(long n, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
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

__attribute__((noreturn, used)) void reaper_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	int worker = argc == 2 ? parse_pid(argv[1]) : -1;

	/* Called wrongly: end at once (and the namespace with it), with the
	 * status of a child that could not be specialized. */
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
