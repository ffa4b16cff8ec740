//! Cluster DNS (hickory-server) queried with hickory-resolver on a loopback ephemeral port,
//! as the tests of docs/design/requirements.md R004.4 do ("resolves against an in-process
//! hickory-server on an ephemeral local port, so the tests never touch real DNS").

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::Resolver;
use localkube_runtime::dns::{
    ClusterDns, DnsRecords, EndpointRecord, ExternalRecord, ServicePortRecord, ServiceRecord,
};

fn resolver(addr: SocketAddr) -> Resolver<TokioRuntimeProvider> {
    let mut udp = ConnectionConfig::udp();
    udp.port = addr.port();
    let mut tcp = ConnectionConfig::tcp();
    tcp.port = addr.port();
    let server = NameServerConfig::new(addr.ip(), true, vec![udp, tcp]);
    let config = ResolverConfig::from_parts(None, vec![], vec![server]);
    let mut opts = ResolverOpts::default();
    // docs/design/requirements.md R004.3: no response cache, so a pod registered later is seen
    // at once.
    opts.cache_size = 0;
    Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .unwrap()
}

async fn a(resolver: &Resolver<TokioRuntimeProvider>, name: &str) -> Result<Vec<Ipv4Addr>, String> {
    match resolver.lookup(name, RecordType::A).await {
        Ok(lookup) => {
            let mut ips: Vec<Ipv4Addr> = lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => Some(a.0),
                    _ => None,
                })
                .collect();
            ips.sort();
            Ok(ips)
        }
        Err(err) if err.is_nx_domain() => Err("NXDOMAIN".into()),
        Err(err) if err.is_no_records_found() => Ok(Vec::new()),
        Err(err) => Err(err.to_string()),
    }
}

fn tellus(publish_not_ready: bool) -> ServiceRecord {
    ServiceRecord {
        cluster_ip: None,
        ports: vec![ServicePortRecord {
            name: Some("tellus".into()),
            protocol: "UDP".into(),
            port: 7878,
        }],
        publish_not_ready_addresses: publish_not_ready,
        endpoints: (0..3u8)
            .map(|i| EndpointRecord {
                ip: Ipv4Addr::new(10, 244, i, 2),
                hostname: Some(format!("tellus-{i}")),
                ready: i == 0,
                ports: [("tellus".to_string(), 7878)].into(),
            })
            .collect(),
    }
}

// docs/design/requirements.md R004.8-R004.10 and R004.3: a headless Service with
// publishNotReadyAddresses resolves to every pod (A and one SRV per pod for the named port);
// without it only ready pods; SingleStack IPv4 means AAAA is empty; the resolver keeps no
// cache, so changes show at once.
#[tokio::test]
async fn headless_service_a_srv_and_publish_not_ready() {
    let records = DnsRecords::new();
    let dns = ClusterDns::serve("127.0.0.1:0".parse().unwrap(), records.clone())
        .await
        .unwrap();
    let resolver = resolver(dns.addr());
    let name = "tellus.tellus.svc.cluster.local.";

    records.set_service("tellus", "tellus", tellus(false));
    assert_eq!(
        a(&resolver, name).await.unwrap(),
        vec![Ipv4Addr::new(10, 244, 0, 2)]
    );

    records.set_service("tellus", "tellus", tellus(true));
    assert_eq!(a(&resolver, name).await.unwrap().len(), 3);
    let srv = resolver
        .lookup(
            "_tellus._udp.tellus.tellus.svc.cluster.local.",
            RecordType::SRV,
        )
        .await
        .unwrap();
    let mut targets: Vec<(String, u16)> = srv
        .answers()
        .iter()
        .filter_map(|r| match &r.data {
            RData::SRV(s) => Some((s.target.to_string(), s.port)),
            _ => None,
        })
        .collect();
    targets.sort();
    assert_eq!(
        targets[0],
        (
            "tellus-0.tellus.tellus.svc.cluster.local.".to_string(),
            7878
        )
    );
    assert_eq!(targets.len(), 3);
    assert_eq!(
        a(&resolver, "tellus-2.tellus.tellus.svc.cluster.local.")
            .await
            .unwrap(),
        vec![Ipv4Addr::new(10, 244, 2, 2)]
    );

    let aaaa = resolver.lookup(name, RecordType::AAAA).await;
    assert!(
        matches!(&aaaa, Err(err) if err.is_no_records_found() && !err.is_nx_domain()),
        "AAAA is an empty NOERROR: {aaaa:?}"
    );
    assert_eq!(
        a(&resolver, "nope.tellus.svc.cluster.local.").await,
        Err("NXDOMAIN".into())
    );
    dns.shutdown().await;
}

