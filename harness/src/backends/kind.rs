//! The kind backend's cluster lifecycle: a kind cluster from `kind/cluster.yaml` (a
//! control-plane, one worker per site labelled `topology.kubernetes.io/zone=<site>`, one
//! worker without a zone for the operator and the counter), this workspace's images built
//! from `operator/deploy/Dockerfile` and `kind load`ed, and `mariadb:10.11` pulled and loaded.
//!
//! Gather -> decide -> act: the `*_command` functions are pure and build each command line
//! ([`CommandLine`]); [`KindBackend`] only runs them in order through `std::process`, and
//! every failing command is an [`Error::Cluster`] naming the command line and its stderr.
//! Installing the playground on the cluster is shared by every backend and is not here.
//!
//! Order of [`KindBackend::create_cluster`]: build the images and pull MariaDB first (no
//! cluster is needed for that, so a broken build leaves nothing behind), then create the
//! cluster, then load every image into it; a failed load deletes the cluster again.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The cluster name (`kind create cluster --name`), also the prefix of its node containers.
pub const CLUSTER_NAME_DEFAULT: &str = "bloodraven";
/// The kind cluster config, relative to the workspace root.
pub const CLUSTER_CONFIG: &str = "kind/cluster.yaml";
/// The Dockerfile of every image, relative to the workspace root.
pub const DOCKERFILE: &str = "operator/deploy/Dockerfile";
/// The database image the playground group runs (`spec.image`).
pub const MARIADB_IMAGE: &str = "mariadb:10.11";
/// The node label that places a site.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The sites' zones, in the order of the workers in `kind/cluster.yaml`.
pub const SITE_ZONES: [&str; 3] = ["iad", "pdx", "reader"];
/// How long `kind create cluster --wait` waits for the control plane.
pub const CLUSTER_READY_WAIT: Duration = Duration::from_secs(120);
/// The bound on the Docker daemon probe of [`docker_daemon_answers`].
pub const DOCKER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the probe checks whether `docker` exited.
const DOCKER_PROBE_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// The most of a failing command's stderr (its end) kept in the error.
const STDERR_TAIL_BYTES_MAX: usize = 4000;

/// One of this workspace's images: a target of [`DOCKERFILE`] running one binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    /// The Dockerfile target (`--target`).
    pub target: &'static str,
    /// The image repository; the tag is the workspace version.
    pub repository: &'static str,
    /// The cargo package the target builds (`cargo build -p`).
    pub package: &'static str,
    /// The binary, the image's entrypoint.
    pub binary: &'static str,
}

impl Image {
    /// `<repository>:<version>`.
    pub fn reference(&self, version: &str) -> String {
        format!("{}:{version}", self.repository)
    }
}

/// The workspace's images, in build order. The operator renders `bloodraven:<version>` and
/// `bloodraven/sidecar:<version>`; the playground's counter runs `bloodraven/counter:<version>`;
/// the harness's in-cluster workload, external-dns stand-in and fault agent run
/// `bloodraven/workload:<version>`, `bloodraven/dns-standin:<version>` and
/// `bloodraven/chaos-agent:<version>`.
pub const IMAGES: [Image; 7] = [
    Image {
        target: "operator",
        repository: "bloodraven",
        package: "bloodraven-operator",
        binary: "bloodraven",
    },
    Image {
        target: "sidecar",
        repository: "bloodraven/sidecar",
        package: "bloodraven-sidecar",
        binary: "bloodraven-sidecar",
    },
    Image {
        target: "counter",
        repository: "bloodraven/counter",
        package: "bloodraven-counter",
        binary: "bloodraven-counter",
    },
    Image {
        target: "plugin",
        repository: "bloodraven/kubectl-bloodraven",
        package: "kubectl-bloodraven",
        binary: "kubectl-bloodraven",
    },
    Image {
        target: "workload",
        repository: "bloodraven/workload",
        package: "bloodraven-harness",
        binary: "bloodraven-workload",
    },
    Image {
        target: "dns-standin",
        repository: "bloodraven/dns-standin",
        package: "bloodraven-harness",
        binary: "bloodraven-dns-standin",
    },
    Image {
        target: "chaos-agent",
        repository: "bloodraven/chaos-agent",
        package: "bloodraven-chaos-agent",
        binary: "bloodraven-chaos-agent",
    },
];

/// One command line: a program, its arguments, and the directory it runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program (a name looked up on `PATH`, or a path).
    pub program: OsString,
    /// The arguments.
    pub args: Vec<OsString>,
    /// The working directory (`None`: the harness's own).
    pub dir: Option<PathBuf>,
}

impl CommandLine {
    fn new(program: impl AsRef<OsStr>, dir: Option<&Path>) -> Self {
        CommandLine {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            dir: dir.map(Path::to_path_buf),
        }
    }

    fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// The program and its arguments as strings (lossy), program first.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|part| part.to_string_lossy().into_owned())
            .collect()
    }

    /// A `std::process::Command` for this line (stdio left to the caller).
    pub fn to_command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command
    }
}

