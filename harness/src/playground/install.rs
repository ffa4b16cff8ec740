//! Installing the playground of the requirements (docs/design/history.md#issue-8) on any cluster
//! (localkube, kind, an existing one): CRDs, the operator rendered from
//! `fixtures/playground/operator-values.yaml` with a generated escrow TLS certificate, the group
//! `playground`, the `counter-app` database with its app user, and the counter app. Every step is
//! idempotent, so installing twice is harmless; [`Installer::uninstall`] removes everything a
//! scenario can leave behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bloodraven_api::names;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::kube::{apply, delete, read_manifests, FIELD_MANAGER};
use crate::error::{Error, Result};

pub use super::names::{group_api, GROUP, NAMESPACE, OPERATOR_NAMESPACE};
/// The namespace of deployment clients other than the playground's own (scenarios 030-035:
/// `deploymentClients` holds one ServiceAccount per namespace); removed by the uninstall.
pub const DEPLOYERS_NAMESPACE: &str = "bloodraven-deployers";
/// The counter app's database user.
pub const COUNTER_USER: &str = "counter";
/// The counter app's database (schema).
pub const COUNTER_DATABASE: &str = "counter";
/// The Secret holding the counter user's password (key `password`).
pub const COUNTER_SECRET: &str = "counter-db";
/// The ConfigMap (in the playground namespace) holding the escrow TLS CA as `ca.crt`, for
/// deploy API clients (docs/design/requirements.md R003.7: `curl --cacert ca.crt`).
pub const CA_CONFIGMAP: &str = "bloodraven-ca";
/// The file (in the installer's output dir) holding the escrow TLS CA: never `ca.crt`,
/// which is localkube's own cluster CA in its state dir.
pub const ESCROW_CA_FILE: &str = "bloodraven-escrow-ca.crt";
/// Bound on waiting for the group to bootstrap (authority Valid, every site healthy).
pub const BOOTSTRAP_WAIT_MAX: Duration = Duration::from_secs(180);
/// Bound on waiting for a Deployment to be available.
pub const DEPLOYMENT_WAIT_MAX: Duration = Duration::from_secs(60);
/// Bound on waiting for the uninstall's deletions to finish.
pub const UNINSTALL_WAIT_MAX: Duration = Duration::from_secs(90);
/// How often waits poll.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// The fixture files, relative to the workspace root.
#[derive(Debug, Clone)]
pub struct Fixtures {
    /// The workspace root (holding `fixtures/`).
    pub root: PathBuf,
}

impl Fixtures {
    /// Fixtures under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
    /// `fixtures/crds/`.
    pub fn crds(&self) -> PathBuf {
        self.root.join("fixtures/crds")
    }
    /// A file of `fixtures/playground/`.
    pub fn playground(&self, file: &str) -> PathBuf {
        self.root.join("fixtures/playground").join(file)
    }
    /// A scenario's `apply.fixture`: a path relative to the repository root, under
    /// `fixtures/` (as the validator requires and `Apply::fixture` documents).
    pub fn path(&self, relative_to_root: &str) -> PathBuf {
        self.root.join(relative_to_root)
    }
}

/// What the installer does to a cluster.
#[derive(Clone)]
pub struct Installer {
    client: Client,
    fixtures: Fixtures,
    /// Where the installer writes files a person needs (the escrow CA, [`ESCROW_CA_FILE`]).
    out_dir: PathBuf,
    /// Whether the in-cluster fault agent is installed with the playground (and removed,
    /// with every fault it left checked undone, at uninstall).
    fault_agent: bool,
}

impl std::fmt::Debug for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installer")
            .field("fixtures", &self.fixtures.root)
            .field("out_dir", &self.out_dir)
            .finish()
    }
}

fn cluster_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

impl Installer {
    /// An installer using `client`, reading `fixtures`, writing the escrow CA into `out_dir`.
    pub fn new(client: Client, fixtures: Fixtures, out_dir: impl Into<PathBuf>) -> Self {
        Self {
            client,
            fixtures,
            out_dir: out_dir.into(),
            fault_agent: false,
        }
    }

