package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// limitListener holds at most max accepted connections at once. One beyond
// that is answered at once with a 503 OpenAI error and closed, rather than
// left in the accept queue: a flood of connections (or of clients that open
// one and stall) then costs a file descriptor only for the moment it takes
// to refuse it, and the client learns why.
type limitListener struct {
	net.Listener
	slots    chan struct{}
	refusing chan struct{} // bounds the refusals being written at once
	refused  prometheus.Counter
}

func newLimitListener(ln net.Listener, max int, refused prometheus.Counter) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), refusing: make(chan struct{}, 64), refused: refused}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		l.refused.Inc()
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				refuseConn(c, cap(l.slots))
			}()
		default:
			c.Close() // refusals already being written: no reply
		}
	}
}

// refuseResponse is the whole HTTP reply to a connection over the limit.
func refuseResponse(max int) []byte {
	body, _ := json.Marshal(errorBody(errTooManyConns(max)))
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// refuseConn writes the 503 and closes c. It first reads what the client
// sent (briefly, a bounded amount): closing a socket with unread data resets
// the connection, and the client might then see the reset, not the reply.
func refuseConn(c net.Conn, max int) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(refuseResponse(max)); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitConn gives its slot back when closed (once: net/http may close twice).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
