#!/usr/bin/env bash
# Makes the tls example's certificates in DIR (default: ./certs) with the openssl CLI:
#   ca.pem                  a CA that signs both others (its key, ca.key, stays beside it)
#   server.pem, server.key  the server's, for DNS:localhost, IP:127.0.0.1 and IP:::1
#   client.pem, client.key  a client's, "CN=ferry example client" with a SPIFFE URI
# EC P-256 keys, valid 30 days. For trying the example only: never commit the keys, and get
# real certificates from your own CA.
#   make_certs.sh [DIR]
set -euo pipefail
dir=${1:-certs}
mkdir -p "$dir"
cd "$dir"
days=30

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days $days -out ca.pem \
  -subj "/O=ferry example/CN=ferry example CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

leaf() {  # leaf NAME SUBJECT EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days $days -sha256 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm "$1.csr" "$1.ext"
}
leaf server "/O=ferry example/CN=ferry example server" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"
leaf client "/O=ferry example/CN=ferry example client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=URI:spiffe://example.ferry/client"
rm -f ca.srl
echo "make_certs.sh: CA, server and client certificates in $(pwd)"
