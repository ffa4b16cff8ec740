//! The image catalog: which program an image reference runs.
//!
//! A YAML file (the harness writes it) lists entries in order; the first whose `image`
//! pattern (`*` and `?` wildcards, e.g. `mariadb:*`, `bloodraven/*`) matches the image
//! reference wins. References are normalised first: `docker.io/` and `library/` are
//! dropped, and a reference without a tag gets `:latest`.
//!
//! ```yaml
//! images:
//!   - image: "pause*"
//!     entrypoint: ["sleep", "infinity"]
//!   - image: "mariadb:*"
//!     entrypoint: ["/path/to/localkube-mariadb-entrypoint"]
//!     cmd: ["mariadbd"]
//!     privateDirs: ["/var/lib/mysql", "/run/mysqld", "/tmp"]
//!     pathPrograms: [["docker-entrypoint.sh", "/path/to/localkube-mariadb-entrypoint"]]
//! ```
//!
//! `entrypoint`/`cmd` are the image's ENTRYPOINT/CMD and combine with a container's
//! `command`/`args` exactly as on Kubernetes. `privateDirs` are directories the image has
//! of its own: each container gets a fresh empty directory bound there (its "writable
//! layer"), so two MariaDB pods never share the host's `/var/lib/mysql` or socket.
//! `pathPrograms` are programs the image has on its PATH under its own names (the official
//! `mariadb` image's `docker-entrypoint.sh`, which a container `command` may name as on
//! Kubernetes).
//!
//! Host programs reach a container only through [`IMAGE_PROGRAMS_MOUNT`]: the PATH programs
//! under their own names and an absolute `entrypoint` program under its file name, each bound
//! (the file itself, not a symlink to it) onto a placeholder in a directory bound there
//! ([`CatalogEntry::program_mounts`]), and an argv naming the entrypoint's host path is
//! rewritten to that path ([`CatalogEntry::in_container_argv`]). The host path of a build may
//! lie under a directory the container sees another way: a checkout under `/tmp` is hidden by
//! the `mariadb:*` image's private `/tmp`, and a volume may be mounted over any path. Nothing
//! the container resolves after its mounts names a host path.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::exec::{BindMount, DEFAULT_PATH};

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogEntry {
    /// The image pattern.
    pub image: String,
    /// The image's ENTRYPOINT.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// The image's CMD.
    #[serde(default)]
    pub cmd: Vec<String>,
    /// Environment the image sets (container `env` overrides it).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Directories private to each container.
    #[serde(default)]
    pub private_dirs: Vec<PathBuf>,
    /// Programs on the image's PATH: (name, host program).
    #[serde(default)]
    pub path_programs: Vec<(String, PathBuf)>,
}

/// Where a container sees its image's host programs: a fixed path no image or volume uses,
/// because a host path may lie under a directory the container sees another way (a clone in
/// `/tmp` under the `mariadb:*` image's private `/tmp`).
pub const IMAGE_PROGRAMS_MOUNT: &str = "/opt/localkube/image-programs";

impl CatalogEntry {
    /// The environment the image sets; with host programs ([`CatalogEntry::programs`]),
    /// [`IMAGE_PROGRAMS_MOUNT`] leads the image's PATH.
    pub fn image_env(&self) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        if self.programs().is_empty() {
            return env;
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or_else(|| DEFAULT_PATH.to_string(), |(_, v)| v.clone());
        env.retain(|(k, _)| k != "PATH");
        env.push(("PATH".into(), format!("{IMAGE_PROGRAMS_MOUNT}:{path}")));
        env
    }

    /// The host programs the container sees under [`IMAGE_PROGRAMS_MOUNT`]: (name, host
    /// path) for each PATH program, then the entrypoint's program under its file name when it
    /// is an absolute host path and no PATH program already has that name.
    pub fn programs(&self) -> Vec<(String, PathBuf)> {
        let mut programs = self.path_programs.clone();
        if let Some((name, path)) = self.entrypoint_program() {
            if !programs.iter().any(|(existing, _)| *existing == name) {
                programs.push((name, path));
            }
        }
        programs
    }

    /// The entrypoint's program when it is an absolute host path: (file name, host path).
    fn entrypoint_program(&self) -> Option<(String, PathBuf)> {
        let program = Path::new(self.entrypoint.first()?);
        if !program.is_absolute() {
            return None;
        }
        let name = program.file_name()?.to_string_lossy().into_owned();
        Some((name, program.to_path_buf()))
    }

    /// `argv` as the container runs it: an `argv[0]` naming the entrypoint's host program
    /// becomes its path under [`IMAGE_PROGRAMS_MOUNT`].
    pub fn in_container_argv(&self, mut argv: Vec<String>) -> Vec<String> {
        let Some((name, host)) = self.entrypoint_program() else {
            return argv;
        };
        let bound_there = self
            .programs()
            .iter()
            .any(|(program, path)| *program == name && *path == host);
        if let Some(first) = argv.first_mut() {
            if bound_there && Path::new(first.as_str()) == host {
                *first = format!("{IMAGE_PROGRAMS_MOUNT}/{name}");
            }
        }
        argv
    }

