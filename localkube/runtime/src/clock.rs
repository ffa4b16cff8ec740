//! Per-pod wall-clock offsets for the clock-offset fault (`localkube fault clock-offset`).
//!
//! The kernel has no per-process `CLOCK_REALTIME`: a time namespace offsets only
//! `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME`. So the fault uses libfaketime (Debian's
//! `libfaketime`), an `LD_PRELOAD` library that answers `time`, `gettimeofday`,
//! `clock_gettime(CLOCK_REALTIME)` and the timed waits on the real clock plus an offset read
//! from a control file. Only containers that opt in get it: those whose name `localkube up
//! --clock-faults NAME,...` lists (e.g. `mysql`); no other container is touched, so a
//! cluster started without the flag runs exactly as before. Such a container starts with
//! offset `+0`; `localkube fault clock-offset ns/pod +20s` rewrites the pod's control file,
//! and every opted-in process of the pod (and what it `exec`s, and `kubectl exec` into it)
//! reads the new offset within [`CACHE_SECONDS`]. The monotonic clock is left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC`), as on a host whose wall clock is stepped.
//!
//! The control files reach a container at [`CLOCK_MOUNT`], a directory bound from the state
//! dir, never at their host path: a state dir under `/tmp` is hidden by the `mariadb:*`
//! image's private `/tmp`, and libfaketime that cannot read its control file runs on the real
//! clock without a word (a checkout under `/tmp` once made the fault a silent no-op).
//!
//! Limits: a statically linked program ignores `LD_PRELOAD`; libfaketime is not loaded into
//! setuid programs. The offset is relative to the real clock, so a step back and forth is a
//! control-file write each.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::exec::BindMount;

/// Where Debian puts libfaketime (the single-threaded build is fine for mariadbd: its
/// interception is per call, not per thread).
pub const LIBFAKETIME_PATHS: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// Where an opted-in container sees the control files' directory.
pub const CLOCK_MOUNT: &str = "/opt/localkube/clock";

/// How often a faked process re-reads its control file, in seconds.
pub const CACHE_SECONDS: u32 = 1;

/// The clock-fault set-up of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClockFaults {
    /// Names of the containers that get libfaketime (empty: none, the default).
    pub containers: Vec<String>,
    /// The library (found at start when `containers` is not empty).
    pub library: Option<PathBuf>,
    /// The directory of the per-pod control files.
    pub dir: PathBuf,
}

/// A wall-clock offset: `+20s`, `-1.5s`, `+250ms`, `0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// Milliseconds ahead of the real clock (negative: behind).
    pub millis: i64,
}

impl ClockOffset {
    /// Parses `+20s`, `-20s`, `+1.5s`, `-300ms`, `0` (`reset` is the same as `0`).
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        if text == "reset" || text == "0" || text == "+0" || text == "-0" {
            return Ok(Self { millis: 0 });
        }
        let invalid = || {
            Error::Invalid(format!(
                "clock offset {text:?}: expected a signed duration such as +20s, -1.5s or -300ms"
            ))
        };
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (1, &text[1..]),
            Some(b'-') => (-1, &text[1..]),
            _ => return Err(invalid()),
        };
        let (number, scale) = if let Some(n) = rest.strip_suffix("ms") {
            (n, 1.0)
        } else if let Some(n) = rest.strip_suffix('s') {
            (n, 1000.0)
        } else if let Some(n) = rest.strip_suffix('m') {
            (n, 60_000.0)
        } else {
            return Err(invalid());
        };
        let value: f64 = number.parse().map_err(|_| invalid())?;
        if !value.is_finite() || value < 0.0 || value * scale > 1e12 {
            return Err(invalid());
        }
        Ok(Self {
            millis: sign * (value * scale).round() as i64,
        })
    }

    /// The control file's text: libfaketime's relative offset in seconds (`+20.000000`).
    pub fn control_text(self) -> String {
        let sign = if self.millis < 0 { '-' } else { '+' };
        let abs = self.millis.unsigned_abs();
        format!("{sign}{}.{:03}000\n", abs / 1000, abs % 1000)
    }
}

