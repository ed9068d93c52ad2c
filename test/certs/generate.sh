#!/usr/bin/env bash
# Generates the test PKI the TLS tests and the interop programs use (committed with its output;
# rerun only to change it): a CA, a server certificate for localhost, 127.0.0.1, ::1 and
# *.test.google.fr (the host name gRPC's interop clients check with --use_test_ca), a client
# certificate with a SPIFFE URI (and three more for the authorization tests), a second CA with a server certificate of its own, an
# expired server certificate, a server certificate that names localhost in its CN only (no
# subjectAltName), and one whose only name is elsewhere.ferry.test. EC P-256 keys; valid for 100
# years except the expired one.
#
#   generate.sh              all of them (new CAs: every certificate changes)
#   generate.sh NAME...      only those leaves, under the CA checked in: how cn_only and
#                            wrong_name were added (generate.sh cn_only wrong_name)
set -euo pipefail
cd "$(dirname "$0")"
days=36500
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

only=("$@")
wanted() { [[ ${#only[@]} -eq 0 || " ${only[*]} " == *" $1 "* ]]; }

ca() {  # ca NAME SUBJECT
  wanted "$1" || return 0
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days $days -subj "$2" -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

ca ca "/O=ferry test/CN=ferry test CA"
ca other_ca "/O=ferry test/CN=ferry other CA"

cat > "$work/server.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:*.test.google.fr,DNS:waterzooi.test.google.be,DNS:*.test.youtube.com,IP:127.0.0.1,IP:::1
EXT
cat > "$work/client.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=DNS:client.ferry.test,URI:spiffe://ferry.test/ns/default/sa/client
EXT

leaf() {  # leaf NAME SUBJECT EXTFILE [CA]
  wanted "$1" || return 0
  local ca=${4:-ca}
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$work/$1.csr"
  openssl x509 -req -in "$work/$1.csr" -CA $ca.pem -CAkey $ca.key -CAcreateserial \
    -CAserial "$work/$ca.srl" -days $days -sha256 -extfile "$3" -out "$1.pem" 2>/dev/null
}
leaf server "/O=ferry test/CN=ferry test server" "$work/server.ext"
leaf client "/O=ferry test/CN=ferry test client" "$work/client.ext"
# The same names under the other CA: what a rotation test switches to.
leaf other_server "/O=ferry test/CN=ferry other server" "$work/server.ext" other_ca
# Host names in the subject's CN only, as before RFC 2818 was followed: matches no host.
cat > "$work/cn_only.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
EXT
leaf cn_only "/O=ferry test/CN=localhost" "$work/cn_only.ext"
# A valid server certificate for another name only (neither localhost nor an address).
sed 's/^subjectAltName=.*/subjectAltName=DNS:elsewhere.ferry.test/' "$work/server.ext" \
  > "$work/wrong_name.ext"
leaf wrong_name "/O=ferry test/CN=elsewhere.ferry.test" "$work/wrong_name.ext"

# Client certificates for the authorization tests (test/authz_agreement): one whose names are
# DNS SANs only, one with a subject and no SAN, one with two URI SANs (so no SPIFFE ID).
client_ext() {  # client_ext NAME SAN: a client certificate's extensions, SAN optional
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=clientAuth"
    if [[ -n $2 ]]; then echo "subjectAltName=$2"; fi
  } > "$work/$1.ext"
}
client_ext client_dns "DNS:dns.ferry.test,DNS:api.dns.ferry.test"
leaf client_dns "/O=ferry test/CN=ferry dns client" "$work/client_dns.ext"
client_ext client_subject ""
leaf client_subject "/O=ferry test/OU=billing/CN=ferry subject client" "$work/client_subject.ext"
client_ext client_uris "URI:spiffe://ferry.test/ns/prod/sa/billing,URI:https://billing.ferry.test/id,DNS:billing.ferry.test"
leaf client_uris "/O=ferry test/CN=ferry uris client" "$work/client_uris.ext"

# Expired: `openssl ca` is the only 3.0 tool that takes explicit dates.
if ! wanted expired; then echo "generated in $(pwd)"; exit 0; fi
key expired.key
openssl req -new -key expired.key -subj "/O=ferry test/CN=ferry expired server" \
  -out "$work/expired.csr"
touch "$work/index.txt"
cat > "$work/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
database = $work/index.txt
new_certs_dir = $work
serial = $work/serial
default_md = sha256
policy = any
copy_extensions = none
[any]
organizationName = optional
commonName = supplied
CNF
echo 01 > "$work/serial"
openssl ca -batch -config "$work/ca.cnf" -cert ca.pem -keyfile ca.key -in "$work/expired.csr" \
  -startdate 20200101000000Z -enddate 20200102000000Z -extfile "$work/server.ext" \
  -out expired.pem -notext 2>/dev/null
echo "generated in $(pwd)"