    /// The bind mounts that put [`CatalogEntry::programs`] at [`IMAGE_PROGRAMS_MOUNT`]: a
    /// directory under `programs_root` (one per image pattern) holding an empty placeholder
    /// per program, bound there, then each host program bound onto its placeholder. The
    /// container resolves no host path: the helper opens every source before it mounts
    /// anything. Empty for an image without host programs.
    pub fn program_mounts(&self, programs_root: &Path) -> Result<Vec<BindMount>> {
        let programs = self.programs();
        if programs.is_empty() {
            return Ok(Vec::new());
        }
        let label: String = self
            .image
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = programs_root.join(label);
        std::fs::create_dir_all(&dir).map_err(Error::io("create image programs dir", &dir))?;
        let mut mounts = vec![BindMount {
            source: dir.clone(),
            target: IMAGE_PROGRAMS_MOUNT.into(),
            read_only: true,
        }];
        for (name, host) in programs {
            let placeholder = dir.join(&name);
            // An older localkube left a symlink here: a placeholder is a plain empty file.
            let is_file = std::fs::symlink_metadata(&placeholder).is_ok_and(|m| m.is_file());
            if !is_file {
                let _ = std::fs::remove_file(&placeholder);
                std::fs::File::create(&placeholder)
                    .map_err(Error::io("create image program placeholder", &placeholder))?;
            }
            mounts.push(BindMount {
                source: host,
                target: Path::new(IMAGE_PROGRAMS_MOUNT).join(&name),
                read_only: true,
            });
        }
        Ok(mounts)
    }
}

/// The catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ImageCatalog {
    /// Entries, first match wins.
    pub images: Vec<CatalogEntry>,
}

