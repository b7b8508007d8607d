package lambda

import (
	"io"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// busyWait is how long a script worker waits for its next call without the Go
// runtime seeing it wait (callReader); a worker that gets no call in that time
// waits in a blocking read, which lets its runtime sleep.
const busyWait = 5 * time.Millisecond

// callReader is a script worker's stdin, read so that a worker called again and
// again does not wake the Go runtime's monitor thread at each call.
//
// In a plain blocking read the worker's only goroutine never goes back to the
// scheduler, so its P's scheduling tick never advances. The runtime's monitor
// (sysmon) takes that for a goroutine running too long and, within 10 ms, takes
// the P away from the read. With every P idle the monitor sleeps; the read's
// return takes a P again and wakes it, and it then polls every 20 µs for a
// millisecond before it backs off. Measured on a warm JavaScript worker called
// every 0.7 ms: 3.4 context switches, 1.3 nanosleeps and 0.55 futex calls per
// call, 92 µs of processor time. The network poller is no better: each wait
// parks the goroutine with every P idle, and the next system call wakes the
// monitor (40% more processor time per call).
//
// So the worker first waits for input in ppoll made as a raw system call, which
// the runtime does not see: the goroutine keeps its P, and the monitor neither
// takes it nor sleeps and wakes. That cut the worker above to 2.2 context
// switches and 71 µs per call. A call that comes later than busyWait is read
// by a blocking read as before, so that an idle worker's runtime sleeps: an idle
// worker costs nothing, and a worker called every few seconds pays one more
// wake-up per call.
//
// A stop of the world (a collection's end) does not wait out the ppoll: the
// runtime's preemption signal ends it (EINTR), and the loop's next function
// call yields. callReader expects fd in blocking mode (ServeWorker sets it).
type callReader struct {
	fd   int
	wait time.Duration // busyWait; tests shorten or lengthen it
}

func (r *callReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if r.ready() {
		// Input (or the end of it) is there: this read does not block.
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(r.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno != unix.EINTR {
			return readResult(int(n), errnoErr(errno))
		}
	}
	for {
		n, err := unix.Read(r.fd, b)
		if err != unix.EINTR {
			return readResult(n, err)
		}
	}
}

// ready waits up to r.wait for input on r.fd, without telling the runtime, and
// reports whether there is some, or the end of it, or an error that a read will
// report.
func (r *callReader) ready() bool {
	deadline := time.Now().Add(r.wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := unix.PollFd{Fd: int32(r.fd), Events: unix.POLLIN}
		ts := unix.NsecToTimespec(int64(left))
		n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return false // the blocking read waits, and reports what is wrong
		}
		return n > 0
	}
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
