//go:build unix

package batch

import (
	"errors"
	"os"
	"syscall"
)

// lock takes an exclusive advisory lock (flock) on f, held until f is
// closed; ErrLocked if another open file holds it.
func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		}
		return err
	}
}