/// Shell-like: arguments with spaces or shell characters are single-quoted.
impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = self.argv();
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            let plain = !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                f.write_str(part)?;
            } else {
                write!(f, "'{}'", part.replace('\'', r"'\''"))?;
            }
        }
        Ok(())
    }
}

/// What the kind backend needs: where the workspace is, the cluster's name and kubeconfig,
/// the image tag, and the `kind` and `docker` programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindConfig {
    /// The workspace root: the Docker build context and where [`CLUSTER_CONFIG`] is found;
    /// every command runs here.
    pub workspace_root: PathBuf,
    /// The cluster name.
    pub name: String,
    /// The kubeconfig kind writes (relative paths are relative to `workspace_root`).
    pub kubeconfig: PathBuf,
    /// The image tag: the workspace version.
    pub version: String,
    /// The `kind` program.
    pub kind: PathBuf,
    /// The `docker` program.
    pub docker: PathBuf,
    /// `kind create cluster --wait`.
    pub ready_wait: Duration,
}

impl KindConfig {
    /// The defaults: cluster [`CLUSTER_NAME_DEFAULT`], kubeconfig `<state_dir>/kubeconfig`,
    /// this crate's version (the workspace version), `kind` and `docker` from `PATH`.
    pub fn new(workspace_root: impl Into<PathBuf>, state_dir: &Path) -> Self {
        KindConfig {
            workspace_root: workspace_root.into(),
            name: CLUSTER_NAME_DEFAULT.to_owned(),
            kubeconfig: state_dir.join("kubeconfig"),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            kind: PathBuf::from("kind"),
            docker: PathBuf::from("docker"),
            ready_wait: CLUSTER_READY_WAIT,
        }
    }

    /// The kubeconfig path as kind sees it (joined onto the workspace root when relative).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.workspace_root.join(&self.kubeconfig)
    }

    /// Every image the cluster needs: the workspace's [`IMAGES`], the operator's upgrade tags
    /// ([`UPGRADE_TAGS`]) and [`MARIADB_IMAGE`].
    pub fn image_references(&self) -> Vec<String> {
        IMAGES
            .iter()
            .map(|image| image.reference(&self.version))
            .chain(UPGRADE_TAGS.iter().map(|tag| (*tag).to_owned()))
            .chain(std::iter::once(MARIADB_IMAGE.to_owned()))
            .collect()
    }

    fn kind_line(&self) -> CommandLine {
        CommandLine::new(&self.kind, Some(&self.workspace_root))
    }

    fn docker_line(&self) -> CommandLine {
        CommandLine::new(&self.docker, Some(&self.workspace_root))
    }
}

/// The worker node containers of a cluster named `name`, in `kind/cluster.yaml` order, with
/// each one's zone (`None`: the node for the operator and the counter). kind names workers
/// `<name>-worker`, `<name>-worker2`, ...
pub fn worker_nodes(name: &str) -> Vec<(String, Option<&'static str>)> {
    SITE_ZONES
        .iter()
        .map(|zone| Some(*zone))
        .chain(std::iter::once(None))
        .enumerate()
        .map(|(index, zone)| {
            let suffix = if index == 0 {
                String::new()
            } else {
                (index + 1).to_string()
            };
            (format!("{name}-worker{suffix}"), zone)
        })
        .collect()
}

/// `docker version --format '{{.Server.Version}}'`: exits 0 only when a daemon answers (a CLI
/// without a daemon prints its client half and exits 1).
pub fn docker_probe_command(docker: &Path) -> CommandLine {
    CommandLine::new(docker, None)
        .arg("version")
        .arg("--format")
        .arg("{{.Server.Version}}")
}

/// `kind create cluster --name <name> --config kind/cluster.yaml --kubeconfig <path> --wait 120s`.
pub fn create_cluster_command(config: &KindConfig) -> CommandLine {
    config
        .kind_line()
        .arg("create")
        .arg("cluster")
        .arg("--name")
        .arg(&config.name)
        .arg("--config")
        .arg(CLUSTER_CONFIG)
        .arg("--kubeconfig")
        .arg(&config.kubeconfig)
        .arg("--wait")
        .arg(format!("{}s", config.ready_wait.as_secs()))
}

/// `docker build -f operator/deploy/Dockerfile --target <target> -t <image> .`
pub fn docker_build_command(config: &KindConfig, image: &Image) -> CommandLine {
    config
        .docker_line()
        .arg("build")
        .arg("-f")
        .arg(DOCKERFILE)
        .arg("--target")
        .arg(image.target)
        .arg("-t")
        .arg(image.reference(&config.version))
        .arg(".")
}

/// `docker pull <image>`.
pub fn docker_pull_command(config: &KindConfig, reference: &str) -> CommandLine {
    config.docker_line().arg("pull").arg(reference)
}

/// `kind load docker-image <image> --name <name>`.
pub fn kind_load_command(config: &KindConfig, reference: &str) -> CommandLine {
    config
        .kind_line()
        .arg("load")
        .arg("docker-image")
        .arg(reference)
        .arg("--name")
        .arg(&config.name)
}

