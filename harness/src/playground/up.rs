//! `bloodraven-playground up|down|install|uninstall`: what `just up` and `just down` run.

use std::path::PathBuf;
use std::time::Instant;

use super::install::{Fixtures, Installer, NAMESPACE};
use super::localkube::LocalkubeConfig;
use super::portforward::{self, PortForward};
use crate::error::{Error, Result};

/// The counter's port on 127.0.0.1 (docs/design/requirements.md R001.2:
/// `curl -s localhost:8090/api/counter`).
pub const COUNTER_LOCAL_PORT: u16 = 8090;

/// Where the playground lives.
#[derive(Debug, Clone)]
pub struct Playground {
    /// The workspace root (fixtures).
    pub root: PathBuf,
    /// The cluster.
    pub localkube: LocalkubeConfig,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Cluster {
            action: "start the async runtime".to_owned(),
            reason: e.to_string(),
        })
}

impl Playground {
    /// The state dir `LOCALKUBE_STATE_DIR`, else `<root>/.localkube`.
    pub fn default_state_dir(root: &std::path::Path) -> PathBuf {
        std::env::var_os("LOCALKUBE_STATE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".localkube"))
    }

    fn counter_forward(&self) -> PortForward {
        PortForward {
            kubeconfig: self.localkube.kubeconfig(),
            namespace: NAMESPACE.to_owned(),
            target: "svc/counter".to_owned(),
            local_port: COUNTER_LOCAL_PORT,
            remote_port: 8090,
            state_dir: self.localkube.state_dir.clone(),
        }
    }

    /// Starts the cluster (if needed), installs everything (idempotent), forwards the
    /// counter to localhost:8090 and prints how to use it.
    pub fn up(&self) -> Result<()> {
        let started = Instant::now();
        crate::progress::say(format!(
            "starting localkube ({})",
            self.localkube.state_dir.display()
        ));
        let fresh = self.localkube.up()?;
        eprintln!(
            "playground: localkube {} ({})",
            if fresh { "started" } else { "already running" },
            self.localkube.state_dir.display()
        );
        self.install()?;
        self.counter_forward().start()?;
        let kubeconfig = self.localkube.kubeconfig();
        println!(
            "playground is up in {:.1}s: authority Valid on iad, every site healthy.\n\n\
             export KUBECONFIG={}\n\
             export PATH={}:$PATH   # kubectl bloodraven\n\n\
             kubectl bloodraven status playground -n {NAMESPACE}\n\
             kubectl -n {NAMESPACE} get mfg,pods,svc\n\
             curl -s localhost:{COUNTER_LOCAL_PORT}/api/counter\n\
             just down   # stops everything",
            started.elapsed().as_secs_f64(),
            kubeconfig.display(),
            self.localkube.bin_dir.display(),
        );
        Ok(())
    }

    /// Installs the playground on the running cluster.
    pub fn install(&self) -> Result<()> {
        let kubeconfig = self.localkube.kubeconfig();
        let fixtures = Fixtures::new(&self.root);
        let out_dir = self.localkube.state_dir.clone();
        runtime()?.block_on(async move {
            let client = super::kube::client(&kubeconfig).await?;
            Installer::new(client, fixtures, out_dir)
                .install()
                .await
                .map(|_| ())
        })
    }

    /// Removes the playground from the running cluster (the cluster stays).
    pub fn uninstall(&self) -> Result<()> {
        let kubeconfig = self.localkube.kubeconfig();
        let fixtures = Fixtures::new(&self.root);
        let out_dir = self.localkube.state_dir.clone();
        portforward::stop_all(&self.localkube.state_dir);
        runtime()?.block_on(async move {
            let client = super::kube::client(&kubeconfig).await?;
            Installer::new(client, fixtures, out_dir).uninstall().await
        })
    }

    /// Stops the port-forwards and localkube, removing everything they made.
    pub fn down(&self) -> Result<()> {
        portforward::stop_all(&self.localkube.state_dir);
        if self.localkube.localkube().is_file() {
            self.localkube.down(false)?;
        }
        println!(
            "playground is down ({})",
            self.localkube.state_dir.display()
        );
        Ok(())
    }
}
