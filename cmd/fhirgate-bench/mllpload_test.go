package main

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestMLLPLoad: the load generator's MLLP transport sends one frame per
// request on each worker's connection, counts AA/CA answers as successes
// and anything else as failures.
func TestMLLPLoad(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					msg, err := readMLLPFrame(br)
					if err != nil {
						return
					}
					code := "AA"
					if strings.Contains(string(msg), "|BAD") {
						code = "AE"
					}
					_, _ = c.Write([]byte("\x0bMSH|^~\\&|A|B|C|D|20260101||ACK|1|P|2.5.1\rMSA|" + code + "|x\x1c\r"))
				}
			}()
		}
	}()
	spec := loadSpec{Concurrency: 3, MaxRequests: 30, Timeout: duration(5 * time.Second),
		Requests: []requestSpec{{Method: methodMLLP, URL: "mllp://" + ln.Addr().String(), Body: "MSH|^~\\&|X|{seq}"}}}
	res, err := runLoad(context.Background(), spec)
	if err != nil || res.Requests != 30 || res.errors() != 0 {
		t.Fatalf("got %+v, %v", res, err)
	}
	spec.Requests[0].Body = "MSH|^~\\&|BAD|{seq}"
	res, err = runLoad(context.Background(), spec)
	if err != nil || res.Non2xx != 30 {
		t.Fatalf("AE answers: %+v, %v", res, err)
	}
}