impl ImageCatalog {
    /// Reads a catalog file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(Error::io("read image catalog", path))?;
        serde_yaml::from_str(&text).map_err(|source| Error::Catalog {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The built-in images: `pause` (sleeps forever), `busybox` (the host's shell and
    /// coreutils) and `mariadb:*` (the host's MariaDB through `localkube-mariadb-entrypoint`
    /// found in `bin_dir`).
    pub fn builtin(bin_dir: &Path) -> Self {
        let entry = |image: &str,
                     entrypoint: Vec<String>,
                     cmd: Vec<String>,
                     private_dirs: Vec<PathBuf>| CatalogEntry {
            image: image.to_string(),
            entrypoint,
            cmd,
            env: Vec::new(),
            private_dirs,
            path_programs: Vec::new(),
        };
        let mariadb_entrypoint = bin_dir.join("localkube-mariadb-entrypoint");
        let mut mariadb = entry(
            "mariadb:*",
            vec![mariadb_entrypoint.to_string_lossy().into_owned()],
            vec!["mariadbd".into()],
            vec!["/var/lib/mysql".into(), "/run/mysqld".into(), "/tmp".into()],
        );
        mariadb.path_programs = vec![("docker-entrypoint.sh".into(), mariadb_entrypoint)];
        Self {
            images: vec![
                entry(
                    "*pause:*",
                    vec!["sleep".into(), "infinity".into()],
                    vec![],
                    vec![],
                ),
                entry("busybox:*", vec![], vec!["sh".into()], vec![]),
                mariadb,
            ],
        }
    }

    /// Appends the entries of `other` (they match after this catalog's own).
    pub fn extend(&mut self, other: ImageCatalog) {
        self.images.extend(other.images);
    }

    /// The entry for `image`, or `None` (the container fails with ErrImagePull).
    pub fn resolve(&self, image: &str) -> Option<&CatalogEntry> {
        let normalized = normalize(image);
        self.images.iter().find(|entry| {
            glob::Pattern::new(&entry.image)
                .is_ok_and(|p| p.matches(&normalized) || p.matches(image))
        })
    }
}

/// `docker.io/library/mariadb` -> `mariadb:latest`; digests are kept.
pub fn normalize(image: &str) -> String {
    let mut name = image.strip_prefix("docker.io/").unwrap_or(image);
    name = name.strip_prefix("library/").unwrap_or(name);
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    if last_segment.contains(':') || last_segment.contains('@') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// The argv of a container, as Kubernetes combines `command`/`args` with the image's
/// ENTRYPOINT/CMD: command given -> command + args; only args -> entrypoint + args;
/// neither -> entrypoint + cmd.
pub fn container_argv(entry: &CatalogEntry, command: &[String], args: &[String]) -> Vec<String> {
    if !command.is_empty() {
        command.iter().chain(args).cloned().collect()
    } else if !args.is_empty() {
        entry.entrypoint.iter().chain(args).cloned().collect()
    } else {
        entry.entrypoint.iter().chain(&entry.cmd).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/localkube.md#node-agent: images map to programs through an image catalog with
    // wildcards.
    #[test]
    fn wildcards_and_normalisation() {
        let catalog = ImageCatalog::builtin(Path::new("/bin-dir"));
        assert!(catalog.resolve("mariadb:10.11").is_some());
        assert!(catalog.resolve("docker.io/library/mariadb:11.4").is_some());
        assert!(catalog.resolve("registry.k8s.io/pause:3.9").is_some());
        assert!(catalog.resolve("busybox").is_some(), "no tag means :latest");
        assert!(catalog.resolve("nginx:1.27").is_none());
        let yaml = "images:\n  - image: \"bloodraven/*\"\n    entrypoint: [\"/opt/br\"]\n";
        let extra: ImageCatalog = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(
            extra.resolve("bloodraven/sidecar:dev").unwrap().entrypoint,
            vec!["/opt/br"]
        );
    }

    // The official mariadb image has docker-entrypoint.sh on its PATH; a container command
    // (Bloodraven's restore gate) names it. The programs are bound files, never symlinks into
    // the host's build directory (a checkout under /tmp is hidden by the image's private /tmp).
    #[test]
    fn host_programs_are_bound_at_a_fixed_path_that_leads_the_images_path() {
        let temp = tempfile::tempdir().expect("tempdir");
        let root = temp.path().join("image-programs");
        let catalog = ImageCatalog::builtin(Path::new("/tmp/clone/target/release"));
        let mariadb = catalog.resolve("mariadb:10.11").expect("mariadb");
        let env = mariadb.image_env();
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .expect("PATH");
        assert_eq!(path, format!("{IMAGE_PROGRAMS_MOUNT}:{DEFAULT_PATH}"));
        let host = PathBuf::from("/tmp/clone/target/release/localkube-mariadb-entrypoint");
        let mounts = mariadb.program_mounts(&root).expect("mounts");
        let dir = &mounts[0].source;
        assert!(dir.starts_with(&root), "{}", dir.display());
        assert_eq!(mounts[0].target, Path::new(IMAGE_PROGRAMS_MOUNT));
        let targets: Vec<(&Path, &Path)> = mounts[1..]
            .iter()
            .map(|m| (m.source.as_path(), m.target.as_path()))
            .collect();
        assert_eq!(
            targets,
            vec![
                (
                    host.as_path(),
                    Path::new("/opt/localkube/image-programs/docker-entrypoint.sh")
                ),
                (
                    host.as_path(),
                    Path::new("/opt/localkube/image-programs/localkube-mariadb-entrypoint")
                ),
            ]
        );
        assert!(mounts.iter().all(|m| m.read_only));
        for name in ["docker-entrypoint.sh", "localkube-mariadb-entrypoint"] {
            let meta = std::fs::symlink_metadata(dir.join(name)).expect("placeholder");
            assert!(meta.is_file() && meta.len() == 0, "{name}: {meta:?}");
        }
        // The argv names the bound program, not the host path.
        let argv = container_argv(mariadb, &[], &[]);
        assert_eq!(
            mariadb.in_container_argv(argv),
            vec![
                "/opt/localkube/image-programs/localkube-mariadb-entrypoint".to_string(),
                "mariadbd".to_string()
            ]
        );
        let own = vec!["sh".to_string(), "-c".to_string()];
        assert_eq!(mariadb.in_container_argv(own.clone()), own);
        // Idempotent, and an older localkube's symlink becomes a placeholder.
        std::fs::remove_file(dir.join("docker-entrypoint.sh")).expect("rm");
        std::os::unix::fs::symlink(&host, dir.join("docker-entrypoint.sh")).expect("symlink");
        assert_eq!(mariadb.program_mounts(&root).expect("again"), mounts);
        assert!(std::fs::symlink_metadata(dir.join("docker-entrypoint.sh"))
            .expect("placeholder")
            .is_file());
        let pause = catalog.resolve("registry.k8s.io/pause:3.9").expect("pause");
        assert_eq!(pause.image_env(), Vec::new());
        assert_eq!(pause.program_mounts(&root).expect("none"), Vec::new());
    }

    #[test]
    fn command_and_args_combine_as_on_kubernetes() {
        let entry = CatalogEntry {
            image: "x".into(),
            entrypoint: vec!["ep".into()],
            cmd: vec!["cmd".into()],
            env: vec![],
            private_dirs: vec![],
            path_programs: vec![],
        };
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(container_argv(&entry, &[], &[]), s(&["ep", "cmd"]));
        assert_eq!(container_argv(&entry, &[], &s(&["a"])), s(&["ep", "a"]));
        assert_eq!(container_argv(&entry, &s(&["c"]), &[]), s(&["c"]));
        assert_eq!(
            container_argv(&entry, &s(&["c"]), &s(&["a"])),
            s(&["c", "a"])
        );
    }
}
