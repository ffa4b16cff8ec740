//! A localkube cluster for the playground: the image catalog that maps this workspace's
//! images to its built binaries (written before `localkube up` reads it), and starting and
//! stopping the `localkube` binary in the background.
//!
//! Topology (issue 8, seed 000): nodes `iad`, `pdx` and `reader` labelled
//! `topology.kubernetes.io/zone=<site>` carry the sites; a fourth node, [`APPS_NODE`], has no
//! zone and runs the operator and the counter, so stopping or tainting a site's node never
//! takes them down.

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
pub const IMAGES: [(&str, &str); 4] = [
    ("bloodraven:*", "bloodraven"),
    ("bloodraven/sidecar:*", "bloodraven-sidecar"),
    ("bloodraven/counter:*", "bloodraven-counter"),
    ("bloodraven/kubectl-bloodraven:*", "kubectl-bloodraven"),
];

/// Where a cluster lives and what it runs.
#[derive(Debug, Clone)]
pub struct LocalkubeConfig {
    /// The state dir (kubeconfig, logs, fault log, pod data).
    pub state_dir: PathBuf,
    /// The directory holding the workspace's binaries (`localkube`, `bloodraven`, ...).
    pub bin_dir: PathBuf,
}

/// The image catalog (YAML) mapping [`IMAGES`] to binaries in `bin_dir`.
pub fn catalog_yaml(bin_dir: &Path) -> String {
    let mut text = String::from(
        "# Written by bloodraven-harness: this workspace's images run its binaries.\nimages:\n",
    );
    for (image, binary) in IMAGES {
        let path = bin_dir.join(binary);
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
        .filter(|binary| !self.bin_dir.join(binary).is_file())
        .map(str::to_owned)
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
        std::fs::write(&catalog, catalog_yaml(&self.bin_dir))
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
        let text = catalog_yaml(Path::new("/opt/bin"));
        let value: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let images = value["images"].as_sequence().expect("images");
        assert_eq!(images.len(), IMAGES.len());
        assert_eq!(images[1]["image"], "bloodraven/sidecar:*");
        assert_eq!(images[1]["entrypoint"][0], "/opt/bin/bloodraven-sidecar");
    }

    #[test]
    fn missing_binaries_are_named() {
        let config = LocalkubeConfig {
            state_dir: PathBuf::from("/nonexistent/state"),
            bin_dir: PathBuf::from("/nonexistent/bin"),
        };
        let error = config
            .check_binaries()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("localkube, localkube-pod-exec"), "{error}");
        assert!(error.contains("cargo build --release"), "{error}");
    }
}
