//! `bloodraven-dns-standin`, the in-cluster stand-in for external-dns
//! (docs/design/harness.md#the-portable-path): on kind or any cluster nothing serves the
//! DNSEndpoints the operator writes, so this Deployment (`fixtures/playground/dns-standin.yaml`)
//! plays both external-dns and its DNS provider. It watches the DNSEndpoints of its namespace
//! and the pause ConfigMap ([`source`], the API's side), keeps what they ask for and what it
//! applied under the pause rule ([`provider`]), turns objects into A records ([`records`]) and
//! records into answers ([`zone`]), serves them over UDP and TCP ([`server`]); [`standin`] is
//! the loop between them and [`cli`] the binary's command line.

pub mod cli;
pub mod provider;
pub mod records;
pub mod server;
pub mod source;
pub mod standin;
pub mod zone;