    /// Stops (`true`) or resumes (`false`) the in-cluster stand-in for external-dns: it applies
    /// no DNSEndpoint change while paused and keeps answering what it last applied.
    pub async fn pause_external_dns(&self, paused: bool) -> Result<()> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NAMESPACE);
        api.patch(
            EXTERNAL_DNS_CONFIGMAP,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"paused": paused.to_string()}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            cluster_error(
                format!(
                    "{} external-dns (ConfigMap {NAMESPACE}/{EXTERNAL_DNS_CONFIGMAP})",
                    if paused { "stop" } else { "resume" }
                ),
                e,
            )
        })
    }

    /// Installs the in-cluster fault agent too (`fixtures/playground/chaos-agent.yaml`).
    pub fn with_fault_agent(&mut self) {
        self.fault_agent = true;
    }

    /// Applies the fault agent and waits until it is ready on every node it should run on.
    pub async fn install_fault_agent(&self) -> Result<()> {
        self.apply_file(&self.fixtures.playground("chaos-agent.yaml"))
            .await?;
        let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(self.client.clone(), crate::live::agent::AGENT_NAMESPACE);
        wait_for(
            DEPLOYMENT_WAIT_MAX,
            &format!(
                "DaemonSet {}/{} ready on every node",
                crate::live::agent::AGENT_NAMESPACE,
                crate::live::agent::AGENT_DAEMONSET
            ),
            || async {
                let status = api
                    .get(crate::live::agent::AGENT_DAEMONSET)
                    .await
                    .ok()?
                    .status?;
                (status.desired_number_scheduled > 0
                    && status.number_ready == status.desired_number_scheduled
                    && status.updated_number_scheduled.unwrap_or(0)
                        == status.desired_number_scheduled)
                    .then_some(())
            },
        )
        .await
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The workspace root the fixtures are read from.
    pub fn fixtures_root(&self) -> PathBuf {
        self.fixtures.root.clone()
    }

    /// Installs everything and waits until the group's authority is Valid with every site
    /// healthy and the counter available. Returns the group as JSON.
    /// The playground of the requirements (`just up`): the deploy API on, as the values file
    /// says.
    /// Any active site will do: `just up` again on a playground that failed over since keeps
    /// the site it failed over to.
    pub async fn install(&self) -> Result<Value> {
        let playground = crate::scenario::model::Install {
            deploy_api: true,
            ..crate::scenario::model::Install::default()
        };
        self.install_waiting_for(&playground, ActiveSite::Any).await
    }

    /// [`Installer::install`] with a scenario's overrides: the operator's `replicaCount`, the
    /// deploy API (and its escrow TLS) only when the scenario asks, and fields merged into the
    /// group's `spec` (JSON merge patch). It returns once the authority is Valid on the
    /// group's `initialActiveSite` with every site healthy: where every scenario's steps start
    /// (docs/scenarios.md, "Where the steps start"), so no scenario repeats that wait as a step.
    pub async fn install_with(&self, overrides: &crate::scenario::model::Install) -> Result<Value> {
        self.install_waiting_for(overrides, ActiveSite::Initial)
            .await
    }

    async fn install_waiting_for(
        &self,
        overrides: &crate::scenario::model::Install,
        active: ActiveSite,
    ) -> Result<Value> {
        use crate::progress::say;
        say("installing: the CRDs");
        self.install_crds().await?;
        let values = bloodraven_operator::install::values_from_file(
            &self.fixtures.playground("operator-values.yaml"),
        )
        .map_err(|e| cluster_error("read operator values", e))?;
        let values = operator_values(values, overrides);
        say("installing: the operator (waiting for its Deployment)");
        self.install_operator_values(&values).await?;
        say("installing: the group's MariaDB sites and sidecars");
        for mut object in read_manifests(&self.fixtures.playground("group.yaml"))? {
            if object["kind"] == "MysqlFailoverGroup" {
                if let Some(patch) = &overrides.group_spec {
                    crate::scenario::timing::merge(&mut object["spec"], patch);
                }
            }
            apply(&self.client, &object).await?;
        }
        say(format!(
            "installing: waiting up to {} s for the group's authority to be Valid{} with every site healthy",
            BOOTSTRAP_WAIT_MAX.as_secs(),
            match active {
                ActiveSite::Any => "",
                ActiveSite::Initial => " on its initial active site",
            }
        ));
        let group = self.wait_bootstrapped(BOOTSTRAP_WAIT_MAX, active).await?;
        say("installing: the counter's database and the counter");
        self.apply_file(&self.fixtures.playground("database.yaml"))
            .await?;
        self.install_counter().await?;
        if self.fault_agent {
            say("installing: the in-cluster fault agent (a DaemonSet, waiting for every node)");
            self.install_fault_agent().await?;
        }
        say("installing: the in-cluster stand-in for external-dns");
        self.apply_file(&self.fixtures.playground("dns-standin.yaml"))
            .await?;
        self.wait_deployment(NAMESPACE, DNS_STANDIN_DEPLOYMENT, DEPLOYMENT_WAIT_MAX)
            .await?;
        say("installing: the harness's in-cluster workload");
        self.apply_file(&self.fixtures.playground("workload.yaml"))
            .await?;
        self.wait_deployment(NAMESPACE, WORKLOAD_DEPLOYMENT, DEPLOYMENT_WAIT_MAX)
            .await?;
        Ok(group)
    }

    /// Applies every CRD of `fixtures/crds/` and waits until each is Established.
    pub async fn install_crds(&self) -> Result<()> {
        let dir = self.fixtures.crds();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| cluster_error(format!("read {}", dir.display()), e))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
            .collect();
        files.sort();
        let mut names = Vec::new();
        for file in files {
            for object in read_manifests(&file)? {
                names.push(
                    object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                );
                apply(&self.client, &object).await?;
            }
        }
        let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            Api::all(self.client.clone());
        for name in names {
            wait_for(
                Duration::from_secs(30),
                &format!("CRD {name} Established"),
                || async {
                    let crd = crds.get(&name).await.ok()?;
                    let established = crd
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    established.then_some(())
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Renders the operator from `values`, creates the escrow TLS Secret when the values
    /// enable it (and it is missing), applies the manifests and waits for the Deployment.
    pub async fn install_operator_values(
        &self,
        values: &bloodraven_operator::install::InstallValues,
    ) -> Result<()> {
        let objects = bloodraven_operator::install::render(values)
            .map_err(|e| cluster_error("render the operator install", e))?;
        for object in &objects {
            if object["kind"] == "Deployment" && values.auxiliary.escrow_tls.enabled {
                self.ensure_escrow_tls(&values.namespace, &values.auxiliary.escrow_tls.secret_name)
                    .await?;
            }
            apply(&self.client, object).await?;
        }
        self.wait_deployment(
            &values.namespace,
            names::OPERATOR_DEPLOYMENT,
            DEPLOYMENT_WAIT_MAX,
        )
        .await
    }

    /// Re-applies the operator's ClusterRole from the rendered install (heals an RBAC fault).
    pub async fn reapply_operator_rbac(&self) -> Result<()> {
        let values = bloodraven_operator::install::values_from_file(
            &self.fixtures.playground("operator-values.yaml"),
        )
        .map_err(|e| cluster_error("read operator values", e))?;
        let objects = bloodraven_operator::install::render(&values)
            .map_err(|e| cluster_error("render the operator install", e))?;
        for object in objects.iter().filter(|o| o["kind"] == "ClusterRole") {
            apply(&self.client, object).await?;
        }
        Ok(())
    }

    /// Creates the `kubernetes.io/tls` Secret of the operator's TLS listener (a CA and a
    /// server certificate for `bloodraven.bloodraven.svc` made with rcgen) when missing, and
    /// publishes the CA as `ca.crt` of the ConfigMap [`CA_CONFIGMAP`] and as `<out_dir>/`[`ESCROW_CA_FILE`].
    pub async fn ensure_escrow_tls(&self, namespace: &str, secret_name: &str) -> Result<()> {
        apply(
            &self.client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let ca_pem = match secrets
            .get_opt(secret_name)
            .await
            .map_err(|e| cluster_error("read the escrow TLS Secret", e))?
        {
            Some(secret) => secret
                .data
                .and_then(|data| {
                    data.get("ca.crt")
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                })
                .unwrap_or_default(),
            None => {
                let material = super::tls::escrow_certificate(namespace)?;
                let secret: Secret = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": secret_name, "namespace": namespace},
                    "stringData": {"tls.crt": material.cert_pem, "tls.key": material.key_pem, "ca.crt": material.ca_pem},
                }))
                .map_err(|e| cluster_error("build the escrow TLS Secret", e))?;
                match secrets.create(&PostParams::default(), &secret).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(e) => return Err(cluster_error("create the escrow TLS Secret", e)),
                }
                material.ca_pem
            }
        };
        apply(
            &self.client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        )
        .await?;
        apply(
            &self.client,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CA_CONFIGMAP, "namespace": NAMESPACE},
                "data": {"ca.crt": ca_pem}}),
        )
        .await?;
        std::fs::create_dir_all(&self.out_dir)
            .and_then(|()| std::fs::write(self.out_dir.join(ESCROW_CA_FILE), &ca_pem))
            .map_err(|e| {
                cluster_error(
                    format!("write {}/{ESCROW_CA_FILE}", self.out_dir.display()),
                    e,
                )
            })
    }

    /// Applies every document of a fixture file.
    pub async fn apply_file(&self, path: &Path) -> Result<()> {
        for object in read_manifests(path)? {
            apply(&self.client, &object).await?;
        }
        Ok(())
    }

    /// The group as JSON.
    pub async fn group(&self) -> Result<Value> {
        let api = group_api(&self.client);
        api.get(GROUP)
            .await
            .map(|group| serde_json::to_value(group).unwrap_or_default())
            .map_err(|e| cluster_error("read the group", e))
    }

    /// Waits until the group's authority is Valid (on the `active` site) and every site
    /// healthy, in a status the operator wrote after this wait began (a status left by an
    /// earlier run, e.g. a localkube restarted on its old store, says nothing about the pods
    /// running now).
    pub async fn wait_bootstrapped(&self, bound: Duration, active: ActiveSite) -> Result<Value> {
        let since = jiff::Timestamp::now();
        let api = group_api(&self.client);
        let mut last = String::from("no status yet");
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if let Ok(group) = api.get(GROUP).await {
                let value = serde_json::to_value(&group).unwrap_or_default();
                match bootstrapped(&value, since, active) {
                    Ok(()) => return Ok(value),
                    Err(reason) => last = reason,
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(cluster_error(
                    format!("wait {}s for group {GROUP} to bootstrap", bound.as_secs()),
                    last,
                ));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// The active site's pod name, from the group status.
    pub async fn active_pod(&self) -> Result<String> {
        let group = self.group().await?;
        let site = group["status"]["activeSite"]
            .as_str()
            .ok_or_else(|| cluster_error("find the active site", "the group has no activeSite"))?;
        Ok(names::pod(GROUP, site))
    }

    /// Runs SQL as MySQL's root in `pod`'s `mysql` container (`kubectl exec` through the API,
    /// so it works on every backend). Returns the client's standard output (tab separated).
    pub async fn sql_as_root(&self, pod: &str, sql: &str) -> Result<String> {
        self.sql_as_root_in(pod, sql, "-N -B").await
    }

    /// [`Self::sql_as_root`] with each result set's column names as its first line (tab
    /// separated), for answers read by column name (`SHOW ALL SLAVES STATUS`); the client's
    /// `-N` also drops the names from `\G`'s vertical form, so that is no way around it.
    pub async fn sql_as_root_named(&self, pod: &str, sql: &str) -> Result<String> {
        self.sql_as_root_in(pod, sql, "-B").await
    }

    /// The shared exec of [`Self::sql_as_root`], with the client's output `options`.
    async fn sql_as_root_in(&self, pod: &str, sql: &str, options: &str) -> Result<String> {
        let command = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("exec mariadb --protocol=tcp -h127.0.0.1 -uroot -p\"$MARIADB_ROOT_PASSWORD\" {options} -e \"$0\""),
            sql.to_owned(),
        ];
        let output = crate::live::exec::exec_collect(
            &self.client,
            crate::live::exec::ExecTarget {
                namespace: NAMESPACE,
                pod,
                container: "mysql",
            },
            command,
            None,
            SQL_EXEC_MAX,
        )
        .await?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        exec_outcome(pod, output.status, stdout, &output.stderr)
    }

    /// Creates the counter's password Secret (when missing), its app user with only its
    /// database's privileges (bloodraven-mysql's grant builder: nothing that bypasses
    /// read_only) on the primary, and applies the counter app; waits until it is available.
    pub async fn install_counter(&self) -> Result<()> {
        let password = self.counter_password().await?;
        let pod = self.active_pod().await?;
        let statements = [
            bloodraven_mysql::grants::create_app_user(COUNTER_USER, "%", &password),
            bloodraven_mysql::grants::app_user_grant(COUNTER_DATABASE, COUNTER_USER, "%"),
        ];
        let mut sql = String::new();
        for statement in statements {
            sql.push_str(&statement.map_err(|e| cluster_error("build the counter's grants", e))?);
            sql.push_str(";\n");
        }
        self.sql_as_root(&pod, &sql).await?;
        self.apply_file(&self.fixtures.playground("counter.yaml"))
            .await?;
        self.wait_deployment(NAMESPACE, "counter", DEPLOYMENT_WAIT_MAX)
            .await?;
        // The operator creates the schema (MysqlDatabase `counter-app`) on a poll after the
        // object is applied; the counter cannot create it. A scenario whose first fault stops
        // the operator (017) or the active site (016) right after the install otherwise ran
        // with a counter answering "Unknown database 'counter'" (conformance at 2be9af1 and
        // 578faff).
        let query = format!(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{COUNTER_DATABASE}'"
        );
        wait_for(
            DEPLOYMENT_WAIT_MAX,
            &format!("schema {COUNTER_DATABASE} created by the operator on {pod}"),
            || async {
                self.sql_as_root(&pod, &query)
                    .await
                    .ok()
                    .filter(|out| out.trim() == COUNTER_DATABASE)
            },
        )
        .await
        .map(|_| ())
    }

    async fn counter_password(&self) -> Result<String> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        if let Some(secret) = secrets
            .get_opt(COUNTER_SECRET)
            .await
            .map_err(|e| cluster_error("read the counter Secret", e))?
        {
            if let Some(bytes) = secret.data.and_then(|d| d.get("password").cloned()) {
                return Ok(String::from_utf8_lossy(&bytes.0).into_owned());
            }
        }
        let password = bloodraven_operator::workloads::random_password();
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": COUNTER_SECRET, "namespace": NAMESPACE},
            "stringData": {"password": password},
        }))
        .map_err(|e| cluster_error("build the counter Secret", e))?;
        secrets
            .patch(
                COUNTER_SECRET,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&secret),
            )
            .await
            .map_err(|e| cluster_error("create the counter Secret", e))?;
        Ok(password)
    }

    /// Waits until a Deployment has all its replicas available.
    pub async fn wait_deployment(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<()> {
        let api: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(self.client.clone(), namespace);
        wait_for(
            bound,
            &format!("Deployment {namespace}/{name} available"),
            || async {
                let deployment = api.get(name).await.ok()?;
                let want = deployment.spec.as_ref()?.replicas.unwrap_or(1);
                let status = deployment.status?;
                (status.available_replicas.unwrap_or(0) >= want
                    && status.updated_replicas.unwrap_or(0) >= want)
                    .then_some(())
            },
        )
        .await
    }

    /// Removes everything [`Installer::install`] and any scenario created: the playground
    /// and operator namespaces (pods, PVCs, the credentials Secret, events, deploy leases,
    /// tombstones), the ClusterRole/Binding (restoring any RBAC edit on the next install),
    /// demotion taints on every node, and waits until the namespaces are gone. CRDs stay.
    pub async fn uninstall(&self) -> Result<()> {
        // The fault agent first: every fault it started undone, and checked so, before it goes.
        let agent = crate::live::agent::AgentDriver::new(
            self.client.clone(),
            tokio::runtime::Handle::current(),
        );
        agent.cleanup_all().await?;
        let group_api = group_api(&self.client);
        // By metadata: one group that does not decode (scenario 054) must not keep the others
        // (a typed list fails as a whole, loudly, and left them to the namespace's deletion).
        if let Ok(groups) = group_api.list_metadata(&ListParams::default()).await {
            for group in groups {
                if let Some(name) = group.metadata.name.as_deref() {
                    let _ = group_api.delete(name, &DeleteParams::default()).await;
                }
            }
        }
        for namespace in UNINSTALLED_NAMESPACES {
            delete(
                &self.client,
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            )
            .await?;
        }
        for name in [
            names::OPERATOR_DEPLOYMENT,
            crate::live::agent::AGENT_DAEMONSET,
        ] {
            for kind in ["ClusterRoleBinding", "ClusterRole"] {
                delete(
                    &self.client,
                    &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}}),
                )
                .await?;
            }
        }
        self.remove_demotion_taints().await?;
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        wait_for(
            UNINSTALL_WAIT_MAX,
            "the playground namespaces to be deleted",
            || async {
                for namespace in UNINSTALLED_NAMESPACES {
                    if namespaces.get_opt(namespace).await.ok()?.is_some() {
                        return None;
                    }
                }
                Some(())
            },
        )
        .await
    }

    /// Removes the `bloodraven.shipstream.io/demoted` taint from every node.
    pub async fn remove_demotion_taints(&self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| cluster_error("list nodes", e))?;
        for node in list {
            let name = node.metadata.name.clone().unwrap_or_default();
            let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
            if !taints.iter().any(|t| t.key == names::TAINT_DEMOTED) {
                continue;
            }
            let kept: Vec<_> = taints
                .into_iter()
                .filter(|t| t.key != names::TAINT_DEMOTED)
                .collect();
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"taints": kept}})),
                )
                .await
                .map_err(|e| {
                    cluster_error(format!("remove the demotion taint of node {name}"), e)
                })?;
        }
        Ok(())
    }

    /// The CA the deploy API's certificate chains to (from the ConfigMap).
    pub async fn ca_pem(&self) -> Result<String> {
        let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), NAMESPACE);
        let map = maps
            .get(CA_CONFIGMAP)
            .await
            .map_err(|e| cluster_error("read the CA ConfigMap", e))?;
        Ok(map
            .data
            .and_then(|d| d.get("ca.crt").cloned())
            .unwrap_or_default())
    }
}

