//! A localkube cluster for the playground: the image catalog that maps this workspace's
//! images to its built binaries (written before `localkube up` reads it), and starting and
//! stopping the `localkube` binary in the background.
//!
//! Topology (docs/design/history.md#issue-8, docs/design/requirements.md R000.20): nodes `iad`,
//! `pdx` and `reader` labelled `topology.kubernetes.io/zone=<site>` carry the sites; a fourth
//! node, [`APPS_NODE`], has no zone and runs the operator and the counter, so stopping or
//! tainting a site's node never takes them down.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The sites' nodes.
pub const SITE_NODES: [&str; 3] = ["iad", "pdx", "reader"];
/// The node without a zone for the operator and the counter.
pub const APPS_NODE: &str = "apps";
/// The catalog file name localkube reads from its state dir.
pub const CATALOG_FILE: &str = "images.yaml";

/// The workspace's images and the binaries they run (`<image pattern>`, `<binary>`): the
/// names the Dockerfiles of the kind backend build, so nothing in `operator/` knows the
/// backend.
pub const IMAGES: [(&str, &str); 7] = [
    ("bloodraven:*", "bloodraven"),
    ("bloodraven/sidecar:*", "bloodraven-sidecar"),
    ("bloodraven/counter:*", "bloodraven-counter"),
    ("bloodraven/workload:*", "bloodraven-workload"),
    ("bloodraven/dns-standin:*", "bloodraven-dns-standin"),
    ("bloodraven/chaos-agent:*", "bloodraven-chaos-agent"),
    ("bloodraven/kubectl-bloodraven:*", "kubectl-bloodraven"),
];

/// Where a cluster lives and what it runs.
#[derive(Debug, Clone)]
pub struct LocalkubeConfig {
    /// The state dir (kubeconfig, logs, fault log, pod data).
    pub state_dir: PathBuf,
    /// The directory holding the workspace's binaries (`localkube`, `bloodraven`, ...).
    pub bin_dir: PathBuf,
    /// Images mapped to other binaries, matched before [`IMAGES`] (`just upgrade`: the
    /// operator builds A and B, see [`operator_builds`]).
    pub image_overrides: Vec<(String, PathBuf)>,
}

/// The operator image an upgrade starts from (scenario 050 installs it).
pub const UPGRADE_FROM_IMAGE: &str = "bloodraven:upgrade-a";
/// The operator image an upgrade rolls to (scenario 050's `upgrade-operator` fault).
pub const UPGRADE_TO_IMAGE: &str = "bloodraven:upgrade-b";

/// The catalog overrides of an upgrade from the operator binary `from` (build A) to `to`
/// (build B; `None`: this workspace's own `bloodraven`): [`UPGRADE_FROM_IMAGE`] runs A, and
/// [`UPGRADE_TO_IMAGE`] and every other `bloodraven:*` tag run B, so scenarios installed
/// after the upgrade run B too. Without overrides both images run this workspace's build.
pub fn operator_builds(from: Option<&Path>, to: Option<&Path>) -> Vec<(String, PathBuf)> {
    let mut overrides = Vec::new();
    if let Some(from) = from {
        overrides.push((UPGRADE_FROM_IMAGE.to_owned(), from.to_path_buf()));
    }
    if let Some(to) = to {
        overrides.push(("bloodraven:*".to_owned(), to.to_path_buf()));
    }
    overrides
}

/// The image catalog (YAML) mapping `overrides` (first) and [`IMAGES`] to binaries in
/// `bin_dir`; localkube takes the first entry that matches.
pub fn catalog_yaml(bin_dir: &Path, overrides: &[(String, PathBuf)]) -> String {
    let mut text = String::from(
        "# Written by bloodraven-harness: this workspace's images run its binaries.\nimages:\n",
    );
    let entries = overrides
        .iter()
        .map(|(image, path)| (image.as_str(), path.clone()))
        .chain(
            IMAGES
                .iter()
                .map(|(image, binary)| (*image, bin_dir.join(binary))),
        );
    for (image, path) in entries {
        text.push_str(&format!(
            "  - image: {}\n    entrypoint: [{}]\n",
            serde_json::Value::String(image.to_owned()),
            serde_json::Value::String(path.display().to_string())
        ));
    }
    text
}

fn tool_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

impl LocalkubeConfig {
    /// The `localkube` binary.
    pub fn localkube(&self) -> PathBuf {
        self.bin_dir.join("localkube")
    }

