package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// rawRequest is an HTTP/1.1 request written to the socket byte for byte, so
// a test can send what net/http's client refuses to: raw bytes in the
// request line, malformed or duplicated headers, lying lengths, bodies that
// trickle in or stop half way.
type rawRequest struct {
	method, target string
	// proto defaults to HTTP/1.1.
	proto string
	// headers are "Name: value" lines, sent as given.
	headers []string
	// body is sent after the head; Content-Length is added for it unless a
	// header already sets Content-Length or Transfer-Encoding.
	body []byte
	// stream, when set, writes the body instead (slow or endless bodies);
	// it gets the connection and the request's end.
	stream func(c net.Conn, done <-chan struct{})
	// noHost leaves out the Host header.
	noHost bool
}

// rawResponse is what came back; err is set when no complete response head
// arrived (the server closed the connection or the deadline passed).
type rawResponse struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
	err     error
}

// sendRaw sends r to the gateway at base (http://host:port) on a fresh
// connection and reads the response, giving up after timeout.
func sendRaw(base string, r rawRequest, timeout time.Duration) rawResponse {
	start := time.Now()
	u, err := url.Parse(base)
	if err != nil {
		return rawResponse{err: err}
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return rawResponse{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(start.Add(timeout))

	var head strings.Builder
	proto := r.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(&head, "%s %s %s\r\n", r.method, r.target, proto)
	if !r.noHost {
		head.WriteString("Host: " + u.Host + "\r\n")
	}
	framed := false
	for _, h := range r.headers {
		name, _, _ := strings.Cut(h, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length", "transfer-encoding":
			framed = true
		}
		head.WriteString(h + "\r\n")
	}
	if r.body != nil && !framed {
		head.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	head.WriteString("Connection: close\r\n\r\n")

	done := make(chan struct{})
	defer close(done)
	go func() {
		// Write errors are expected: the server may answer and close
		// before it has read a large or endless body.
		if _, err := io.WriteString(conn, head.String()); err != nil {
			return
		}
		switch {
		case r.stream != nil:
			r.stream(conn, done)
		case r.body != nil:
			_, _ = conn.Write(r.body)
		}
	}()

	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		return rawResponse{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: body, elapsed: time.Since(start), err: err}
}

// trickle writes chunk n times, one every interval, then half-closes
// the connection (or stops when the request ends).
func trickle(chunk string, n int, interval time.Duration) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, done <-chan struct{}) {
		for i := 0; i < n; i++ {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
}

// hold writes one byte every interval until the request ends, never
// finishing the body: a slowloris client.
func hold(interval time.Duration) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, done <-chan struct{}) {
		for {
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
		}
	}
}
