//! The live cluster every backend hands the runner: the shared install, workload, probes,
//! observations ([`observe`], for [`crate::targets`]), faults ([`faults`]) and actions
//! ([`actions`]) over kube-rs. After cluster creation the backends differ only in
//! how faults reach processes and nodes ([`faults::FaultDriver`]).

pub mod actions;
/// The in-cluster fault agent's driver.
pub mod agent;
pub mod archive;
pub mod exec;
pub mod faults;
pub mod fleet;
pub mod incluster;
pub mod observe;
pub mod seal;
pub mod site_probes;
pub mod topology;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;

use crate::backend::{Cluster, Workload};
use crate::error::{Error, Result};

use crate::history::recorder::Recorder;
use crate::playground::install::{Fixtures, Installer};
use crate::scenario::model::{Action, Apply, Expect, Fault, HealTarget, Install};
use crate::targets::Observation;

/// A cluster reached through a kubeconfig, with the playground installed on demand.
pub struct LiveCluster {
    runtime: tokio::runtime::Runtime,
    kubeconfig: PathBuf,
    client: Client,
    installer: Installer,
    driver: Box<dyn faults::FaultDriver>,
    state: Mutex<faults::ActiveFaults>,
    workload_password: Mutex<Option<String>>,
    bin_dir: PathBuf,
    recorder: Mutex<Option<Arc<Recorder>>>,
    /// The groups of the installed fleet, the playground included (1: no fleet).
    fleet: Mutex<u32>,
    /// The fleet's watcher while a workload runs ([`fleet::watch_fleet`]).
    fleet_watch: Mutex<Option<fleet::FleetWatch>>,
}

impl std::fmt::Debug for LiveCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCluster")
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

/// Which fault driver a [`LiveCluster`] uses.
pub enum DriverChoice {
    /// The backend's own.
    Given(Box<dyn faults::FaultDriver>),
    /// The in-cluster fault agent, installed with the playground (the portable path).
    Agent,
    /// The in-cluster fault agent, wrapped by a backend that adds what only it can do (kind's
    /// `docker stop` of a node).
    AgentWith(Box<dyn FnOnce(agent::AgentDriver) -> Box<dyn faults::FaultDriver> + Send>),
}