impl std::fmt::Display for ClockOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.millis < 0 { '-' } else { '+' };
        let abs = self.millis.unsigned_abs();
        if abs.is_multiple_of(1000) {
            write!(f, "{sign}{}s", abs / 1000)
        } else {
            write!(f, "{sign}{abs}ms")
        }
    }
}

impl ClockFaults {
    /// Clock faults for `containers` with control files under `state_dir/clock`; finds the
    /// library, and fails when containers are named but libfaketime is not installed.
    pub fn new(state_dir: &Path, containers: Vec<String>) -> Result<Self> {
        let library = if containers.is_empty() {
            None
        } else {
            let found = LIBFAKETIME_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|path| path.is_file());
            Some(found.ok_or_else(|| {
                Error::Invalid(format!(
                    "--clock-faults needs libfaketime (apt-get install libfaketime): none of {}",
                    LIBFAKETIME_PATHS.join(", ")
                ))
            })?)
        };
        Ok(Self {
            containers,
            library,
            dir: state_dir.join("clock"),
        })
    }

    /// Whether the container `name` gets libfaketime.
    pub fn applies_to(&self, name: &str) -> bool {
        self.library.is_some() && self.containers.iter().any(|c| c == name)
    }

    /// The control file of pod `key` (`namespace/name`).
    pub fn control_file(&self, key: &str) -> PathBuf {
        self.dir.join(control_file_name(key))
    }

    /// The bind of the control files' directory at [`CLOCK_MOUNT`] for a container that gets
    /// libfaketime (created when missing); `None` for every other container.
    pub fn mount_for(&self, container: &str) -> Option<BindMount> {
        if !self.applies_to(container) {
            return None;
        }
        if let Err(error) = std::fs::create_dir_all(&self.dir) {
            tracing::warn!(%error, path = %self.dir.display(), "could not create the clock control dir");
        }
        Some(BindMount {
            source: self.dir.clone(),
            target: CLOCK_MOUNT.into(),
            read_only: true,
        })
    }

    /// The environment an opted-in container of pod `key` gets on top of its own (with an
    /// `LD_PRELOAD` it already has kept after libfaketime); creates the control file at `+0`
    /// unless it exists (a restarted container keeps its pod's offset). Empty for every
    /// other container.
    pub fn env_for(
        &self,
        key: &str,
        container: &str,
        env: &[(String, String)],
    ) -> Vec<(String, String)> {
        let Some(library) = self.library.as_ref().filter(|_| self.applies_to(container)) else {
            return Vec::new();
        };
        let file = self.control_file(key);
        if !file.exists() {
            if let Err(error) = std::fs::create_dir_all(&self.dir)
                .and_then(|()| std::fs::write(&file, ClockOffset { millis: 0 }.control_text()))
            {
                tracing::warn!(pod = key, %error, path = %file.display(), "could not create the clock control file");
            }
        }
        let preload = match env.iter().rev().find(|(k, _)| k == "LD_PRELOAD") {
            Some((_, existing)) if !existing.is_empty() => {
                format!("{}:{existing}", library.display())
            }
            _ => library.display().to_string(),
        };
        vec![
            ("LD_PRELOAD".into(), preload),
            (
                "FAKETIME_TIMESTAMP_FILE".into(),
                format!("{CLOCK_MOUNT}/{}", control_file_name(key)),
            ),
            ("FAKETIME_CACHE_DURATION".into(), CACHE_SECONDS.to_string()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ]
    }

    /// Sets pod `key`'s offset (its opted-in containers see it within [`CACHE_SECONDS`]).
    pub fn set_offset(&self, key: &str, offset: ClockOffset) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(Error::io("create the clock control dir", &self.dir))?;
        let file = self.control_file(key);
        // Written beside and renamed, so a reader never sees a half-written offset.
        let staging = self.dir.join(format!(".{}.new", control_file_name(key)));
        std::fs::write(&staging, offset.control_text())
            .map_err(Error::io("write a clock offset", &staging))?;
        std::fs::rename(&staging, &file).map_err(Error::io("install a clock offset", &file))
    }

    /// The offset pod `key` runs with now.
    pub fn offset(&self, key: &str) -> ClockOffset {
        let text = std::fs::read_to_string(self.control_file(key)).unwrap_or_default();
        let seconds: f64 = text.trim().parse().unwrap_or(0.0);
        ClockOffset {
            millis: (seconds * 1000.0).round() as i64,
        }
    }
}

