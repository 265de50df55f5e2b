// zab/net/tls_transport.hpp — `zab::asio::tls_transport`: `tcp_transport` with mutual TLS
// under every peer connection (tls_security.hpp: certificates signed by the cluster CA, each
// naming the member id it belongs to). Link `zab::asio_tls` (OpenSSL).
//
//   zab::asio::tls_options tls{.ca_file = "ca.pem", .certificate_file = "member-1.pem",
//                              .private_key_file = "member-1.key"};
//   zab::asio::tls_transport transport{executor, options, handler,
//                                      zab::asio::tls_security{tls}};
//   // or a node: zab::asio::node<Log, Machine, zab::default_policies, zab::asio::tls_transport>
//   //            n{executor, node_options, log, machine, disk, zab::asio::tls_security{tls}};
//   transport.reload_credentials(rotated);   // new connections use the new files
//
// The handshake, framing, bounds, back-off and quarantine are tcp_transport's own code
// (tcp_transport_core.hpp).
#pragma once

#include "zab/core/concepts.hpp"
#include "zab/net/tcp_transport.hpp"
#include "zab/net/tls_options.hpp"
#include "zab/net/tls_security.hpp"

namespace zab::asio {

using tls_transport = basic_transport<tls_security>;

static_assert(zab::transport<tls_transport>);

}  // namespace zab::asio
