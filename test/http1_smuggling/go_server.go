// The HTTP/1.1 server of Go's standard library (net/http), as the smuggling suite's reference
// (test/http1_smuggling/run_vectors.py): every request that its parser lets through is answered
// 200 once its body has been read in full. Prints "listening on 127.0.0.1:PORT". Standard
// library only, so `go build` needs no module.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", listener.Addr())
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			// A body whose framing fails part way: the request was not accepted.
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "ok %s %s %d", r.Method, r.URL.Path, n)
	})
	if err := http.Serve(listener, handler); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