/// `kind delete cluster --name <name>`.
pub fn delete_cluster_command(config: &KindConfig) -> CommandLine {
    config
        .kind_line()
        .arg("delete")
        .arg("cluster")
        .arg("--name")
        .arg(&config.name)
}

/// The operator image's other tags: scenario 050 installs `bloodraven:upgrade-a` and rolls
/// to `bloodraven:upgrade-b`; on kind both are this build (an A -> B of two builds is `just
/// upgrade`, localkube only).
pub const UPGRADE_TAGS: [&str; 2] = [
    crate::playground::localkube::UPGRADE_FROM_IMAGE,
    crate::playground::localkube::UPGRADE_TO_IMAGE,
];

/// `docker tag <source> <target>`.
pub fn docker_tag_command(config: &KindConfig, source: &str, target: &str) -> CommandLine {
    config.docker_line().arg("tag").arg(source).arg(target)
}

/// Before the cluster: build each of [`IMAGES`], tag the operator's [`UPGRADE_TAGS`], pull
/// [`MARIADB_IMAGE`].
pub fn prepare_images_commands(config: &KindConfig) -> Vec<CommandLine> {
    let operator = IMAGES[0].reference(&config.version);
    IMAGES
        .iter()
        .map(|image| docker_build_command(config, image))
        .chain(
            UPGRADE_TAGS
                .iter()
                .map(|tag| docker_tag_command(config, &operator, tag)),
        )
        .chain(std::iter::once(docker_pull_command(config, MARIADB_IMAGE)))
        .collect()
}

/// After the cluster: load every image of [`KindConfig::image_references`] into it.
pub fn load_images_commands(config: &KindConfig) -> Vec<CommandLine> {
    config
        .image_references()
        .iter()
        .map(|reference| kind_load_command(config, reference))
        .collect()
}

/// Whether a Docker daemon answers `docker` from `PATH` within [`DOCKER_PROBE_TIMEOUT`]:
/// the input of `backends::select::default_cluster_kind`. A `docker` CLI with no daemon is `false`.
pub fn docker_daemon_answers() -> bool {
    docker_daemon_answers_with(Path::new("docker"), DOCKER_PROBE_TIMEOUT)
}