// docs/design/localkube.md#services-and-dns: ClusterIP Services answer their ClusterIP;
// DNSEndpoint zones are served and freeze while the external-dns stand-in is stopped; TCP works
// as well as UDP.
#[tokio::test]
async fn cluster_ip_and_external_dns_zone() {
    let records = DnsRecords::new();
    let dns = ClusterDns::serve("127.0.0.1:0".parse().unwrap(), records.clone())
        .await
        .unwrap();
    let resolver = resolver(dns.addr());
    records.set_service(
        "bloodraven-playground",
        "mysql-playground-primary",
        ServiceRecord {
            cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 20)),
            ports: vec![ServicePortRecord {
                name: Some("mysql".into()),
                protocol: "TCP".into(),
                port: 3306,
            }],
            publish_not_ready_addresses: false,
            endpoints: vec![],
        },
    );
    assert_eq!(
        a(
            &resolver,
            "mysql-playground-primary.bloodraven-playground.svc.cluster.local."
        )
        .await
        .unwrap(),
        vec![Ipv4Addr::new(10, 96, 0, 20)]
    );
    let srv = resolver
        .lookup(
            "_mysql._tcp.mysql-playground-primary.bloodraven-playground.svc.cluster.local.",
            RecordType::SRV,
        )
        .await
        .unwrap();
    assert_eq!(srv.answers().len(), 1);

    let external = |ip: &str| {
        vec![ExternalRecord {
            dns_name: "playground.db.example.test".into(),
            record_type: "A".into(),
            targets: vec![ip.into()],
            ttl: Some(30),
        }]
    };
    records.set_dns_endpoint(
        "bloodraven-playground",
        "bloodraven-playground",
        external("10.96.0.20"),
    );
    assert_eq!(
        a(&resolver, "playground.db.example.test.").await.unwrap(),
        vec![Ipv4Addr::new(10, 96, 0, 20)]
    );
    records.stop_external_dns();
    records.set_dns_endpoint(
        "bloodraven-playground",
        "bloodraven-playground",
        external("10.96.0.21"),
    );
    assert_eq!(
        a(&resolver, "playground.db.example.test.").await.unwrap(),
        vec![Ipv4Addr::new(10, 96, 0, 20)],
        "stuck external-dns"
    );
    records.start_external_dns();
    assert_eq!(
        a(&resolver, "playground.db.example.test.").await.unwrap(),
        vec![Ipv4Addr::new(10, 96, 0, 21)]
    );
    assert_eq!(
        a(&resolver, "other.example.test.").await,
        Err("NXDOMAIN".into())
    );

    // Over TCP only.
    let mut tcp = ConnectionConfig::tcp();
    tcp.port = dns.addr().port();
    let config = ResolverConfig::from_parts(
        None,
        vec![],
        vec![NameServerConfig::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            true,
            vec![tcp],
        )],
    );
    let tcp_resolver = Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .build()
        .unwrap();
    assert_eq!(
        a(&tcp_resolver, "playground.db.example.test.")
            .await
            .unwrap(),
        vec![Ipv4Addr::new(10, 96, 0, 21)]
    );
    dns.shutdown().await;
}