/// Which active site a bootstrapped group must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveSite {
    /// Any site (the playground of `just up`, which may have failed over since it was first
    /// installed).
    Any,
    /// The group's `spec.initialActiveSite`: where a scenario starts.
    Initial,
}

/// `Ok` when the group's authority is Valid on an active site (the initial one, with
/// [`ActiveSite::Initial`]) and every site is healthy; otherwise why not.
pub fn bootstrapped(
    group: &Value,
    since: jiff::Timestamp,
    active: ActiveSite,
) -> std::result::Result<(), String> {
    let status = &group["status"];
    let authority = status["authority"]["state"].as_str().unwrap_or("none");
    if authority != "Valid" {
        return Err(format!(
            "authority is {authority} ({})",
            status["authority"]["reason"]
                .as_str()
                .unwrap_or("no reason")
        ));
    }
    if active == ActiveSite::Initial {
        let initial = group["spec"]["initialActiveSite"]
            .as_str()
            .unwrap_or("none");
        match status["activeSite"].as_str() {
            Some(site) if site == initial => {}
            Some(site) => {
                return Err(format!(
                    "the active site is {site}, not the group's initialActiveSite {initial}"
                ))
            }
            None => return Err(format!("no active site yet (initialActiveSite {initial})")),
        }
    }
    let sites = status["sites"].as_array().cloned().unwrap_or_default();
    let spec_sites = group["spec"]["sites"].as_array().map_or(0, Vec::len);
    if sites.len() < spec_sites {
        return Err(format!("{} of {spec_sites} sites reported", sites.len()));
    }
    let stale: Vec<&str> = sites
        .iter()
        .filter(|site| {
            site["lastSeen"]
                .as_str()
                .and_then(|seen| seen.parse::<jiff::Timestamp>().ok())
                .is_none_or(|seen| seen < since)
        })
        .map(|site| site["name"].as_str().unwrap_or("?"))
        .collect();
    if !stale.is_empty() {
        return Err(format!(
            "sites not seen since {since}: {}",
            stale.join(", ")
        ));
    }
    let unhealthy: Vec<&str> = sites
        .iter()
        .filter(|site| site["healthy"] != true)
        .map(|site| site["name"].as_str().unwrap_or("?"))
        .collect();
    if unhealthy.is_empty() {
        Ok(())
    } else {
        Err(format!("sites not healthy: {}", unhealthy.join(", ")))
    }
}

