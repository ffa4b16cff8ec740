//! Peer discovery against an in-process hickory-server on an ephemeral loopback port
//! (the test design of docs/design/requirements.md R004.4: never real DNS).

use std::net::{Ipv4Addr, SocketAddr};

use bloodraven_sidecar::{
    discovery::{Discovery, PeerQuery},
    testing::TestDns,
    Error,
};

async fn dns() -> TestDns {
    match TestDns::start("test.").await {
        Ok(dns) => dns,
        Err(error) => panic!("failed to start the test dns server: {error}"),
    }
}

#[tokio::test]
async fn seed_004_srv_targets_resolve_independently_and_a_failing_target_is_skipped() {
    let dns = dns().await;
    dns.set_srv(
        "_sidecar._tcp.mysql-playground-iad.test.",
        &[
            ("pod-a.test.", 18086),
            ("gone.test.", 18086),
            ("pod-b.test.", 28086),
        ],
    )
    .await
    .expect("srv");
    dns.set_a("pod-a.test.", &[Ipv4Addr::new(127, 0, 0, 11)])
        .await
        .expect("a");
    dns.set_a("pod-b.test.", &[Ipv4Addr::new(127, 0, 0, 12)])
        .await
        .expect("a");
    // gone.test. has no A record: that target fails and is skipped.
    let discovery = Discovery::new(
        PeerQuery::Srv {
            name: "_sidecar._tcp.mysql-{group}-{site}.test.".to_owned(),
        },
        "playground",
        Some(dns.address()),
    )
    .expect("discovery");
    let addresses = discovery.resolve_site("iad").await.expect("view");
    assert_eq!(
        addresses,
        vec![
            SocketAddr::from(([127, 0, 0, 11], 18086)),
            SocketAddr::from(([127, 0, 0, 12], 28086)),
        ],
        "each SRV target carries its own port"
    );
}

#[tokio::test]
async fn seed_004_a_records_pair_with_the_configured_port() {
    let dns = dns().await;
    dns.set_a(
        "mysql-playground-pdx.test.",
        &[Ipv4Addr::new(127, 0, 0, 21)],
    )
    .await
    .expect("a");
    let discovery = Discovery::new(
        PeerQuery::Host {
            name: "mysql-{group}-{site}.test.".to_owned(),
            port: 8086,
        },
        "playground",
        Some(dns.address()),
    )
    .expect("discovery");
    let addresses = discovery.resolve_site("pdx").await.expect("view");
    assert_eq!(addresses, vec![SocketAddr::from(([127, 0, 0, 21], 8086))]);
}

#[tokio::test]
async fn seed_004_a_view_resolving_no_address_is_an_error_to_retry() {
    let dns = dns().await;
    dns.set_srv(
        "_sidecar._tcp.mysql-playground-reader.test.",
        &[("nowhere.test.", 8086)],
    )
    .await
    .expect("srv");
    let srv = Discovery::new(
        PeerQuery::Srv {
            name: "_sidecar._tcp.mysql-{group}-{site}.test.".to_owned(),
        },
        "playground",
        Some(dns.address()),
    )
    .expect("discovery");
    assert!(matches!(
        srv.resolve_site("reader").await,
        Err(Error::EmptyView { .. })
    ));
    // No record at all is an error too, never an empty success.
    let host = Discovery::new(
        PeerQuery::Host {
            name: "mysql-{group}-{site}.test.".to_owned(),
            port: 8086,
        },
        "playground",
        Some(dns.address()),
    )
    .expect("discovery");
    assert!(host.resolve_site("reader").await.is_err());
}

#[tokio::test]
async fn seed_004_no_response_cache_a_moved_pod_is_seen_on_the_next_query() {
    let dns = dns().await;
    let owner = "mysql-playground-iad.test.";
    dns.set_a(owner, &[Ipv4Addr::new(127, 0, 0, 31)])
        .await
        .expect("a");
    let discovery = Discovery::new(
        PeerQuery::Host {
            name: "mysql-{group}-{site}.test.".to_owned(),
            port: 8086,
        },
        "playground",
        Some(dns.address()),
    )
    .expect("discovery");
    assert_eq!(
        discovery.resolve_site("iad").await.expect("first"),
        vec![SocketAddr::from(([127, 0, 0, 31], 8086))]
    );
    dns.set_a(owner, &[Ipv4Addr::new(127, 0, 0, 32)])
        .await
        .expect("a");
    assert_eq!(
        discovery.resolve_site("iad").await.expect("second"),
        vec![SocketAddr::from(([127, 0, 0, 32], 8086))],
        "a cached answer would hide the move for the record's TTL"
    );
}
