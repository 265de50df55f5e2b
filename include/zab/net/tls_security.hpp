// zab/net/tls_security.hpp — mutual TLS under zab's peer connections (Boost.Asio SSL over
// OpenSSL): the `tls_security` policy of `basic_transport` (transport_security.hpp).
//
// Needs OpenSSL: link `zab::asio_tls` (CMakeLists.txt), which only users of TLS need.
//
// What it checks, in order, on every connection (both ends):
// 1. The TLS handshake, with a certificate required from both sides (verify_peer and
//    fail_if_no_peer_cert): the peer's chain must end at the cluster CA (`tls_options::ca_file`)
//    and every certificate in it be valid now. A failure is counted by its cause —
//    `refused_tls_no_certificate`, `refused_tls_untrusted` (another CA, a bad signature),
//    `refused_tls_expired` (or not valid yet), `refused_tls_handshake` (not TLS, an old
//    version) — as the OpenSSL verification callback saw it.
// 2. The identity: the member id the peer claims (its hello when it dialed us; the member we
//    dialed otherwise) must be named by its certificate (`zab://member/<id>`, tls_options.hpp),
//    else `refused_tls_wrong_identity`. This runs before the hello is answered, so a process
//    without member N's key can never hold, replace or displace a connection as N.
//
// Rotation: `reload_credentials()` builds a new SSL context from the files (checked as at
// start: key matches certificate, the certificate names this replica and is valid now) and
// uses it for every connection made afterwards; established connections keep the context they
// were made with (each stream holds its context) until they close. A reload that fails changes
// nothing. To rotate the CA, reload every replica first with a CA file holding both the old
// and the new CA, then their new certificates, then the new CA alone (docs/security.md, "Rotation").
//
// Not done here: revocation lists (rotate the CA to revoke), and session resumption (off:
// each connection does a full handshake, so every one is checked against the current CA).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/ssl/verify_context.hpp>
#include <boost/system/error_code.hpp>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/types.hpp"
#include "zab/net/tcp_transport_options.hpp"
#include "zab/net/tls_options.hpp"
#include "zab/net/transport_security.hpp"

namespace zab::asio {

namespace detail {

/// Keeps a stream's SSL context alive as long as the stream (a base, so that it is
/// constructed before the ssl::stream that refers to it).
struct tls_context_holder {
    std::shared_ptr<boost::asio::ssl::context> credentials;
};

/// The member ids the subjectAltName URIs of `certificate` name.
inline std::vector<peer_id> member_ids_of(X509* certificate) {
    std::vector<peer_id> ids;
    auto* names = static_cast<GENERAL_NAMES*>(
        X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
    if (names == nullptr) return ids;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
        if (name->type != GEN_URI) continue;
        const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
        const std::string_view text{reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                                    static_cast<std::size_t>(ASN1_STRING_length(uri))};
        if (const auto id = parse_member_uri(text)) ids.push_back(*id);
    }
    GENERAL_NAMES_free(names);
    return ids;
}

inline std::string describe_ids(const std::vector<peer_id>& ids) {
    if (ids.empty()) return "no member";
    return fmt::format("member {}", fmt::join(ids, ", "));
}

}  // namespace detail

/// A TLS stream over TCP that owns a reference to the context it was made with, and records
/// why the peer's certificate failed verification, if it did.
class tls_stream : private detail::tls_context_holder,
                   public boost::asio::ssl::stream<boost::asio::ip::tcp::socket> {
public:
    using base_type = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

    tls_stream(boost::asio::ip::tcp::socket socket,
               std::shared_ptr<boost::asio::ssl::context> context)
        : detail::tls_context_holder{std::move(context)},
          base_type{std::move(socket), *credentials} {}

    /// The first verification error of the peer's chain (X509_V_OK if none).
    long verify_error() const noexcept { return *verify_error_; }

    /// Records verification errors from now on (called once the stream is in place).
    void watch_verification() {
        set_verify_callback([error = verify_error_](bool preverified,
                                                    boost::asio::ssl::verify_context& context) {
            if (!preverified && *error == X509_V_OK)
                *error = X509_STORE_CTX_get_error(context.native_handle());
            return preverified;
        });
    }

private:
    std::shared_ptr<long> verify_error_ = std::make_shared<long>(X509_V_OK);
};

/// Mutual TLS whose certificates name member ids (the file comment).
class tls_security {
public:
    using stream_type = tls_stream;
    static constexpr bool has_handshake = true;