/// Polls `probe` until it returns `Some`, at most `bound`.
pub async fn wait_for<T, F, Fut>(bound: Duration, what: &str, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(cluster_error(
                format!("wait for {what}"),
                format!("not true after {}s", bound.as_secs()),
            ));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The playground's operator values with a scenario's overrides: `replicaCount`, and the
/// deploy API with its escrow TLS switched off unless `install.deployApi` asks for it (a
/// scenario that never asked must not pass on, or be disturbed by, an API it did not declare).
pub fn operator_values(
    mut values: bloodraven_operator::install::InstallValues,
    overrides: &crate::scenario::model::Install,
) -> bloodraven_operator::install::InstallValues {
    if let Some(replicas) = overrides.replica_count {
        values.replica_count = replicas;
    }
    if let Some(image) = &overrides.operator_image {
        values.image.clone_from(image);
    }
    if !overrides.deploy_api {
        values.auxiliary.deploy_api.enabled = false;
        values.auxiliary.escrow_tls.enabled = false;
    }
    values
}

/// Bound on one SQL statement run through exec (the MariaDB client's own timeouts are longer
/// than any statement the harness sends should take).
const SQL_EXEC_MAX: Duration = Duration::from_secs(120);

/// The namespaces an uninstall deletes (and waits for).
const UNINSTALLED_NAMESPACES: [&str; 4] = [
    NAMESPACE,
    OPERATOR_NAMESPACE,
    DEPLOYERS_NAMESPACE,
    crate::live::agent::AGENT_NAMESPACE,
];

/// The in-cluster stand-in for external-dns (`fixtures/playground/dns-standin.yaml`).
pub const DNS_STANDIN_DEPLOYMENT: &str = "bloodraven-dns-standin";
/// The ConfigMap whose `paused` stops the stand-in applying DNSEndpoint changes.
pub const EXTERNAL_DNS_CONFIGMAP: &str = "bloodraven-external-dns";

/// The in-cluster workload's Deployment (`fixtures/playground/workload.yaml`).
pub const WORKLOAD_DEPLOYMENT: &str = "bloodraven-workload";

/// What an exec's final status says of its output: the output when the status is
/// `Success`; an error naming the pod and the reason otherwise, including when the exec
/// reported no status at all (a stream cut before the status frame: an empty answer must not
/// pass for `read_only = 0`, or for any other value a scenario reads).
pub fn exec_outcome(
    pod: &str,
    status: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
    stdout: String,
    stderr: &str,
) -> Result<String> {
    match status {
        Some(status) if status.status.as_deref() == Some("Success") => Ok(stdout),
        Some(status) => Err(cluster_error(
            format!("run SQL as root in {pod}"),
            format!("{} {}", status.message.unwrap_or_default(), stderr.trim()),
        )),
        None => Err(cluster_error(
            format!("run SQL as root in {pod}"),
            format!(
                "the exec reported no status (stdout {:?}, stderr {:?}): its outcome is unknown",
                stdout.trim(),
                stderr.trim()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    #[test]
    fn an_exec_without_a_status_is_an_error_not_an_empty_answer() {
        let status = |word: &str, message: &str| Status {
            status: Some(word.to_owned()),
            message: Some(message.to_owned()),
            ..Status::default()
        };
        assert_eq!(
            super::exec_outcome("p", Some(status("Success", "")), "1\n".into(), "").ok(),
            Some("1\n".to_owned())
        );
        let failed = super::exec_outcome(
            "p",
            Some(status("Failure", "command terminated with exit code 1")),
            String::new(),
            "ERROR 2002",
        )
        .expect_err("a failed exec");
        assert!(failed.to_string().contains("exit code 1"), "{failed}");
        let unknown = super::exec_outcome("p", None, String::new(), "").expect_err("no status");
        assert!(unknown.to_string().contains("no status"), "{unknown}");
    }

    use super::*;

    #[test]
    fn bootstrapped_needs_valid_authority_and_every_site_healthy() {
        let since: jiff::Timestamp = "2026-12-01T11:00:00Z".parse().expect("since");
        let seen = "2026-12-01T11:00:02Z";
        let mut group = json!({"spec": {"sites": [{}, {}, {}]}, "status": {
            "authority": {"state": "Valid"},
            "sites": [{"name": "iad", "healthy": true, "lastSeen": seen},
                      {"name": "pdx", "healthy": true, "lastSeen": seen},
                      {"name": "reader", "healthy": false, "lastSeen": seen}]}});
        assert_eq!(
            bootstrapped(&group, since, ActiveSite::Any),
            Err("sites not healthy: reader".to_owned())
        );
        group["status"]["sites"][2]["healthy"] = json!(true);
        assert_eq!(bootstrapped(&group, since, ActiveSite::Any), Ok(()));
        group["status"]["authority"] = json!({"state": "Invalid", "reason": "NoPrimary"});
        assert!(bootstrapped(&group, since, ActiveSite::Any)
            .unwrap_err()
            .contains("NoPrimary"));
        group["status"]["authority"] = json!({"state": "Valid"});
        group["status"]["sites"].as_array_mut().map(Vec::pop);
        assert!(bootstrapped(&group, since, ActiveSite::Any)
            .unwrap_err()
            .contains("2 of 3"));
    }

    // A scenario starts where its first step used to wait for: authority Valid on the
    // group's initialActiveSite (docs/scenarios.md "Where the steps start").
    #[test]
    fn a_scenario_install_waits_for_the_initial_active_site() {
        let since: jiff::Timestamp = "2026-12-01T11:00:00Z".parse().expect("since");
        let seen = "2026-12-01T11:00:02Z";
        let mut group = json!({"spec": {"initialActiveSite": "iad", "sites": [{}, {}]}, "status": {
            "authority": {"state": "Valid"},
            "sites": [{"name": "iad", "healthy": true, "lastSeen": seen},
                      {"name": "pdx", "healthy": true, "lastSeen": seen}]}});
        assert_eq!(
            bootstrapped(&group, since, ActiveSite::Initial),
            Err("no active site yet (initialActiveSite iad)".to_owned())
        );
        group["status"]["activeSite"] = json!("pdx");
        assert_eq!(
            bootstrapped(&group, since, ActiveSite::Initial),
            Err("the active site is pdx, not the group's initialActiveSite iad".to_owned())
        );
        // The playground (`just up` again after a failover) takes any active site.
        assert_eq!(bootstrapped(&group, since, ActiveSite::Any), Ok(()));
        group["status"]["activeSite"] = json!("iad");
        assert_eq!(bootstrapped(&group, since, ActiveSite::Initial), Ok(()));
        // Valid comes first: an invalid authority on the right site is no bootstrap.
        group["status"]["authority"] = json!({"state": "Invalid", "reason": "NotIssued"});
        assert!(bootstrapped(&group, since, ActiveSite::Initial)
            .unwrap_err()
            .contains("NotIssued"));
    }

    #[test]
    fn a_status_written_before_the_wait_is_not_a_bootstrap() {
        // A localkube restarted on its old store: the last status says Valid and healthy,
        // but the operator has not polled the pods running now.
        let since: jiff::Timestamp = "2026-12-01T11:33:35Z".parse().expect("since");
        let mut group = json!({"spec": {"sites": [{}, {}]}, "status": {
            "authority": {"state": "Valid"},
            "sites": [{"name": "iad", "healthy": true, "lastSeen": "2026-12-01T11:33:36Z"},
                      {"name": "pdx", "healthy": true, "lastSeen": "2026-12-01T09:31:00Z"}]}});
        assert!(bootstrapped(&group, since, ActiveSite::Any)
            .unwrap_err()
            .contains("not seen since 2026-12-01T11:33:35Z: pdx"));
        group["status"]["sites"][1]
            .as_object_mut()
            .map(|site| site.remove("lastSeen"));
        assert!(bootstrapped(&group, since, ActiveSite::Any)
            .unwrap_err()
            .contains(": pdx"));
        group["status"]["sites"][1]["lastSeen"] = json!("2026-12-01T11:33:37Z");
        assert_eq!(bootstrapped(&group, since, ActiveSite::Any), Ok(()));
    }

    #[test]
    fn a_scenario_fixture_path_is_relative_to_the_repository_root() {
        // It was joined under fixtures/ a second time: fixtures/fixtures/scenarios/... (s037).
        let fixtures = Fixtures::new(crate::backend::workspace_root());
        let path = fixtures.path("fixtures/scenarios/counter-reconnect.yaml");
        assert!(path.is_file(), "{}", path.display());
        assert!(!read_manifests(&path).expect("parse").is_empty());
    }

    #[test]
    fn the_playground_fixtures_parse() {
        let fixtures = Fixtures::new(crate::backend::workspace_root());
        for file in ["group.yaml", "database.yaml", "counter.yaml"] {
            let docs = read_manifests(&fixtures.playground(file)).expect("parse");
            assert!(!docs.is_empty(), "{file}");
        }
        let values = bloodraven_operator::install::values_from_file(
            &fixtures.playground("operator-values.yaml"),
        )
        .expect("values");
        assert!(values.auxiliary.deploy_api.enabled && values.auxiliary.escrow_tls.enabled);
        // A scenario gets the deploy API only when it asks (`install: {deployApi: true}`).
        let plain = operator_values(values.clone(), &crate::scenario::model::Install::default());
        assert!(!plain.auxiliary.deploy_api.enabled && !plain.auxiliary.escrow_tls.enabled);
        let asked = operator_values(
            values.clone(),
            &crate::scenario::model::Install {
                deploy_api: true,
                replica_count: Some(2),
                ..crate::scenario::model::Install::default()
            },
        );
        assert!(asked.auxiliary.deploy_api.enabled && asked.auxiliary.escrow_tls.enabled);
        assert_eq!(asked.replica_count, 2);
        assert_eq!(
            asked.image, values.image,
            "this build's image unless one is asked for"
        );
        let upgrade = operator_values(
            values.clone(),
            &crate::scenario::model::Install {
                operator_image: Some("bloodraven:upgrade-a".to_owned()),
                ..crate::scenario::model::Install::default()
            },
        );
        assert_eq!(upgrade.image, "bloodraven:upgrade-a");
        let group = &read_manifests(&fixtures.playground("group.yaml")).expect("group")[1];
        let spec: bloodraven_api::MysqlFailoverGroupSpec =
            serde_json::from_value(group["spec"].clone()).expect("group spec");
        assert_eq!(spec.sites.len(), 3);
        assert_eq!(spec.failure_threshold, 3);
        assert_eq!(spec.dns.as_ref().map(|d| d.ttl), Some(10));
    }
}