/// Whether [`docker_probe_command`] of `docker` exits 0 within `timeout`; a program that
/// cannot start, fails, or is still running at the deadline (then killed) is `false`.
pub fn docker_daemon_answers_with(docker: &Path, timeout: Duration) -> bool {
    let mut child = match docker_probe_command(docker)
        .to_command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            tracing::debug!(docker = %docker.display(), %error, "docker probe did not start");
            return false;
        }
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                tracing::debug!(docker = %docker.display(), %status, "docker probe exited");
                return status.success();
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(DOCKER_PROBE_POLL_INTERVAL),
            Ok(None) | Err(_) => {
                tracing::debug!(docker = %docker.display(), timeout_ms = timeout.as_millis() as u64, "docker probe timed out");
                // The child may have exited in between: both errors are harmless then.
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// Creates and deletes the kind cluster of a [`KindConfig`], running the `*_command` lines.
#[derive(Debug, Clone)]
pub struct KindBackend {
    config: KindConfig,
}

impl KindBackend {
    /// A backend for `config`.
    pub fn new(config: KindConfig) -> Self {
        KindBackend { config }
    }

    /// Its config.
    pub fn config(&self) -> &KindConfig {
        &self.config
    }

    /// Builds the images and pulls MariaDB, creates the cluster, loads every image, and
    /// returns the kubeconfig kind wrote. A failed load deletes the cluster again (the error
    /// is the load's; a failed delete is added to its reason).
    pub fn create_cluster(&self) -> Result<PathBuf> {
        let kubeconfig = self.config.kubeconfig_path();
        if let Some(parent) = kubeconfig.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        for line in prepare_images_commands(&self.config) {
            run(&line)?;
        }
        run(&create_cluster_command(&self.config))?;
        for line in load_images_commands(&self.config) {
            if let Err(error) = run(&line) {
                return Err(match (error, self.delete_cluster()) {
                    (error, Ok(())) => error,
                    (Error::Cluster { action, reason }, Err(teardown)) => Error::Cluster {
                        action,
                        reason: format!("{reason} (and then failed to {teardown})"),
                    },
                    (error, Err(_)) => error,
                });
            }
        }
        Ok(kubeconfig)
    }

    /// Deletes the cluster (kind succeeds when it does not exist).
    pub fn delete_cluster(&self) -> Result<()> {
        run(&delete_cluster_command(&self.config)).map(drop)
    }
}

/// `docker stop <container>` / `docker start <container>`: a kind node is a container, so
/// stopping it stops its kubelet and every pod on it, and cuts it from the others.
pub fn docker_node_command(config: &KindConfig, verb: &str, container: &str) -> CommandLine {
    config.docker_line().arg(verb).arg(container)
}

/// `docker inspect --format {{.State.Running}} <container>`: `true` or `false`.
pub fn docker_running_command(config: &KindConfig, container: &str) -> CommandLine {
    config
        .docker_line()
        .arg("inspect")
        .arg("--format")
        .arg("{{.State.Running}}")
        .arg(container)
}

/// The node container of `site` (its zone) in a cluster named `name`.
pub fn site_node_container(name: &str, site: &str) -> Option<String> {
    worker_nodes(name)
        .into_iter()
        .find(|(_, zone)| *zone == Some(site))
        .map(|(container, _)| container)
}

/// Stops and starts a site's kind node (`stop-node`, `start-node`): the one fault kind does
/// outside the cluster's API, because a node's power is not the cluster's to give. Each is
/// checked to have taken effect (the container is, or is no longer, running).
#[derive(Debug, Clone)]
pub struct KindNodes {
    config: KindConfig,
}

impl KindNodes {
    /// The nodes of the cluster of `config`.
    pub fn new(config: KindConfig) -> Self {
        Self { config }
    }

    fn container(&self, site: &str) -> Result<String> {
        site_node_container(&self.config.name, site).ok_or_else(|| Error::Cluster {
            action: format!("find the kind node of site {site}"),
            reason: format!(
                "no worker of kind/cluster.yaml has zone {site} (zones: {})",
                SITE_ZONES.join(", ")
            ),
        })
    }

    /// `docker <verb>` the site's node, then checks it is (not) running.
    fn power(&self, site: &str, verb: &str, running: bool) -> Result<()> {
        let container = self.container(site)?;
        run(&docker_node_command(&self.config, verb, &container))?;
        let seen = run(&docker_running_command(&self.config, &container))?;
        if seen.trim() == running.to_string() {
            Ok(())
        } else {
            Err(Error::Cluster {
                action: format!("docker {verb} node {container} of site {site}"),
                reason: format!(
                    "the fault did not take effect: docker says running = {}",
                    seen.trim()
                ),
            })
        }
    }

    /// Stops the node of `site`.
    pub fn stop(&self, site: &str) -> Result<()> {
        self.power(site, "stop", false)
    }

    /// Starts the node of `site` again.
    pub fn start(&self, site: &str) -> Result<()> {
        self.power(site, "start", true)
    }
}

/// Runs `line` to completion with stdin closed; its stdout on success.
fn run(line: &CommandLine) -> Result<String> {
    tracing::info!(command = %line, "kind backend");
    let action = || format!("run `{line}`");
    let output = line
        .to_command()
        .stdin(Stdio::null())
        .output()
        .map_err(|error| Error::Cluster {
            action: action(),
            reason: format!("start {}: {error}", Path::new(&line.program).display()),
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let said = if stderr.trim().is_empty() {
        stdout.trim()
    } else {
        stderr.trim()
    };
    Err(Error::Cluster {
        action: action(),
        reason: if said.is_empty() {
            format!("{}", output.status)
        } else {
            format!("{}: {}", output.status, tail(said, STDERR_TAIL_BYTES_MAX))
        },
    })
}

/// The last `bytes_max` bytes of `text` (on a character boundary), marked when cut.
fn tail(text: &str, bytes_max: usize) -> String {
    if text.len() <= bytes_max {
        return text.to_owned();
    }
    let mut start = text.len() - bytes_max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::ErrorKind;
    use std::os::unix::fs::PermissionsExt;

    use serde_yaml::Value;

    use super::*;

    fn workspace_root() -> PathBuf {
        crate::backend::workspace_root()
    }

    fn read_workspace_file(path: &str) -> String {
        let path = workspace_root().join(path);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    fn config() -> KindConfig {
        KindConfig::new("/ws", Path::new("/ws/.kind"))
    }

    fn strings(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|part| (*part).to_owned()).collect()
    }

    /// The zone label of a node of `kind/cluster.yaml` (`None` without one).
    fn zone(node: &Value) -> Option<String> {
        node.get("labels")
            .and_then(|labels| labels.get(ZONE_LABEL))
            .map(|zone| zone.as_str().expect("zone is a string").to_owned())
    }

    #[test]
    fn cluster_yaml_has_a_control_plane_a_worker_per_site_and_one_without_a_zone() {
        let text = read_workspace_file(CLUSTER_CONFIG);
        let cluster: Value = serde_yaml::from_str(&text).expect("kind/cluster.yaml parses");
        assert_eq!(cluster["kind"], "Cluster");
        assert_eq!(cluster["apiVersion"], "kind.x-k8s.io/v1alpha4");
        let nodes = cluster["nodes"].as_sequence().expect("nodes is a list");
        let role = |node: &Value| node["role"].as_str().expect("role").to_owned();
        let control_planes: Vec<_> = nodes
            .iter()
            .filter(|n| role(n) == "control-plane")
            .collect();
        let workers: Vec<_> = nodes.iter().filter(|n| role(n) == "worker").collect();
        assert_eq!(control_planes.len(), 1, "one control-plane");
        assert_eq!(workers.len(), 4, "three site workers and the apps worker");
        assert_eq!(nodes.len(), 5, "no other roles");
        assert_eq!(
            zone(control_planes[0]),
            None,
            "no site lands on the control-plane"
        );

        let zones: Vec<Option<String>> = workers.iter().map(|w| zone(w)).collect();
        assert_eq!(
            zones.iter().filter(|z| z.is_none()).count(),
            1,
            "exactly one worker without a zone (operator and counter: zone DoesNotExist)"
        );
        let site_zones: BTreeSet<&str> = zones.iter().flatten().map(String::as_str).collect();
        assert_eq!(site_zones, SITE_ZONES.into_iter().collect::<BTreeSet<_>>());
        assert_eq!(zones.iter().flatten().count(), 3, "one worker per site");

        // worker_nodes() names kind's containers in this file's order.
        let named: Vec<Option<String>> = worker_nodes("bloodraven")
            .into_iter()
            .map(|(_, zone)| zone.map(str::to_owned))
            .collect();
        assert_eq!(named, zones);
    }

    #[test]
    fn worker_nodes_follow_kinds_naming() {
        assert_eq!(
            worker_nodes("br"),
            vec![
                ("br-worker".to_owned(), Some("iad")),
                ("br-worker2".to_owned(), Some("pdx")),
                ("br-worker3".to_owned(), Some("reader")),
                ("br-worker4".to_owned(), None),
            ]
        );
    }

    #[test]
    fn command_lines() {
        let config = config();
        let line = create_cluster_command(&config);
        assert_eq!(
            line.argv(),
            strings(&[
                "kind",
                "create",
                "cluster",
                "--name",
                "bloodraven",
                "--config",
                "kind/cluster.yaml",
                "--kubeconfig",
                "/ws/.kind/kubeconfig",
                "--wait",
                "120s",
            ])
        );
        assert_eq!(line.dir.as_deref(), Some(Path::new("/ws")));
        assert_eq!(
            docker_build_command(&config, &IMAGES[1]).argv(),
            strings(&[
                "docker",
                "build",
                "-f",
                "operator/deploy/Dockerfile",
                "--target",
                "sidecar",
                "-t",
                "bloodraven/sidecar:0.1.0",
                ".",
            ])
        );
        assert_eq!(
            docker_pull_command(&config, MARIADB_IMAGE).argv(),
            strings(&["docker", "pull", "mariadb:10.11"])
        );
        assert_eq!(
            kind_load_command(&config, "bloodraven:0.1.0").argv(),
            strings(&[
                "kind",
                "load",
                "docker-image",
                "bloodraven:0.1.0",
                "--name",
                "bloodraven"
            ])
        );
        assert_eq!(
            delete_cluster_command(&config).argv(),
            strings(&["kind", "delete", "cluster", "--name", "bloodraven"])
        );
        let probe = docker_probe_command(Path::new("docker"));
        assert_eq!(
            probe.argv(),
            strings(&["docker", "version", "--format", "{{.Server.Version}}"])
        );
        assert_eq!(probe.dir, None);
        assert_eq!(
            probe.to_string(),
            "docker version --format '{{.Server.Version}}'"
        );
        // Every line that needs the workspace runs in its root (`.`, `kind/cluster.yaml`).
        for line in prepare_images_commands(&config)
            .iter()
            .chain(&load_images_commands(&config))
            .chain([
                &create_cluster_command(&config),
                &delete_cluster_command(&config),
            ])
        {
            assert_eq!(line.dir.as_deref(), Some(Path::new("/ws")), "{line}");
            let command = line.to_command();
            assert_eq!(command.get_current_dir(), Some(Path::new("/ws")));
            assert_eq!(command.get_program(), line.program.as_os_str());
            assert!(
                command
                    .get_args()
                    .eq(line.args.iter().map(OsString::as_os_str)),
                "{line}"
            );
        }
    }

    #[test]
    fn images_are_tagged_with_the_workspace_version_and_mariadb_is_loaded_too() {
        let config = config();
        assert_eq!(config.version, "0.1.0");
        assert_eq!(
            config.image_references(),
            strings(&[
                "bloodraven:0.1.0",
                "bloodraven/sidecar:0.1.0",
                "bloodraven/counter:0.1.0",
                "bloodraven/kubectl-bloodraven:0.1.0",
                "bloodraven/workload:0.1.0",
                "bloodraven/dns-standin:0.1.0",
                "bloodraven/chaos-agent:0.1.0",
                "bloodraven:upgrade-a",
                "bloodraven:upgrade-b",
                "mariadb:10.11",
            ])
        );
        let prepare: Vec<String> = prepare_images_commands(&config)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            prepare,
            strings(&[
                "docker build -f operator/deploy/Dockerfile --target operator -t bloodraven:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target sidecar -t bloodraven/sidecar:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target counter -t bloodraven/counter:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target plugin -t bloodraven/kubectl-bloodraven:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target workload -t bloodraven/workload:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target dns-standin -t bloodraven/dns-standin:0.1.0 .",
                "docker build -f operator/deploy/Dockerfile --target chaos-agent -t bloodraven/chaos-agent:0.1.0 .",
                "docker tag bloodraven:0.1.0 bloodraven:upgrade-a",
                "docker tag bloodraven:0.1.0 bloodraven:upgrade-b",
                "docker pull mariadb:10.11",
            ])
        );
        let loads: Vec<String> = load_images_commands(&config)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            loads,
            config
                .image_references()
                .iter()
                .map(|image| format!("kind load docker-image {image} --name bloodraven"))
                .collect::<Vec<_>>()
        );
    }

    /// The sidecar image carries every MariaDB tool its jobs run (backup, restore, re-seed,
    /// archive); without them each job fails on kind and any real cluster, while localkube's
    /// pods, which are host processes, find the host's.
    #[test]
    fn the_sidecar_image_installs_the_tools_its_jobs_run() {
        let dockerfile = read_workspace_file(DOCKERFILE);
        let stage = dockerfile
            .split("\nFROM ")
            .find(|stage| stage.starts_with("runtime AS sidecar"))
            .expect("a sidecar stage");
        let installs = |package: &str| {
            stage.lines().any(|line| {
                line.contains("apt-get install") && line.split_whitespace().any(|w| w == package)
            })
        };
        // mariadb-client: mariadb, mariadb-dump, mariadb-binlog; mariadb-backup: itself.
        for package in ["mariadb-client", "mariadb-backup"] {
            assert!(
                installs(package),
                "the sidecar stage installs {package}:\n{stage}"
            );
        }
        for tool in ["mariadb-dump", "mariadb-binlog", "mariadb-backup"] {
            let source = read_workspace_file(match tool {
                "mariadb-binlog" => "operator/sidecar/src/archive.rs",
                _ => "operator/sidecar/src/backup.rs",
            });
            assert!(
                source.contains(&format!("\"{tool}\"")),
                "the sidecar runs {tool}"
            );
        }
    }

    #[test]
    fn the_version_is_the_workspace_version() {
        let manifest = read_workspace_file("Cargo.toml");
        let package = manifest
            .split("[workspace.package]")
            .nth(1)
            .expect("[workspace.package]");
        let version = package
            .lines()
            .find_map(|line| line.trim().strip_prefix("version = "))
            .expect("workspace version");
        assert_eq!(version.trim_matches('"'), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn relative_kubeconfig_is_under_the_workspace_root() {
        let mut config = config();
        config.kubeconfig = PathBuf::from(".kind/kubeconfig");
        assert_eq!(config.kubeconfig_path(), Path::new("/ws/.kind/kubeconfig"));
        config.kubeconfig = PathBuf::from("/state/kubeconfig");
        assert_eq!(config.kubeconfig_path(), Path::new("/state/kubeconfig"));
    }

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let line = CommandLine::new("docker", None)
            .arg("a b")
            .arg("it's")
            .arg("")
            .arg("plain-1.0:x");
        assert_eq!(line.to_string(), r"docker 'a b' 'it'\''s' '' plain-1.0:x");
    }

    /// The Dockerfile has a target per image that builds the image's package with
    /// `cargo build --release --locked` on rust:1.89-bookworm and runs its binary as a
    /// non-root user on debian:bookworm-slim; the packages and binaries exist.
    #[test]
    fn dockerfile_builds_every_image() {
        let dockerfile = read_workspace_file(DOCKERFILE);
        let instructions: Vec<&str> = dockerfile
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        assert!(dockerfile.contains("ARG RUST_IMAGE=rust:1.89-bookworm"));
        assert!(dockerfile.contains("ARG RUNTIME_IMAGE=debian:bookworm-slim"));
        assert!(instructions.contains(&"FROM ${RUST_IMAGE} AS builder"));
        assert!(instructions.contains(&"FROM ${RUNTIME_IMAGE} AS runtime"));
        assert!(instructions.contains(&"USER 65532:65532"));
        assert!(dockerfile.contains("cargo build --release --locked"));

        let members = workspace_members();
        for image in IMAGES {
            let from = format!("FROM runtime AS {}", image.target);
            let stage: Vec<&str> = instructions
                .iter()
                .skip_while(|line| **line != from)
                .take_while(|line| **line == from || !line.starts_with("FROM "))
                .copied()
                .collect();
            assert!(
                !stage.is_empty(),
                "{DOCKERFILE} has no target {}",
                image.target
            );
            let path = format!("/usr/local/bin/{}", image.binary);
            assert!(
                stage.contains(
                    &format!("COPY --from=builder /out/{} {path}", image.binary).as_str()
                ),
                "target {} copies {}",
                image.target,
                image.binary
            );
            assert!(
                stage.contains(&format!("ENTRYPOINT [\"{path}\"]").as_str()),
                "target {} runs {}",
                image.target,
                image.binary
            );
            assert!(
                dockerfile.contains(&format!("-p {} ", image.package))
                    || dockerfile.contains(&format!("-p {}\n", image.package)),
                "the builder builds {}",
                image.package
            );
            assert!(
                dockerfile.contains(&format!("target/release/{} ", image.binary))
                    || dockerfile.contains(&format!("target/release/{}\n", image.binary)),
                "the builder copies out {}",
                image.binary
            );
            let manifest = members
                .iter()
                .find(|(_, text)| text.contains(&format!("name = \"{}\"", image.package)))
                .unwrap_or_else(|| panic!("no workspace member is package {}", image.package));
            assert!(
                manifest
                    .1
                    .contains(&format!("[[bin]]\nname = \"{}\"", image.binary)),
                "{} declares binary {}",
                manifest.0,
                image.binary
            );
        }
    }

    /// (member dir, Cargo.toml text) of every workspace member.
    fn workspace_members() -> Vec<(String, String)> {
        let manifest = read_workspace_file("Cargo.toml");
        let list = manifest
            .split("members = [")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .expect("workspace members");
        list.split(',')
            .map(|member| member.trim().trim_matches('"'))
            .filter(|member| !member.is_empty())
            .map(|member| {
                (
                    member.to_owned(),
                    read_workspace_file(&format!("{member}/Cargo.toml")),
                )
            })
            .collect()
    }

    #[test]
    fn dockerignore_leaves_out_build_output_state_and_reports() {
        let ignore = read_workspace_file(".dockerignore");
        let patterns: BTreeSet<&str> = ignore
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        for pattern in ["target/", ".localkube/", "reports/"] {
            assert!(patterns.contains(pattern), ".dockerignore lacks {pattern}");
        }
        // The build needs the sources, the lockfile and every member's manifest.
        for needed in [
            "Cargo.toml",
            "Cargo.lock",
            "operator/",
            "counter/",
            "harness/",
        ] {
            assert!(
                !patterns
                    .iter()
                    .any(|p| needed.starts_with(p.trim_end_matches('/'))),
                ".dockerignore must keep {needed}"
            );
        }
    }

    /// Writes an executable `/bin/sh` script that answers `probe-ready` with exit 0 before
    /// `body`, then runs it until it starts: a file just written can be "text file busy"
    /// while another test thread's fork still holds the write descriptor.
    fn fake_program(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\n[ \"$1\" = probe-ready ] && exit 0\n{body}\n"),
        )
        .expect("write fake program");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("chmod fake program");
        for _ in 0..100 {
            match Command::new(&path).arg("probe-ready").status() {
                Ok(status) => {
                    assert!(status.success(), "{name} probe-ready: {status}");
                    return path;
                }
                Err(error) if error.kind() == ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(error) => panic!("run {}: {error}", path.display()),
            }
        }
        panic!("{} stayed busy", path.display());
    }

    #[test]
    fn a_docker_cli_without_a_daemon_does_not_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        // What the CLI does without a daemon: print the client half, fail to reach the server.
        let no_daemon = fake_program(
            dir.path(),
            "docker-no-daemon",
            "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1",
        );
        assert!(!docker_daemon_answers_with(
            &no_daemon,
            DOCKER_PROBE_TIMEOUT
        ));
        let missing = dir.path().join("no-such-docker");
        assert!(!docker_daemon_answers_with(&missing, DOCKER_PROBE_TIMEOUT));
    }

    #[test]
    fn a_docker_daemon_that_answers_counts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args_file = dir.path().join("args");
        let daemon = fake_program(
            dir.path(),
            "docker",
            &format!("echo \"$@\" > '{}'\necho 28.2.2", args_file.display()),
        );
        assert!(docker_daemon_answers_with(&daemon, DOCKER_PROBE_TIMEOUT));
        let args = std::fs::read_to_string(&args_file).expect("the probe ran");
        assert_eq!(args.trim(), "version --format {{.Server.Version}}");
    }

    #[test]
    fn a_docker_that_hangs_is_killed_at_the_timeout_and_does_not_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hanging = fake_program(dir.path(), "docker-hangs", "exec sleep 30");
        let started = Instant::now();
        assert!(!docker_daemon_answers_with(
            &hanging,
            Duration::from_millis(300)
        ));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "bounded: {:?}",
            started.elapsed()
        );
    }

    /// A config whose `kind` and `docker` are fakes that log their arguments to `log`;
    /// `fail_on` makes the fake exit 1 with a message when its arguments contain it.
    #[test]
    fn a_sites_node_is_stopped_and_started_with_docker_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log");
        let state = dir.path().join("running");
        std::fs::write(&state, "true").expect("state");
        // A docker that remembers whether the container runs.
        let docker = fake_program(
            dir.path(),
            "docker",
            &format!(
                "echo \"docker $*\" >> '{log}'\ncase \"$1\" in stop) echo false > '{state}';; start) echo true > '{state}';; inspect) cat '{state}';; esac",
                log = log.display(),
                state = state.display()
            ),
        );
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).expect("mkdir workspace");
        let mut config = KindConfig::new(&workspace, &dir.path().join("state"));
        config.docker = docker;
        let nodes = KindNodes::new(config);
        nodes.stop("pdx").expect("stop");
        nodes.start("pdx").expect("start");
        assert_eq!(
            logged(&log),
            [
                "docker stop bloodraven-worker2",
                "docker inspect --format {{.State.Running}} bloodraven-worker2",
                "docker start bloodraven-worker2",
                "docker inspect --format {{.State.Running}} bloodraven-worker2",
            ]
        );
        let unknown = nodes.stop("atlantis").expect_err("no such zone");
        assert!(
            unknown
                .to_string()
                .contains("no worker of kind/cluster.yaml has zone atlantis"),
            "{unknown}"
        );
        // A stop docker accepted but that left the container running did not take effect.
        std::fs::write(&state, "true").expect("state");
        let stuck = KindNodes::new({
            let mut config = KindConfig::new(&workspace, &dir.path().join("state"));
            config.docker = fake_program(
                dir.path(),
                "docker-stuck",
                &format!("case \"$1\" in inspect) cat '{}';; esac", state.display()),
            );
            config
        });
        let error = stuck.stop("iad").expect_err("still running");
        assert!(error.to_string().contains("did not take effect"), "{error}");
    }

    fn fake_tools(dir: &Path, fail_on: Option<&str>) -> (KindConfig, PathBuf) {
        let log = dir.join("log");
        let fail = fail_on
            .map(|needle| {
                format!("case \"$*\" in *'{needle}'*) echo \"fake: refused $*\" >&2; exit 1;; esac")
            })
            .unwrap_or_default();
        let body = |tool: &str| format!("echo \"{tool} $*\" >> '{}'\n{fail}", log.display());
        let kind = fake_program(dir, "kind", &body("kind"));
        let docker = fake_program(dir, "docker", &body("docker"));
        let workspace = dir.join("workspace");
        std::fs::create_dir(&workspace).expect("mkdir workspace");
        let mut config = KindConfig::new(&workspace, &dir.join("state"));
        config.kind = kind;
        config.docker = docker;
        (config, log)
    }

    fn logged(log: &Path) -> Vec<String> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// (tool, args) of `lines` as the fakes log them.
    fn expected_log(lines: &[CommandLine]) -> Vec<String> {
        lines
            .iter()
            .map(|line| {
                let program = Path::new(&line.program)
                    .file_name()
                    .expect("program name")
                    .to_string_lossy()
                    .into_owned();
                std::iter::once(program)
                    .chain(line.argv().into_iter().skip(1))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn create_builds_and_pulls_then_creates_then_loads_and_returns_the_kubeconfig() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, log) = fake_tools(dir.path(), None);
        let backend = KindBackend::new(config.clone());
        let kubeconfig = backend.create_cluster().expect("create");
        assert_eq!(kubeconfig, dir.path().join("state/kubeconfig"));
        assert!(
            dir.path().join("state").is_dir(),
            "the kubeconfig's dir exists"
        );
        let mut expected = prepare_images_commands(&config);
        expected.push(create_cluster_command(&config));
        expected.extend(load_images_commands(&config));
        assert_eq!(logged(&log), expected_log(&expected));
        assert_eq!(logged(&log).len(), 7 + 2 + 1 + 1 + 10);

        backend.delete_cluster().expect("delete");
        assert_eq!(
            logged(&log).last().map(String::as_str),
            Some("kind delete cluster --name bloodraven")
        );
    }

    #[test]
    fn a_failed_build_names_the_command_and_its_stderr_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, log) = fake_tools(dir.path(), Some("--target counter"));
        let error = KindBackend::new(config.clone())
            .create_cluster()
            .expect_err("the counter build fails");
        let Error::Cluster { action, reason } = &error else {
            panic!("not a cluster error: {error}");
        };
        assert!(
            action.contains("build -f operator/deploy/Dockerfile --target counter -t bloodraven/counter:0.1.0 ."),
            "{action}"
        );
        assert!(action.starts_with("run `"), "{action}");
        assert!(reason.contains("exit status: 1"), "{reason}");
        assert!(reason.contains("fake: refused build"), "{reason}");
        assert!(
            logged(&log).iter().all(|line| !line.starts_with("kind ")),
            "no cluster was created: {:?}",
            logged(&log)
        );
    }

    #[test]
    fn a_failed_load_deletes_the_cluster_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, log) = fake_tools(dir.path(), Some("docker-image mariadb"));
        let error = KindBackend::new(config)
            .create_cluster()
            .expect_err("loading mariadb fails");
        assert!(
            error
                .to_string()
                .contains("load docker-image mariadb:10.11"),
            "{error}"
        );
        assert!(error.to_string().contains("fake: refused"), "{error}");
        assert_eq!(
            logged(&log).last().map(String::as_str),
            Some("kind delete cluster --name bloodraven")
        );
    }

    #[test]
    fn a_missing_kind_says_it_could_not_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut config, _) = fake_tools(dir.path(), None);
        config.kind = dir.path().join("no-such-kind");
        let error = KindBackend::new(config)
            .delete_cluster()
            .expect_err("kind is missing");
        let text = error.to_string();
        assert!(text.starts_with("run `"), "{text}");
        assert!(text.contains("delete cluster --name bloodraven"), "{text}");
        assert!(text.contains("start "), "{text}");
    }

    #[test]
    fn tail_keeps_the_end_on_a_character_boundary() {
        assert_eq!(tail("short", 10), "short");
        assert_eq!(tail("abcdef", 3), "...def");
        assert_eq!(tail("aé", 1), "...");
        assert_eq!(tail("aéb", 2), "...b");
    }
}
