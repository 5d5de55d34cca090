package load

import (
	"net"
	"syscall"
)

// connAlive reports whether an idle connection can carry a request: the
// server has not closed or reset it and has sent nothing unasked. It
// peeks at the socket without blocking (one recvfrom system call); a
// connection it cannot peek at counts as alive.
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			// n == 0 without an error: the server closed it; n > 0:
			// unasked-for bytes (a 408, say); another error: a reset.
			_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if rerr == syscall.EINTR {
				continue
			}
			// Nothing to read: open and quiet.
			alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
			return true // never wait for readability
		}
	})
	return err == nil && alive
}
