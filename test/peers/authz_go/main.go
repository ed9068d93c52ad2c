// authz_peer_go: grpc-go's authorization engine (google.golang.org/grpc/authz, authz.NewStatic)
// in front of a server that answers every method, for ferry's agreement test
// (test/authz_agreement_test.cc): each policy file named on the command line gets a server of
// its own on 127.0.0.1 over TLS (client certificates verified when given, as ferry's server
// with require_client_certificate off). One line per policy on stdout, in order: the port, or
// "error <why>" when grpc-go refuses the policy. Runs until stdin closes.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/authz"
	_ "google.golang.org/grpc/authz/audit/stdout" // "stdout_logger", as policies may name it
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"
)

func main() {
	cert := flag.String("cert", "", "server certificate (PEM)")
	key := flag.String("key", "", "server private key (PEM)")
	ca := flag.String("ca", "", "CA of the client certificates (PEM)")
	flag.Parse()

	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatalf("server certificate: %v", err)
	}
	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		log.Fatalf("CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		log.Fatalf("CA: no certificate in %s", *ca)
	}
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
	})

	out := bufio.NewWriter(os.Stdout)
	for _, file := range flag.Args() {
		policy, err := os.ReadFile(file)
		if err != nil {
			log.Fatalf("policy %s: %v", file, err)
		}
		interceptor, err := authz.NewStatic(string(policy))
		if err != nil {
			fmt.Fprintf(out, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatalf("listen: %v", err)
		}
		server := grpc.NewServer(grpc.Creds(creds),
			grpc.UnaryInterceptor(interceptor.UnaryInterceptor),
			grpc.StreamInterceptor(interceptor.StreamInterceptor),
			// Every method answers: one request in, an empty response out. grpc-go runs the
			// stream interceptors, the policy among them, before this handler.
			grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
				if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
					return err
				}
				return stream.SendMsg(&emptypb.Empty{})
			}))
		go server.Serve(lis)
		fmt.Fprintf(out, "%d\n", lis.Addr().(*net.TCPAddr).Port)
	}
	out.Flush()
	io.Copy(io.Discard, os.Stdin) // until the test closes our stdin (or exits)
}
