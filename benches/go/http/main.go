// HTTP/1.1 peer for scripts/bench-io.sh: one goroutine per connection, the
// same hand-written responder as the other peers (read, answer every
// complete request in the buffer with "Hello, world!\n" in one write,
// keep-alive). GOMAXPROCS is set by the caller.
//
//	go run ./benches/go/http 127.0.0.1:8080
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
)

var resp = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, world!\n")
var end = []byte("\r\n\r\n")

func serve(c net.Conn) {
	defer c.Close()
	base := make([]byte, 0, 4096)
	buf := base
	tmp := make([]byte, 4096)
	out := make([]byte, 0, 4096)
	for {
		n, err := c.Read(tmp)
		if n > 0 {
			buf = append(buf, tmp[:n]...)
			out = out[:0]
			for {
				i := bytes.Index(buf, end)
				if i < 0 {
					break
				}
				out = append(out, resp...)
				buf = buf[i+4:]
			}
			if len(out) > 0 {
				if _, werr := c.Write(out); werr != nil {
					return
				}
			}
			buf = append(base[:0], buf...) // keep the partial request at the front
		}
		if err != nil {
			return
		}
	}
}

func main() {
	addr := "127.0.0.1:8080"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	fmt.Println("go http listening on", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "http:", err)
			os.Exit(1)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		go serve(c)
	}
}