    /// The admin kubeconfig localkube writes.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state_dir.join("kubeconfig")
    }

    /// Checks that every binary the playground runs was built.
    pub fn check_binaries(&self) -> Result<()> {
        let missing: Vec<String> = [
            "localkube",
            "localkube-pod-exec",
            "localkube-mariadb-entrypoint",
        ]
        .into_iter()
        .chain(IMAGES.iter().map(|(_, binary)| *binary))
        .map(|binary| self.bin_dir.join(binary))
        .chain(self.image_overrides.iter().map(|(_, path)| path.clone()))
        .filter(|path| !path.is_file())
        .map(|path| {
            if path.parent() == Some(self.bin_dir.as_path()) {
                path.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            } else {
                path.display().to_string()
            }
        })
        .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(tool_error(
                format!(
                    "find the workspace's binaries in {}",
                    self.bin_dir.display()
                ),
                format!(
                    "missing {} (build them with `cargo build --release --workspace --bins`)",
                    missing.join(", ")
                ),
            ))
        }
    }

    /// Whether localkube already serves this state dir.
    pub fn running(&self) -> bool {
        Command::new(self.localkube())
            .arg("status")
            .arg("--state-dir")
            .arg(&self.state_dir)
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).starts_with("running"))
    }

    /// Writes the catalog and starts localkube in the background (unless it already runs
    /// for this state dir). Returns whether it was started now.
    pub fn up(&self) -> Result<bool> {
        self.check_binaries()?;
        std::fs::create_dir_all(&self.state_dir)
            .map_err(|e| tool_error(format!("create {}", self.state_dir.display()), e))?;
        let catalog = self.state_dir.join(CATALOG_FILE);
        std::fs::write(&catalog, catalog_yaml(&self.bin_dir, &self.image_overrides))
            .map_err(|e| tool_error(format!("write {}", catalog.display()), e))?;
        if self.running() {
            return Ok(false);
        }
        let output = Command::new(self.localkube())
            .args(["up", "--detach", "--state-dir"])
            .arg(&self.state_dir)
            .arg("--nodes")
            .arg(SITE_NODES.join(","))
            .arg("--zoneless-nodes")
            .arg(APPS_NODE)
            // Only the site pods' mysqld get libfaketime, so `clock-offset` can step their
            // wall clock; every other container runs as without the flag.
            .args(["--clock-faults", "mysql"])
            .output()
            .map_err(|e| tool_error(format!("run {}", self.localkube().display()), e))?;
        if !output.status.success() {
            return Err(tool_error(
                "start localkube",
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stderr).trim(),
                    String::from_utf8_lossy(&output.stdout).trim()
                ),
            ));
        }
        Ok(true)
    }

    /// Stops localkube and removes every namespace, link, mount and process it made
    /// (`purge` also removes its stored objects).
    pub fn down(&self, purge: bool) -> Result<()> {
        let mut command = Command::new(self.localkube());
        command.arg("down").arg("--state-dir").arg(&self.state_dir);
        if purge {
            command.arg("--purge");
        }
        let output = command
            .output()
            .map_err(|e| tool_error(format!("run {}", self.localkube().display()), e))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(tool_error(
                "stop localkube",
                String::from_utf8_lossy(&output.stderr).trim(),
            ))
        }
    }

    /// Runs `localkube fault <args...>` against this cluster; returns its standard output.
    pub fn fault(&self, args: &[&str]) -> Result<String> {
        let output = Command::new(self.localkube())
            .arg("fault")
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(args)
            .output()
            .map_err(|e| tool_error(format!("run {}", self.localkube().display()), e))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(tool_error(
                format!("localkube fault {}", args.join(" ")),
                String::from_utf8_lossy(&output.stderr).trim(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_maps_every_workspace_image_to_its_binary() {
        let text = catalog_yaml(Path::new("/opt/bin"), &[]);
        let value: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let images = value["images"].as_sequence().expect("images");
        assert_eq!(images.len(), IMAGES.len());
        assert_eq!(images[1]["image"], "bloodraven/sidecar:*");
        assert_eq!(images[1]["entrypoint"][0], "/opt/bin/bloodraven-sidecar");
    }

    #[test]
    fn an_upgrade_maps_image_a_to_build_a_and_every_other_operator_tag_to_build_b() {
        let overrides = operator_builds(
            Some(Path::new("/cache/a/bloodraven")),
            Some(Path::new("/cache/b/bloodraven")),
        );
        let text = catalog_yaml(Path::new("/opt/bin"), &overrides);
        let catalog: localkube_runtime::ImageCatalog =
            serde_yaml::from_str(&text).expect("catalog");
        let entrypoint = |image: &str| {
            catalog
                .resolve(image)
                .map(|entry| entry.entrypoint[0].clone())
                .unwrap_or_default()
        };
        assert_eq!(entrypoint(UPGRADE_FROM_IMAGE), "/cache/a/bloodraven");
        assert_eq!(entrypoint(UPGRADE_TO_IMAGE), "/cache/b/bloodraven");
        assert_eq!(entrypoint("bloodraven:0.1.0"), "/cache/b/bloodraven");
        assert_eq!(
            entrypoint("bloodraven/sidecar:0.1.0"),
            "/opt/bin/bloodraven-sidecar"
        );
        // B = this workspace: only A is overridden.
        let text = catalog_yaml(
            Path::new("/opt/bin"),
            &operator_builds(Some(Path::new("/cache/a/bloodraven")), None),
        );
        let catalog: localkube_runtime::ImageCatalog =
            serde_yaml::from_str(&text).expect("catalog");
        assert_eq!(
            catalog
                .resolve(UPGRADE_TO_IMAGE)
                .map(|entry| entry.entrypoint[0].as_str()),
            Some("/opt/bin/bloodraven")
        );
        assert_eq!(
            catalog
                .resolve(UPGRADE_FROM_IMAGE)
                .map(|entry| entry.entrypoint[0].as_str()),
            Some("/cache/a/bloodraven")
        );
    }

    #[test]
    fn missing_binaries_are_named() {
        let config = LocalkubeConfig {
            state_dir: PathBuf::from("/nonexistent/state"),
            bin_dir: PathBuf::from("/nonexistent/bin"),
            image_overrides: operator_builds(Some(Path::new("/nonexistent/a/bloodraven")), None),
        };
        let error = config
            .check_binaries()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("localkube, localkube-pod-exec"), "{error}");
        assert!(error.contains("/nonexistent/a/bloodraven"), "{error}");
        assert!(error.contains("cargo build --release"), "{error}");
    }
}