    explicit tls_security(tls_options options) : options_{std::move(options)} {}

    /// Loads the credentials (`transport.start()` calls it). `errc::invalid_options`, logged
    /// with the reason, if they cannot be used.
    result<void> prepare(peer_id self) {
        self_ = self;
        auto context = make_context(options_);
        if (!context) return context.error();
        context_ = std::move(context).assume_value();
        return success();
    }

    /// Replaces the credentials for connections made from now on (see the file comment).
    /// Before `start()`, only records them. On error (logged) the current ones stay.
    result<void> reload_credentials(tls_options options) {
        if (self_ == 0) {
            options_ = std::move(options);
            return success();
        }
        auto context = make_context(options);
        if (!context) return context.error();
        context_ = std::move(context).assume_value();
        options_ = std::move(options);
        ++reloads_;
        zab::log(log_level::info,
                 "tls_transport {}: credentials reloaded from {} (CA {}): new connections use "
                 "them",
                 self_, options_.certificate_file, options_.ca_file);
        return success();
    }

    const tls_options& options() const noexcept { return options_; }
    /// Successful `reload_credentials` calls after start.
    std::uint64_t reloads() const noexcept { return reloads_; }

    stream_type make_stream(boost::asio::ip::tcp::socket socket) {
        ZAB_ASSERT(context_ != nullptr, "tls_security: a stream before prepare()");
        return stream_type{std::move(socket), context_};
    }

    template <typename Handler>
    void async_handshake(stream_type& stream, handshake_role role, Handler&& handler) {
        stream.watch_verification();
        stream.async_handshake(role == handshake_role::client
                                   ? boost::asio::ssl::stream_base::client
                                   : boost::asio::ssl::stream_base::server,
                               std::forward<Handler>(handler));
    }

    std::optional<handshake_refusal> check_peer(stream_type& stream, peer_id claimed) {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
        X509* certificate = SSL_get0_peer_certificate(stream.native_handle());
        const auto ids = certificate ? detail::member_ids_of(certificate) : std::vector<peer_id>{};
#else
        X509* certificate = SSL_get_peer_certificate(stream.native_handle());
        const auto ids = certificate ? detail::member_ids_of(certificate) : std::vector<peer_id>{};
        if (certificate) X509_free(certificate);
#endif
        if (certificate == nullptr)
            return handshake_refusal{&handshake_rejections::refused_tls_no_certificate,
                                     "the peer presented no certificate"};
        if (std::find(ids.begin(), ids.end(), claimed) != ids.end()) return std::nullopt;
        return handshake_refusal{
            &handshake_rejections::refused_tls_wrong_identity,
            fmt::format("it claims to be member {} but its certificate names {} ({})", claimed,
                        detail::describe_ids(ids), member_uri(claimed))};
    }

