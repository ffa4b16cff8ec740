//! Actions (`do:` steps) and `apply` steps: what a user, an application or the harness does
//! from outside, through the API, SQL, the workload pod or the plugin. Each is recorded as a
//! `fault` start event named by its kind (the history's nemesis process, so the timings
//! checker sees a planned-failover request), and its end at once unless `heal` undoes it (an
//! `sql` with `heal`).

use std::collections::BTreeMap;

use bloodraven_api::names;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::faults::Undo;
use super::observe::cluster_error;
use super::{topology, LiveCluster};
use crate::error::Result;
use crate::history::event::{EventType, Op};
use crate::history::recorder::Recorder;
use crate::playground::names::{GROUP, OPERATOR_NAMESPACE};
use crate::scenario::model::{Action, Apply, SharedService, Site};

impl LiveCluster {
    pub(super) async fn apply_step(&self, apply: &Apply) -> Result<()> {
        let objects = match (&apply.fixture, &apply.object) {
            (Some(fixture), _) => crate::playground::kube::read_manifests(
                &crate::playground::install::Fixtures::new(self.fixtures_root()).path(fixture),
            )?,
            (None, Some(object)) => vec![object.clone()],
            (None, None) => return Err(cluster_error("apply", "neither fixture nor object")),
        };
        let manager = apply
            .field_manager
            .as_deref()
            .unwrap_or(crate::playground::kube::SCENARIO_FIELD_MANAGER);
        for object in objects {
            crate::playground::kube::apply_as(&self.client, &object, manager).await?;
        }
        Ok(())
    }

    fn fixtures_root(&self) -> std::path::PathBuf {
        self.installer.fixtures_root()
    }

    /// Performs an action and records it (see the module's header).
    pub(super) async fn perform_action(&self, action: &Action, recorder: &Recorder) -> Result<()> {
        let undo = match action {
            Action::Annotate { key, value, .. } => self.annotate(key, value.as_deref()).await?,
            Action::Sql {
                site,
                statements,
                heal,
            } => {
                let pod = names::pod(GROUP, site.name());
                self.installer.sql_as_root(&pod, statements).await?;
                heal.as_ref().map(|sql| Undo::Sql {
                    pod,
                    sql: sql.clone(),
                })
            }
            Action::SealRpo { sites } => self.seal_rpo(sites, recorder).await?,
            Action::OpenConnection {
                name: connection,
                service,
            } => {
                let host = match service {
                    SharedService::Primary => topology::service_host("primary"),
                    SharedService::Replicas => topology::service_host("replicas"),
                };
                self.open_connection(connection, &host).await?;
                None
            }
            Action::SendWrite { connection } => {
                self.send_write(connection).await?;
                None
            }
            Action::Plugin { args } => self.run_plugin(args).await?,
            Action::UpgradeOperator { image } => self.upgrade_operator(image).await?,
        };
        let detail = serde_json::to_string(action).unwrap_or_default();
        self.record_started(action.kind(), detail, action.sites(), undo, recorder);
        Ok(())
    }

    /// Sets (or with `None` removes) an annotation on the group.
    async fn annotate(&self, key: &str, value: Option<&str>) -> Result<Option<Undo>> {
        let groups = crate::playground::names::group_api(&self.client);
        groups
            .patch(
                GROUP,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .map_err(|e| cluster_error(format!("annotate the group with {key}"), e))?;
        Ok(None)
    }

    /// Reads the workload ids present on the surviving `sites` and records them as the seal.
    async fn seal_rpo(&self, sites: &[Site], recorder: &Recorder) -> Result<Option<Undo>> {
        recorder.invoke(
            "seal",
            Op::Sealed {
                sites: BTreeMap::new(),
            },
        );
        let mut sealed = BTreeMap::new();
        for site in sites {
            match self.site_ids(*site).await {
                Ok(ids) => {
                    sealed.insert(*site, ids);
                }
                Err(error) => {
                    recorder.complete(
                        "seal",
                        EventType::Fail,
                        Op::Sealed {
                            sites: BTreeMap::new(),
                        },
                    );
                    return Err(error);
                }
            }
        }
        recorder.complete("seal", EventType::Ok, Op::Sealed { sites: sealed });
        Ok(None)
    }

    /// Runs `kubectl bloodraven <args>`.
    async fn run_plugin(&self, args: &[String]) -> Result<Option<Undo>> {
        let binary = self.bin_dir.join("kubectl-bloodraven");
        let output = tokio::process::Command::new(&binary)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .await
            .map_err(|e| cluster_error(format!("run {}", binary.display()), e))?;
        if !output.status.success() {
            return Err(cluster_error(
                format!("kubectl bloodraven {}", args.join(" ")),
                String::from_utf8_lossy(&output.stderr).trim(),
            ));
        }
        Ok(None)
    }

    /// Rolls the operator Deployment to `image`.
    async fn upgrade_operator(&self, image: &str) -> Result<Option<Undo>> {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        // The image it runs now: rolling to the same one is a restart, which only a
        // changed template (the restart annotation) makes happen.
        let running = deployments
            .get(names::OPERATOR_DEPLOYMENT)
            .await
            .map_err(|e| cluster_error("read the operator Deployment", e))?
            .spec
            .and_then(|spec| spec.template.spec)
            .and_then(|pod| {
                pod.containers
                    .into_iter()
                    .find(|container| container.name == "operator")
            })
            .and_then(|container| container.image);
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        deployments
            .patch(
                names::OPERATOR_DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Strategic(crate::upgrade::operator_roll_patch(
                    running.as_deref(),
                    image,
                    &now,
                )),
            )
            .await
            .map_err(|e| cluster_error("upgrade the operator image", e))?;
        Ok(None)
    }

    /// Opens the held connection `name` to `host` from the in-cluster workload (a name opened
    /// again drops that name's earlier sent write there).
    async fn open_connection(&self, name: &str, host: &str) -> Result<()> {
        use crate::incluster::control::{OpenConnection, Request};
        self.workload_pod()
            .await?
            .ctl(&Request::OpenConnection(OpenConnection {
                name: name.to_owned(),
                host: host.to_owned(),
                password: self.password(),
            }))
            .await
            .map(|_| ())
    }

    /// Sends one write on the held connection `name` (in the workload pod) and leaves it in
    /// flight; the pod records what it is told.
    async fn send_write(&self, name: &str) -> Result<()> {
        use crate::incluster::control::{Request, SendWrite};
        self.workload_pod()
            .await?
            .ctl(&Request::SendWrite(SendWrite {
                name: name.to_owned(),
                id: None,
            }))
            .await
            .map(|_| ())
    }
}
