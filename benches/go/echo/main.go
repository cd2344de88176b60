// Echo server peer for scripts/bench-echo.sh: one goroutine per
// connection, read up to 4 KiB and write it back until EOF (the shape of
// examples/echo_server.rs). GOMAXPROCS is set by the caller.
//
//	go run ./benches/go/echo 127.0.0.1:7403
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	addr := "127.0.0.1:7000"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	fmt.Println("go echo listening on", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo:", err)
			os.Exit(1)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}(c)
	}
}