    handshake_refusal classify_failure(stream_type& stream, boost::system::error_code error) {
        const long verify = stream.verify_error();
        if (verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID)
            return {&handshake_rejections::refused_tls_expired,
                    fmt::format("the peer's certificate is not valid now: {}",
                                X509_verify_cert_error_string(verify))};
        if (verify != X509_V_OK)
            return {&handshake_rejections::refused_tls_untrusted,
                    fmt::format("the peer's certificate is not signed by the cluster CA: {}",
                                X509_verify_cert_error_string(verify))};
        if (error.category() == boost::asio::error::get_ssl_category()) {
            const int reason = ERR_GET_REASON(static_cast<unsigned long>(
                static_cast<unsigned int>(error.value())));
            if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
                return {&handshake_rejections::refused_tls_no_certificate,
                        "the peer presented no certificate"};
            if (reason >= SSL_AD_REASON_OFFSET)  // an alert: the other end refused us
                return {&handshake_rejections::closed_by_remote,
                        fmt::format("the other end refused the TLS handshake: {}",
                                    error.message())};
        }
        if (error == boost::asio::error::eof || error == boost::asio::ssl::error::stream_truncated ||
            error == boost::asio::error::connection_reset)
            return {&handshake_rejections::closed_by_remote,
                    fmt::format("closed by the other end during the TLS handshake: {}",
                                error.message())};
        return {&handshake_rejections::refused_tls_handshake,
                fmt::format("TLS handshake failed: {}", error.message())};
    }

private:
    using context_ptr = std::shared_ptr<boost::asio::ssl::context>;

    result<context_ptr> make_context(const tls_options& options) const {
        namespace ssl = boost::asio::ssl;
        const auto fail = [&](std::string_view what) -> result<context_ptr> {
            zab::log(log_level::error, "tls_transport {}: cannot use the credentials: {}", self_,
                     what);
            return make_error_code(errc::invalid_options);
        };
        if (auto problem = options.problem(); !problem.empty()) return fail(problem);
        auto context = std::make_shared<ssl::context>(ssl::context::tls);
        SSL_CTX* native = context->native_handle();
        boost::system::error_code ec;
        context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                                 ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                                 ssl::context::no_tlsv1_1 | SSL_OP_NO_TICKET,
                             ec);
        if (ec) return fail(fmt::format("options: {}", ec.message()));
        if (SSL_CTX_set_min_proto_version(native, options.min_version == tls_version::tls1_2
                                                      ? TLS1_2_VERSION
                                                      : TLS1_3_VERSION) != 1)
            return fail("cannot set the minimum TLS version");
        SSL_CTX_set_num_tickets(native, 0);
        SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
        context->load_verify_file(options.ca_file, ec);
        if (ec) return fail(fmt::format("CA file {}: {}", options.ca_file, ec.message()));
        context->use_certificate_chain_file(options.certificate_file, ec);
        if (ec)
            return fail(fmt::format("certificate file {}: {}", options.certificate_file,
                                    ec.message()));
        context->use_private_key_file(options.private_key_file, ssl::context::pem, ec);
        if (ec)
            return fail(fmt::format("private key file {}: {}", options.private_key_file,
                                    ec.message()));
        if (SSL_CTX_check_private_key(native) != 1)
            return fail(fmt::format("the private key {} does not match the certificate {}",
                                    options.private_key_file, options.certificate_file));
        X509* own = SSL_CTX_get0_certificate(native);
        if (own == nullptr) return fail("no certificate loaded");
        const auto ids = detail::member_ids_of(own);
        if (std::find(ids.begin(), ids.end(), self_) == ids.end())
            return fail(fmt::format("the certificate {} names {}, not this replica ({})",
                                    options.certificate_file, detail::describe_ids(ids),
                                    member_uri(self_)));
        if (X509_cmp_current_time(X509_get0_notAfter(own)) <= 0 ||
            X509_cmp_current_time(X509_get0_notBefore(own)) >= 0)
            return fail(fmt::format("the certificate {} is not valid now",
                                    options.certificate_file));
        context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
        if (ec) return fail(fmt::format("verify mode: {}", ec.message()));
        return context;
    }

    tls_options options_;
    peer_id self_ = 0;
    context_ptr context_;  // for new connections; each stream keeps the one it was made with
    std::uint64_t reloads_ = 0;
};

static_assert(transport_security<tls_security>);

}  // namespace zab::asio