/// The control file's name of pod `key` (`namespace/name`).
fn control_file_name(key: &str) -> String {
    key.replace('/', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_parse_with_a_sign_and_a_unit() {
        let ms = |millis| ClockOffset { millis };
        assert_eq!(ClockOffset::parse("+20s").ok(), Some(ms(20_000)));
        assert_eq!(ClockOffset::parse("-20s").ok(), Some(ms(-20_000)));
        assert_eq!(ClockOffset::parse("+1.5s").ok(), Some(ms(1_500)));
        assert_eq!(ClockOffset::parse("-300ms").ok(), Some(ms(-300)));
        assert_eq!(ClockOffset::parse("+2m").ok(), Some(ms(120_000)));
        assert_eq!(ClockOffset::parse("reset").ok(), Some(ms(0)));
        assert_eq!(ClockOffset::parse("0").ok(), Some(ms(0)));
        for bad in ["20s", "+20", "+x s", "", "+-3s", "+nans"] {
            assert!(ClockOffset::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_control_file_holds_libfaketimes_relative_seconds() {
        assert_eq!(
            ClockOffset { millis: 20_000 }.control_text(),
            "+20.000000\n"
        );
        assert_eq!(ClockOffset { millis: -1_500 }.control_text(), "-1.500000\n");
        assert_eq!(ClockOffset { millis: 0 }.control_text(), "+0.000000\n");
        assert_eq!(ClockOffset { millis: -20_000 }.to_string(), "-20s");
    }

    #[test]
    fn only_named_containers_get_the_library_and_their_preload_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = ClockFaults {
            containers: vec!["mysql".into()],
            library: Some(PathBuf::from("/lib/libfaketime.so.1")),
            dir: dir.path().join("clock"),
        };
        assert!(faults.env_for("ns/p", "sidecar", &[]).is_empty());
        let env = faults.env_for("ns/p", "mysql", &[("LD_PRELOAD".into(), "/x.so".into())]);
        assert!(env.contains(&("LD_PRELOAD".into(), "/lib/libfaketime.so.1:/x.so".into())));
        assert!(env.contains(&("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into())));
        // The container reads its control file at the fixed mount, never at the host path
        // (a state dir under /tmp is hidden by the mariadb image's private /tmp).
        assert!(env.contains(&(
            "FAKETIME_TIMESTAMP_FILE".into(),
            "/opt/localkube/clock/ns_p".into()
        )));
        assert_eq!(
            faults.mount_for("mysql"),
            Some(BindMount {
                source: dir.path().join("clock"),
                target: CLOCK_MOUNT.into(),
                read_only: true,
            })
        );
        assert_eq!(faults.mount_for("sidecar"), None);
        assert_eq!(faults.offset("ns/p"), ClockOffset { millis: 0 });
        faults
            .set_offset("ns/p", ClockOffset { millis: -20_000 })
            .expect("set");
        assert_eq!(faults.offset("ns/p"), ClockOffset { millis: -20_000 });
        // A restarted container keeps the pod's offset.
        faults.env_for("ns/p", "mysql", &[]);
        assert_eq!(faults.offset("ns/p"), ClockOffset { millis: -20_000 });
        let none = ClockFaults::default();
        assert!(none.env_for("ns/p", "mysql", &[]).is_empty());
    }
}
