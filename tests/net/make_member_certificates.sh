#!/bin/sh
# tests/net/make_member_certificates.sh DIR [ID...] — the commands of docs/security.md, "Certificates":
# a cluster CA and a key and certificate per member (default 1 2 3), each naming its id as the
# subjectAltName URI zab://member/<id>, made with the openssl program in DIR. The ctest
# zab_tls_openssl_cli runs it and starts transports with what it made.
set -eu
dir="$1"
shift
[ $# -gt 0 ] || set -- 1 2 3
mkdir -p "$dir"
cd "$dir"
umask 077

# The cluster CA: signs the members' certificates and nothing else. Keep ca.key offline.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=zab cluster CA" -keyout ca.key -out ca.pem \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# One key and certificate per member, naming its id.
for id in "$@"; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=zab-member-$id" -keyout "member-$id.key" -out "member-$id.csr"
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
        "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=URI:zab://member/$id" \
        >"member-$id.ext"
    openssl x509 -req -in "member-$id.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -days 365 -extfile "member-$id.ext" -out "member-$id.pem"
done
