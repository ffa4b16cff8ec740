//! The `archive` expectation's reading: every archive on a site's backups volume, read back
//! through the site's `sidecar` container (the only one that mounts the volume) with the
//! API's exec, as an SRE would with `kubectl exec` (docs/returning-primary.md, "What the archive
//! holds"). The harness hashes what it reads itself; the verification is
//! [`crate::check::archive::verify_archive`].
//!
//! The container needs `sh`, `cat` and, for a file over [`READ_BACK_BYTES_MAX`] only, `wc`
//! and `sha256sum`: the sidecar image is Debian's slim base (coreutils), and localkube's
//! containers see the node's own tools.

use std::collections::BTreeMap;
use std::time::Duration;

use bloodraven_api::names;
use bloodraven_api::sidecar::{ArchiveManifest, ARCHIVES_DIR, ARCHIVE_MANIFEST};

use super::exec::{exec_collect, ExecOutput, ExecTarget};
use super::LiveCluster;
use crate::check::archive::{verify_archive, ArchiveObservation, FileContent};
use crate::error::{Error, Result};
use crate::playground::names::{GROUP, NAMESPACE};
use crate::scenario::model::Site;

/// Files up to this size are streamed and hashed by the harness; a larger one (a big site's
/// dump) is hashed by the container's `sha256sum`, and an errant binlog that large is not read
/// for its GTIDs (a problem of the archive). The playground's are a few MB.
pub const READ_BACK_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// The bound on one exec of the reading (a listing, a manifest, one file).
pub const READ_EXEC_MAX: Duration = Duration::from_secs(120);

/// The exit code the reading's scripts give for "no such file".
const EXIT_MISSING: i32 = 3;

/// Lists the directories under the archives directory (none when it does not exist).
const LIST: &str = r#"cd "$0" 2>/dev/null || exit 0; for entry in *; do if [ -d "$entry" ]; then printf '%s\n' "$entry"; fi; done; exit 0"#;
/// Prints a file, or exits [`EXIT_MISSING`] when there is none.
const CAT: &str = r#"[ -f "$0" ] || exit 3; exec cat "$0""#;
/// Prints a file's size and SHA-256, or exits [`EXIT_MISSING`] when there is none.
const HASH: &str = r#"[ -f "$0" ] || exit 3; wc -c < "$0" && sha256sum < "$0""#;

fn read_error(site: Site, what: &str, reason: impl ToString) -> Error {
    Error::Cluster {
        action: format!("read {what} on {site}'s backups volume"),
        reason: reason.to_string(),
    }
}

/// What one script's exec came to.
enum Ran {
    /// It printed this.
    Printed(Vec<u8>),
    /// The file is not there.
    Missing,
}

/// A plain file name of an archive directory (no path, not hidden): what a manifest may name.
fn plain(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.starts_with('.')
}

impl LiveCluster {
    /// Runs `script` with `$0` = `path` in `site`'s sidecar container.
    async fn sidecar_script(&self, site: Site, script: &str, path: &str) -> Result<Ran> {
        let pod = names::pod(GROUP, site.name());
        let target = ExecTarget {
            namespace: NAMESPACE,
            pod: &pod,
            container: bloodraven_operator::workloads::CONTAINER_SIDECAR,
        };
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
            path.to_owned(),
        ];
        let ExecOutput {
            status,
            stdout,
            stderr,
        } = exec_collect(&self.client, target, argv, None, READ_EXEC_MAX).await?;
        match status {
            Some(status) if status.status.as_deref() == Some("Success") => Ok(Ran::Printed(stdout)),
            Some(status) if super::incluster::exit_code(&status) == Some(EXIT_MISSING) => {
                Ok(Ran::Missing)
            }
            Some(status) => Err(read_error(
                site,
                path,
                format!("{} {}", status.message.unwrap_or_default(), stderr.trim()),
            )),
            None => Err(read_error(
                site,
                path,
                format!(
                    "the exec reported no status (stderr {:?}): its outcome is unknown",
                    stderr.trim()
                ),
            )),
        }
    }

    /// One file of an archive: its bytes, or the container's size and SHA-256 of one over
    /// [`READ_BACK_BYTES_MAX`].
    async fn archive_file(&self, site: Site, path: &str, manifest_bytes: u64) -> FileContent {
        if manifest_bytes > READ_BACK_BYTES_MAX {
            return match self.sidecar_script(site, HASH, path).await {
                Ok(Ran::Missing) => FileContent::Missing,
                Ok(Ran::Printed(out)) => {
                    let text = String::from_utf8_lossy(&out);
                    let mut words = text.split_whitespace();
                    match (
                        words.next().and_then(|size| size.parse::<u64>().ok()),
                        words.next(),
                    ) {
                        (Some(bytes), Some(sum)) => FileContent::Hashed {
                            bytes,
                            sha256: sum.to_ascii_lowercase(),
                        },
                        _ => FileContent::Unreadable(format!(
                            "`wc -c` and `sha256sum` printed {:?}",
                            text.trim()
                        )),
                    }
                }
                Err(error) => FileContent::Unreadable(error.to_string()),
            };
        }
        match self.sidecar_script(site, CAT, path).await {
            Ok(Ran::Printed(bytes)) => FileContent::Bytes(bytes),
            Ok(Ran::Missing) => FileContent::Missing,
            Err(error) => FileContent::Unreadable(error.to_string()),
        }
    }

    /// Every archive on `site`'s backups volume, each verified against its manifest, in the
    /// shape [`ArchiveObservation`] serializes to. An error only when the volume cannot be
    /// listed or a manifest cannot be read (the expectation polls again).
    pub(crate) async fn observe_archive(&self, site: Site) -> Result<ArchiveObservation> {
        let root = format!(
            "{}/{ARCHIVES_DIR}",
            bloodraven_operator::workloads::BACKUP_MOUNT_PATH
        );
        let listed = match self.sidecar_script(site, LIST, &root).await? {
            Ran::Printed(out) => String::from_utf8_lossy(&out).into_owned(),
            Ran::Missing => String::new(),
        };
        let mut names: Vec<&str> = listed.lines().filter(|name| plain(name)).collect();
        names.sort_unstable();
        let mut archives = Vec::with_capacity(names.len());
        for name in names {
            let dir = format!("{root}/{name}");
            let manifest = match self
                .sidecar_script(site, CAT, &format!("{dir}/{ARCHIVE_MANIFEST}"))
                .await?
            {
                Ran::Printed(bytes) => Some(bytes),
                Ran::Missing => None,
            };
            let mut files = BTreeMap::new();
            let named = manifest
                .as_deref()
                .and_then(|bytes| serde_json::from_slice::<ArchiveManifest>(bytes).ok())
                .map(|manifest| manifest.files)
                .unwrap_or_default();
            for file in named {
                let content = if plain(&file.name) {
                    self.archive_file(site, &format!("{dir}/{}", file.name), file.bytes)
                        .await
                } else {
                    FileContent::Unreadable(format!(
                        "{:?} is not a plain file name of the archive directory",
                        file.name
                    ))
                };
                files.insert(file.name, content);
            }
            archives.push(verify_archive(name, site, manifest.as_deref(), &files));
        }
        Ok(ArchiveObservation { site, archives })
    }
}