impl LiveCluster {
    /// Connects to the cluster of `kubeconfig`. `driver` injects process and node faults;
    /// `bin_dir` holds `kubectl-bloodraven`.
    pub fn connect(
        kubeconfig: &Path,
        fixtures: Fixtures,
        out_dir: &Path,
        driver: DriverChoice,
        bin_dir: PathBuf,
    ) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Cluster {
                action: "start the async runtime".to_owned(),
                reason: e.to_string(),
            })?;
        let client = runtime.block_on(crate::playground::kube::client(kubeconfig))?;
        let mut installer = Installer::new(client.clone(), fixtures, out_dir);
        let driver: Box<dyn faults::FaultDriver> = match driver {
            DriverChoice::Given(driver) => driver,
            DriverChoice::Agent => {
                installer.with_fault_agent();
                Box::new(agent::AgentDriver::new(
                    client.clone(),
                    runtime.handle().clone(),
                ))
            }
            DriverChoice::AgentWith(wrap) => {
                installer.with_fault_agent();
                wrap(agent::AgentDriver::new(
                    client.clone(),
                    runtime.handle().clone(),
                ))
            }
        };
        Ok(Self {
            runtime,
            kubeconfig: kubeconfig.to_path_buf(),
            client,
            installer,
            driver,
            state: Mutex::new(faults::ActiveFaults::default()),
            workload_password: Mutex::new(None),
            bin_dir,
            recorder: Mutex::new(None),
            fleet: Mutex::new(1),
            fleet_watch: Mutex::new(None),
        })
    }

    /// The Kubernetes client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The installer.
    pub fn installer(&self) -> &Installer {
        &self.installer
    }

    /// Runs a future on the cluster's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    async fn install_workload_user(&self) -> Result<String> {
        let password = bloodraven_operator::workloads::random_password();
        let pod = self.installer.active_pod().await?;
        self.installer
            .sql_as_root(&pod, &workload::setup_statements(&password)?)
            .await?;
        Ok(password)
    }

    /// The history of the running scenario so far (empty before a workload started).
    pub fn history(&self) -> crate::history::store::History {
        self.recorder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|recorder| recorder.snapshot())
            .unwrap_or_default()
    }

    fn password(&self) -> Option<String> {
        self.workload_password
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Cluster for LiveCluster {
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn install(&self, install: &Install) -> Result<()> {
        self.runtime.block_on(async {
            let group = self.installer.install_with(install).await?;
            let size = install.fleet.unwrap_or(1);
            fleet::install_fleet(&self.client, &group, size).await?;
            *self.fleet.lock().unwrap_or_else(PoisonError::into_inner) = size;
            let password = self.install_workload_user().await?;
            *self
                .workload_password
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(password);
            Ok(())
        })
    }

    fn uninstall(&self) -> Result<()> {
        drop(
            self.fleet_watch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let healed = self.heal_all_quietly();
        self.runtime.block_on(self.installer.uninstall())?;
        healed
    }

    fn start_workload(&self, recorder: Arc<Recorder>) -> Result<Box<dyn Workload>> {
        let password = self.password().ok_or_else(|| Error::Cluster {
            action: "start the workload".to_owned(),
            reason: "the playground is not installed".to_owned(),
        })?;
        let _guard = self.runtime.enter();
        let running = self.runtime.block_on(async {
            let group = self.installer.group().await?;
            let pod = incluster::WorkloadPod::find(
                self.client.clone(),
                crate::playground::names::NAMESPACE,
            )
            .await?;
            let spec = incluster::InClusterSpec {
                run: format!("r{}", jiff::Timestamp::now().as_millisecond()),
                primary: topology::service_host("primary"),
                replicas: topology::service_host("replicas"),
                dns_server: Some(topology::dns_standin_server(&self.client).await?),
                dns_hostname: group["spec"]["dns"]["hostname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                password,
                site_probes: Some(incluster::SiteProbeSpec {
                    group: crate::playground::names::GROUP.to_owned(),
                    namespace: crate::playground::names::NAMESPACE.to_owned(),
                    sites: crate::scenario::model::Site::ALL.to_vec(),
                }),
            };
            incluster::InClusterWorkload::start(self.client.clone(), pod, spec, recorder.clone())
                .await
        })?;
        if *self.fleet.lock().unwrap_or_else(PoisonError::into_inner) > 1 {
            *self
                .fleet_watch
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(fleet::watch_fleet(
                self.runtime.handle(),
                self.client.clone(),
                recorder.clone(),
            ));
        }
        *self.recorder.lock().unwrap_or_else(PoisonError::into_inner) = Some(recorder);
        Ok(Box::new(running))
    }

    fn apply(&self, apply: &Apply) -> Result<()> {
        self.runtime.block_on(self.apply_step(apply))
    }

    fn inject(&self, fault: &Fault, recorder: &Recorder) -> Result<()> {
        self.runtime.block_on(self.inject_fault(fault, recorder))
    }

    fn act(&self, action: &Action, recorder: &Recorder) -> Result<()> {
        self.runtime.block_on(self.perform_action(action, recorder))
    }

    fn heal(&self, target: &HealTarget, recorder: &Recorder) -> Result<()> {
        self.runtime
            .block_on(self.heal_faults(target, Some(recorder)))
    }

    fn observe(&self, expect: &Expect) -> Result<Observation> {
        self.runtime.block_on(expect.target.observe(self))
    }

    fn converged(&self) -> Result<Option<String>> {
        self.runtime.block_on(self.converged_now())
    }

    fn final_state(&self) -> Result<crate::backend::FinalRows> {
        self.runtime.block_on(self.final_rows())
    }

    fn final_gtid_state(&self) -> Result<Option<crate::history::event::Op>> {
        self.runtime.block_on(self.gtid_state()).map(Some)
    }

    fn collect_artifacts(&self, dir: &Path) -> Result<()> {
        self.runtime.block_on(self.artifacts(dir))
    }
}
