//! The node agent as `localkube up` uses it: two clusters side by side, Services wired
//! through ClusterIP + proxy + DNS, `down` leaves nothing behind (needs root).

use std::collections::BTreeMap;
use std::time::Duration;

use localkube::runtime::dns::EndpointRecord;
use localkube::runtime::service_wiring::{ServicePortSpec, ServiceSpec};
use localkube::runtime::{ContainerState, NodeAgent, PodSpec};

use crate::support::node::{exec_in, greeting_server, is_root, shell, ClusterGuard};

/// A pod `app/<name>` of one busybox shell, 1 s grace.
fn pod(name: &str, node: &str, script: &str) -> PodSpec {
    PodSpec {
        namespace: "app".into(),
        termination_grace_period: Duration::from_secs(1),
        ..crate::support::node::pod(name, node, vec![shell("main", script)])
    }
}

async fn agent(guard: &ClusterGuard) -> NodeAgent {
    NodeAgent::up(guard.config(), &["iad", "pdx"])
        .await
        .unwrap()
}

// docs/design/localkube.md#node-agent and #shape: two clusters (two tests) run side by side
// with their own names and ranges; a pod reaches a Service by name; `down` removes every
// namespace, veth, bridge and process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_side_by_side_with_services() {
    if !is_root() {
        return;
    }
    let guards: Vec<ClusterGuard> = ["one", "two"]
        .iter()
        .map(|name| ClusterGuard::new(&format!("agent-{name}")))
        .collect();
    let mut agents = Vec::new();
    for guard in &guards {
        agents.push(agent(guard).await);
    }
    assert_ne!(
        agents[0].runtime.naming().prefix,
        agents[1].runtime.naming().prefix
    );
    assert_ne!(
        agents[0].runtime.naming().pod_subnet(0),
        agents[1].runtime.naming().pod_subnet(0)
    );
    assert_ne!(agents[0].dns_addr(), agents[1].dns_addr());

    for (i, agent) in agents.iter().enumerate() {
        let mut server = pod("server", "iad", &greeting_server("os.environ[\"CLUSTER\"]"));
        server.containers[0].env = vec![localkube::runtime::EnvVar::literal(
            "CLUSTER",
            format!("cluster-{i}"),
        )];
        let server_ip = agent.runtime.start_pod(server).await.unwrap();
        agent
            .runtime
            .start_pod(pod("client", "pdx", "exec sleep 3600"))
            .await
            .unwrap();
        let range = agent.runtime.naming().service_range().addr.octets();
        agent
            .services
            .apply(ServiceSpec {
                namespace: "app".into(),
                name: "web".into(),
                cluster_ip: Some(std::net::Ipv4Addr::new(range[0], range[1], 0, 80)),
                ports: vec![ServicePortSpec {
                    name: Some("http".into()),
                    protocol: "TCP".into(),
                    port: 80,
                    target_port: Some(8080),
                }],
                publish_not_ready_addresses: false,
                endpoints: vec![EndpointRecord {
                    ip: server_ip,
                    hostname: None,
                    ready: true,
                    ports: BTreeMap::new(),
                }],
            })
            .await
            .unwrap();
    }
    let script = "import socket
for attempt in range(50):
    try:
        print(socket.create_connection(('web', 80), timeout=2).recv(100).decode().strip()); break
    except OSError:
        import time; time.sleep(0.1)";
    for (i, agent) in agents.iter().enumerate() {
        for key in ["app/server", "app/client"] {
            agent
                .runtime
                .wait_for(key, Duration::from_secs(10), |s| {
                    matches!(
                        s.container_statuses[0].state,
                        ContainerState::Running { .. }
                    )
                })
                .await
                .unwrap();
        }
        let out = exec_in(
            &agent.runtime,
            "app/client",
            "main",
            &["python3", "-c", script],
            Duration::from_secs(20),
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("cluster-{i}"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for agent in agents {
        let prefix = format!("{}-", agent.runtime.naming().prefix);
        let pid = agent.runtime.container_pid("app/server", "main").unwrap();
        agent.down(Duration::from_secs(1)).await.unwrap();
        let netns = String::from_utf8(
            std::process::Command::new("ip")
                .args(["netns", "list"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let links = String::from_utf8(
            std::process::Command::new("ip")
                .args(["-o", "link", "show"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        assert!(
            !netns.contains(&prefix) && !links.contains(&prefix),
            "{netns}\n{links}"
        );
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
