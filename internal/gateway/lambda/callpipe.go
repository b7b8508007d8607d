package lambda

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// callPipe is a script worker's stdin or stdout, used so that a worker's Go
// runtime sleeps between calls and is not woken by them.
//
// The runtime's monitor thread (sysmon) sleeps while every P is idle, and a
// goroutine's system call wakes it: entering one (entersyscall) or returning
// from one whose P was taken away. Once woken, the monitor polls every 20 µs for
// a millisecond before it backs off; and a read that blocks has its P taken away
// (with the worker's one P, at the monitor's next poll), which resets the
// monitor to 20 µs. A worker that waited for its next call in a blocking read
// and wrote its reply with write(2) so paid 40-60 wake-ups of the monitor for a
// call that came after a pause: 2.0-2.2 ms of processor time and 67 context
// switches per call for a JavaScript worker called every 200 ms, against 0.15 ms
// for one called every 0.5 ms (BenchmarkScriptWorkerPaced). A busy wait of 5 ms
// in a raw ppoll (invisible to the runtime) saved that only for calls that came
// within it.
//
// Once the function is loaded, callPipe makes the descriptor non-blocking and
// reads and writes it with raw system calls, which the runtime does not see;
// when there is nothing to read (or no room to write), the goroutine parks in
// the runtime's network poller. Between calls the worker is one thread in
// epoll_pwait with every P idle and the monitor asleep; a call wakes that
// thread, which runs the call and parks again, and nothing wakes the monitor.
// Measured on the worker above: 0.46-0.48 ms and 2.7 context switches per call.
//
// So a call runs with the monitor asleep, and nothing preempts it: with one P,
// a timer started during a call (a context's deadline) fires only once the call
// ends. Nothing in a call needs one. A call has no timer in the worker: the
// gateway kills a worker past its call's timeout. A collection's restart of the
// world wakes the monitor. The monitor also wakes by itself at the first timer
// that was pending when it went to sleep, or within a minute (forced
// collections). The function's top-level code does need its timeout's timer: it
// is loaded with blocking reads, and after wakeMonitor.
type callPipe struct {
	fd   int
	file *os.File        // a duplicate of fd in the poller, once it is
	rc   syscall.RawConn // file's; nil until poll
}

// poll switches the pipe to raw system calls and the network poller. It polls a
// duplicate of the descriptor, which the poller cannot already hold (os.Stdin
// is in it when the descriptor was non-blocking at start). On failure the pipe
// stays blocking, as it was. Polling a pipe that polls already does nothing.
func (p *callPipe) poll() error {
	if p.rc != nil {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(p.fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fmt.Errorf("descriptor %d: %w", p.fd, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("descriptor %d: %w", p.fd, err)
	}
	// os.NewFile adds a non-blocking descriptor to the poller; one it could not
	// add (a regular file, /dev/null) has no deadlines.
	file := os.NewFile(uintptr(fd), fmt.Sprintf("/dev/fd/%d", p.fd))
	fail := func(err error) error {
		_ = unix.SetNonblock(fd, false) // the description fd shares with p.fd
		file.Close()
		return fmt.Errorf("descriptor %d: %w", p.fd, err)
	}
	if err := file.SetDeadline(time.Time{}); err != nil {
		return fail(fmt.Errorf("not one the runtime's poller takes: %w", err))
	}
	rc, err := file.SyscallConn()
	if err != nil {
		return fail(err)
	}
	p.file, p.rc = file, rc
	return nil
}

func (p *callPipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if p.rc == nil {
		for {
			n, err := unix.Read(p.fd, b)
			if err != unix.EINTR {
				return readResult(n, err)
			}
		}
	}
	var n int
	var errno unix.Errno
	err := p.rc.Read(func(fd uintptr) bool {
		n, errno = rawIO(unix.SYS_READ, fd, b)
		return errno != unix.EAGAIN
	})
	if err == nil {
		err = errnoErr(errno)
	}
	return readResult(n, err)
}

func (p *callPipe) Write(b []byte) (int, error) {
	if p.rc == nil {
		written := 0
		for written < len(b) {
			n, err := unix.Write(p.fd, b[written:])
			if err != nil && err != unix.EINTR {
				return written, err
			}
			written += max(n, 0)
		}
		return written, nil
	}
	written := 0
	for written < len(b) {
		var n int
		var errno unix.Errno
		err := p.rc.Write(func(fd uintptr) bool {
			n, errno = rawIO(unix.SYS_WRITE, fd, b[written:])
			return errno != unix.EAGAIN
		})
		if err == nil {
			err = errnoErr(errno)
		}
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// rawIO reads or writes b on fd with a raw system call, again when a signal
// interrupts it. b is not empty.
func rawIO(trap, fd uintptr, b []byte) (int, unix.Errno) {
	for {
		n, _, errno := unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno != unix.EINTR {
			return int(n), errno
		}
	}
}

// wakeMonitor makes a system call that the runtime sees, which wakes its
// monitor if it sleeps: a spare that waited for its function may hold its one P
// for another goroutine when the init frame's read returns, and then the read's
// return wakes nothing. Once awake, the monitor preempts the goroutine that runs
// the top-level code every 10 ms, so that the top-level timeout's timer runs.
func wakeMonitor() {
	_, _, _ = unix.Syscall(unix.SYS_GETPID, 0, 0, 0)
}

// pollCalls switches a worker's stdin and stdout to the poller once its
// function is loaded; in and out that are not callPipes (tests) stay as they
// are.
func pollCalls(in io.Reader, out io.Writer) error {
	for _, s := range []any{in, out} {
		if p, ok := s.(*callPipe); ok {
			if err := p.poll(); err != nil {
				return err
			}
		}
	}
	return nil
}

func readResult(n int, err error) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}
