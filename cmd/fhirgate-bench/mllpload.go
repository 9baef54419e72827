package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// methodMLLP marks a requestSpec sent over MLLP: URL is mllp://host:port
// and Body the HL7 message (with {seq} placeholders), one frame per request
// on the worker's own connection.
const methodMLLP = "MLLP"

// mllpSender returns a send function over one MLLP connection, dialled on
// first use and again after an error, and its closer. An acknowledgment
// with MSA-1 AA or CA counts as 200, anything else as 400.
func (run *loadRun) mllpSender() (sendFunc, func()) {
	var conn net.Conn
	var br *bufio.Reader
	closeConn := func() {
		if conn != nil {
			_ = conn.Close()
			conn = nil
		}
	}
	send := func(ctx context.Context, k int, seq uint64) (int, int, string, error) {
		req := run.reqs[k%len(run.reqs)]
		if conn == nil {
			addr := strings.TrimPrefix(req.url.render(seq), "mllp://")
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return 0, 0, "", err
			}
			conn, br = c, bufio.NewReaderSize(c, 32<<10)
		}
		_ = conn.SetDeadline(time.Now().Add(run.timeout))
		msg := req.body.render(seq)
		frame := make([]byte, 0, len(msg)+3)
		frame = append(append(append(frame, 0x0b), msg...), 0x1c, '\r')
		if _, err := conn.Write(frame); err != nil {
			closeConn()
			return 0, 0, "", err
		}
		ack, err := readMLLPFrame(br)
		if err != nil {
			closeConn()
			return 0, 0, "", err
		}
		if code := ackCode(ack); code != "AA" && code != "CA" {
			return len(ack), http.StatusBadRequest, string(ack[:min(len(ack), 200)]), nil
		}
		return len(ack), http.StatusOK, "", nil
	}
	return send, closeConn
}

// readMLLPFrame reads one frame and returns its message.
func readMLLPFrame(br *bufio.Reader) ([]byte, error) {
	if _, err := br.ReadBytes(0x0b); err != nil {
		return nil, err
	}
	msg, err := br.ReadBytes(0x1c)
	if err != nil {
		return nil, err
	}
	if cr, err := br.ReadByte(); err != nil || cr != '\r' {
		return nil, errors.New("mllp: no CR after the end block")
	}
	return msg[:len(msg)-1], nil
}

// ackCode is MSA-1 of an acknowledgment, "" without an MSA segment.
func ackCode(ack []byte) string {
	i := bytes.Index(ack, []byte("\rMSA"))
	if i < 0 || len(ack) < i+7 {
		return ""
	}
	return string(ack[i+5 : i+7])
}
