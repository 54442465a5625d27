#!/usr/bin/env bash
# tests/real/make_test_pki.sh DIR: a throwaway certificate authority and the
# server certificates the TLS tests present, made with the openssl command
# (faketime for the expired one). Nothing here is trusted outside DIR.
#   ca.pem                 the test CA (what --ca-file / AWS_CA_BUNDLE name)
#   good.pem good.key      for localhost and 127.0.0.1, signed by the CA
#   wrong-host.pem/.key    for wrong.example only, signed by the CA
#   expired.pem/.key       for localhost and 127.0.0.1, signed by the CA, expired a year ago
#   untrusted.pem/.key     for localhost and 127.0.0.1, signed by another CA
set -euo pipefail
dir=${1:?usage: make_test_pki.sh DIR}
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make_test_pki: failed: $*" >&2; "$@"; exit 1; }; }

make_ca() {  # NAME SUBJECT
  quiet openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days 30 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
# make_server NAME CA SAN [clock...]: a server certificate signed by CA; the
# optional command before openssl x509 shifts its clock (faketime).
make_server() {
  local name=$1 ca=$2 san=$3
  shift 3
  quiet openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "/CN=leaseproof test server"
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$san" >"$name.ext"
  quiet "$@" openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
    -out "$name.pem" -days 30 -extfile "$name.ext"
  rm -f "$name.csr" "$name.ext"
}

make_ca ca "leaseproof test CA"
make_ca other-ca "another test CA"
make_server good ca "DNS:localhost,IP:127.0.0.1"
make_server wrong-host ca "DNS:wrong.example"
make_server untrusted other-ca "DNS:localhost,IP:127.0.0.1"
# Valid for 30 days from 400 days ago.
make_server expired ca "DNS:localhost,IP:127.0.0.1" faketime -f -400d
echo "$dir"
