//! Three nodes, one MariaDB StatefulSet per node (`mariadb:10.11` from the catalog),
//! replication configured through Service DNS names; measures `up` to one Ready MariaDB pod
//! per node (docs/design/history.md#issue-4; needs root and Debian's mariadb-server).

use crate::support::{ready, TestCluster};
use anyhow::{ensure, Result};
use std::time::{Duration, Instant};

const SITES: [&str; 3] = ["iad", "pdx", "reader"];

fn statefulset(site: &str, server_id: usize) -> String {
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: db-{site}, namespace: default}}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {{app: db, site: {site}}}
  ports: [{{name: mysql, port: 3306, targetPort: mysql}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db-{site}, namespace: default}}
spec:
  serviceName: db-{site}
  replicas: 1
  selector: {{matchLabels: {{app: db, site: {site}}}}}
  template:
    metadata: {{labels: {{app: db, site: {site}}}}}
    spec:
      nodeSelector: {{topology.kubernetes.io/zone: {site}}}
      terminationGracePeriodSeconds: 10
      containers:
      - name: mariadb
        image: mariadb:10.11
        args: ["--server-id={server_id}", "--log-bin=mysql-bin", "--binlog-format=ROW", "--log-slave-updates"]
        env:
        - {{name: MARIADB_ROOT_PASSWORD, valueFrom: {{secretKeyRef: {{name: db, key: root-password}}}}}}
        ports: [{{name: mysql, containerPort: 3306}}]
        readinessProbe:
          exec: {{command: ["mariadb-admin", "ping", "-uroot", "-prootpw", "--protocol=tcp", "-h127.0.0.1"]}}
          periodSeconds: 1
"#
    )
}

const SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: default}
stringData: {root-password: rootpw}
"#;

async fn sql(c: &TestCluster, pod: &str, host: &str, query: &str) -> Result<String> {
    c.kubectl_ok(&[
        "exec",
        pod,
        "--",
        "mariadb",
        "-uroot",
        "-prootpw",
        "--protocol=tcp",
        "-h",
        host,
        "-N",
        "-B",
        "-e",
        query,
    ])
    .await
}

/// Design "Node agent": MariaDB per node, replication from db-iad-0 by its DNS name
/// (`<hostname>.<subdomain>.<ns>.svc.cluster.local`), rows reach both replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_per_node_replicates_through_service_dns() -> Result<()> {
    if !std::path::Path::new("/usr/sbin/mariadbd").exists() {
        ensure!(
            std::env::var_os("CI").is_none(),
            "CI needs Debian's mariadb-server (apt-get install -y mariadb-server)"
        );
        eprintln!("skipping: Debian's mariadb-server is not installed");
        return Ok(());
    }
    let started = Instant::now();
    let c = TestCluster::start(&SITES).await?;
    let result = scenario(&c, started).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster, started: Instant) -> Result<()> {
    let t = Duration::from_secs(180);
    let mut docs = vec![SECRET.to_string()];
    for (i, site) in SITES.iter().enumerate() {
        docs.push(statefulset(site, i + 1));
    }
    c.apply(&docs.join("\n---\n")).await?;
    let pods = c
        .wait_pods("app=db", t, |p| p.len() == 3 && p.iter().all(ready))
        .await?;
    let up = started.elapsed();
    eprintln!(
        "localkube up (3 nodes) to one Ready MariaDB pod per node: {:.1}s",
        up.as_secs_f64()
    );
    for p in &pods {
        let site = p["metadata"]["labels"]["site"].as_str().unwrap_or_default();
        ensure!(
            p["spec"]["nodeName"] == site,
            "db-{site}-0 runs on its node"
        );
    }
    let primary = "db-iad-0.db-iad.default.svc.cluster.local";
    sql(
        c,
        "db-iad-0",
        "127.0.0.1",
        "CREATE USER 'repl'@'%' IDENTIFIED BY 'replpw'; GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'; \
         CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY, site VARCHAR(16));",
    )
    .await?;
    for site in ["pdx", "reader"] {
        let pod = format!("db-{site}-0");
        sql(
            c,
            &pod,
            "127.0.0.1",
            &format!(
                "CHANGE MASTER TO MASTER_HOST='{primary}', MASTER_USER='repl', MASTER_PASSWORD='replpw', \
                 MASTER_USE_GTID=slave_pos; START SLAVE;"
            ),
        )
        .await?;
    }
    sql(
        c,
        "db-iad-0",
        "127.0.0.1",
        "INSERT INTO app.t VALUES (1, 'iad')",
    )
    .await?;
    for site in ["pdx", "reader"] {
        let pod = format!("db-{site}-0");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = sql(c, &pod, "127.0.0.1", "SELECT site FROM app.t WHERE id = 1")
                .await
                .unwrap_or_default();
            if got.trim() == "iad" {
                break;
            }
            if Instant::now() > deadline {
                let status = sql(c, &pod, "127.0.0.1", "SHOW SLAVE STATUS\\G").await?;
                anyhow::bail!("{pod} did not replicate: {status}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // The replicas reach the primary across nodes by name: the pdx replica also connects.
    let via_dns = sql(c, "db-pdx-0", primary, "SELECT @@server_id").await?;
    ensure!(via_dns.trim() == "1", "pdx -> iad by DNS: {via_dns}");
    Ok(())
}
