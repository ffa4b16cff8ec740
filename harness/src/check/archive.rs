//! The archive checker: a rejoined returning primary's archive holds every acknowledged write
//! the failover that demoted it lost (docs/design/operator.md#returning-primary: no transaction
//! is thrown away unless an archive names it).
//!
//! # The evidence
//!
//! An `archive` expectation (docs/scenarios.md) reads back, through the site's `sidecar`
//! container (the one that mounts the backups volume), every directory under
//! `archives/` and, for each, `manifest.json` and every file it names. The harness hashes the
//! bytes itself (SHA-256 and size against the manifest's) and reads the GTID event headers of
//! the errant-binlog file with its own reader ([`gtid_marker`], written apart from the
//! sidecar's on purpose: a shared reader would share its mistakes). [`verify_archive`] turns
//! that into an [`ArchiveRead`]; an archive verifies when the manifest reads, names its
//! directory and site, every file reads back with the manifest's size and SHA-256, and the
//! errant binlog's GTIDs are exactly the manifest's errant set, each once. The expectation is
//! satisfied ([`judge_observation`]) once an archive with a manifest written since the
//! scenario started exists and every such archive verifies; a directory without a manifest is
//! partial (the sidecar writes the manifest last) and never counts. The runner records what
//! was read as [`Op::ArchiveRead`].
//!
//! # The judgement (after the final read)
//!
//! The writes lost are the rpo checker's ([`super::rpo::losses`], not computed again here):
//! acknowledged writes missing on the active site after heal, each attributed to the failover
//! that lost it. For each archive read of site S, the failover judged is the last emergency
//! failover away from S that started before the read. Then:
//!
//! - every acknowledged write lost in that failover has its GTID among the GTIDs of the
//!   verified archives of S written in the scenario; one that is missing is a transaction
//!   thrown away without a copy, and one whose GTID the history lacks cannot be checked: both
//!   are findings;
//! - an archived GTID that is the GTID of an acknowledged write invoked before the read but
//!   not lost in that failover is a finding: that write survived (it is on the active site) or
//!   was lost elsewhere, so it was never an errant transaction of S;
//! - every other archived GTID is allowed and counted: the harness cannot name it, and S's
//!   errant transactions include such writes (writes of unknown outcome that committed on S,
//!   the counter app's writes, any other writer's);
//! - an archive that does not verify, a read with no verified archive, and a site that never
//!   lost the primary role in an emergency failover before the read are findings.
//!
//! A history without an archive read is not judged.

use std::collections::{BTreeMap, BTreeSet};

use bloodraven_api::sidecar::{ArchiveFile, ArchiveManifest};
use bloodraven_mysql::{Flavor, GtidSet};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::gtid::{parse_gtid, parse_gtid_set};
use super::observed::failover_label;
use super::rpo::{losses, Losses};
use super::verdict::Verdict;
use crate::history::event::{ArchiveFileRead, ArchiveRead, EventType, FailoverKind, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// The checker's name in reports.
pub const NAME: &str = "archive";

/// The role of the errant transactions' binlog file in a manifest.
pub const ROLE_ERRANT_BINLOG: &str = "errant-binlog";

/// How far before the scenario's start (on the harness's clock) an archive's `createdAt` (on
/// the sidecar's) may be and still count as written in it: the two clocks are one machine's or
/// NTP's apart, and no archive of this scenario can precede its install by more.
pub const ARCHIVE_CLOCK_SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

/// What a file of an archive read back as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// Its bytes, read back by the harness.
    Bytes(Vec<u8>),
    /// Too large to stream: its size and SHA-256 as the container's `wc -c` and `sha256sum`
    /// computed them.
    Hashed {
        /// Size in bytes.
        bytes: u64,
        /// Lowercase hex SHA-256.
        sha256: String,
    },
    /// Not in the directory.
    Missing,
    /// It could not be read: why.
    Unreadable(String),
}

/// What an `archive` expectation observes: the site and every archive directory on its
/// volume, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveObservation {
    /// The site read.
    pub site: Site,
    /// Its archives.
    pub archives: Vec<ArchiveRead>,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The GTID of a GTID event header as `mariadb-binlog --verbose` prints it
/// (`#<yymmdd> <time> server id S  end_log_pos P [CRC32 0x..] \tGTID D-S-N [flags]`), or `None`
/// for every other line (statements, `###` row images, the `Gtid list` of a file's start, the
/// archive's own `--` comments). The harness's own reader, apart from the sidecar's.
pub fn gtid_marker(line: &str) -> Option<String> {
    let header = line.strip_prefix('#')?;
    if !header.starts_with(|c: char| c.is_ascii_digit()) || !header.contains(" server id ") {
        return None;
    }
    let mut words = header.split_whitespace();
    words.find(|word| *word == "GTID")?;
    let text = words.next()?;
    let mut parts = text.split('-');
    let fields = [parts.next()?, parts.next()?, parts.next()?];
    if parts.next().is_some()
        || !fields
            .iter()
            .all(|field| !field.is_empty() && field.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    Some(text.to_owned())
}

/// The GTIDs of the GTID event headers of a `mariadb-binlog` output, in order. Lines are read
/// as bytes: a statement or a row image need not be UTF-8.
pub fn binlog_gtids(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|byte| *byte == b'\n')
        .filter_map(|line| gtid_marker(&String::from_utf8_lossy(line)))
        .collect()
}

/// Verifies one archive directory `name` of `site` from its manifest's bytes (`None`: there is
/// no `manifest.json`) and the content of each file the manifest names (a file absent from
/// `files` counts as not read).
pub fn verify_archive(
    name: &str,
    site: Site,
    manifest: Option<&[u8]>,
    files: &BTreeMap<String, FileContent>,
) -> ArchiveRead {
    let mut read = ArchiveRead {
        name: name.to_owned(),
        ..ArchiveRead::default()
    };
    let Some(text) = manifest else {
        read.problems.push(
            "no manifest.json: the archive is partial (the sidecar writes the manifest last) and never counts".to_owned(),
        );
        return read;
    };
    read.manifest = true;
    let manifest: ArchiveManifest = match serde_json::from_slice(text) {
        Ok(manifest) => manifest,
        Err(error) => {
            read.problems
                .push(format!("manifest.json does not read: {error}"));
            return read;
        }
    };
    read.created_at = jiff::Timestamp::from_millisecond(manifest.created_at.0).ok();
    read.rejoin_id = Some(manifest.rejoin_id);
    read.errant_gtid_set = Some(manifest.errant_gtid_set.clone());
    if manifest.name != name {
        read.problems.push(format!(
            "the manifest names archive {:?}, not its directory {name:?}",
            manifest.name
        ));
    }
    if manifest.site != site.name() {
        read.problems.push(format!(
            "the manifest names site {:?}, but it is on {site}'s volume",
            manifest.site
        ));
    }
    let errant = match parse_gtid_set(&manifest.errant_gtid_set) {
        Ok(set) => Some(set),
        Err(error) => {
            read.problems.push(format!(
                "the manifest's errantGtidSet {:?} does not parse: {error}",
                manifest.errant_gtid_set
            ));
            None
        }
    };
    let mut binlogs = 0;
    for file in &manifest.files {
        let content = files
            .get(&file.name)
            .cloned()
            .unwrap_or_else(|| FileContent::Unreadable("not read".to_owned()));
        let (checked, bytes) = read_back(file, content, &mut read.problems);
        if file.role == ROLE_ERRANT_BINLOG {
            binlogs += 1;
            check_errant_binlog(&manifest, errant.as_ref(), file, &checked, bytes, &mut read);
        }
        read.files.push(checked);
    }
    if binlogs != 1 {
        read.problems.push(format!(
            "the manifest names {binlogs} files of role {ROLE_ERRANT_BINLOG}, not one"
        ));
    }
    read
}

/// A file the manifest names as it read back: its size and SHA-256 against the manifest's
/// (problems pushed), and its bytes when they were streamed.
fn read_back(
    file: &ArchiveFile,
    content: FileContent,
    problems: &mut Vec<String>,
) -> (ArchiveFileRead, Option<Vec<u8>>) {
    let mut checked = ArchiveFileRead {
        name: file.name.clone(),
        role: file.role.clone(),
        bytes: file.bytes,
        sha256: file.sha256.clone(),
        read_bytes: None,
        read_sha256: None,
    };
    let bytes = match content {
        FileContent::Bytes(bytes) => {
            checked.read_bytes = Some(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
            checked.read_sha256 = Some(sha256_hex(&bytes));
            Some(bytes)
        }
        FileContent::Hashed { bytes, sha256 } => {
            checked.read_bytes = Some(bytes);
            checked.read_sha256 = Some(sha256);
            None
        }
        FileContent::Missing => {
            problems.push(format!(
                "{}, named by the manifest, is not in the archive",
                file.name
            ));
            None
        }
        FileContent::Unreadable(why) => {
            problems.push(format!("{} could not be read back: {why}", file.name));
            None
        }
    };
    if let Some(size) = checked.read_bytes.filter(|size| *size != file.bytes) {
        problems.push(format!(
            "{}: {size} bytes read back, the manifest says {}",
            file.name, file.bytes
        ));
    }
    if let Some(sum) = checked
        .read_sha256
        .as_ref()
        .filter(|sum| !sum.eq_ignore_ascii_case(&file.sha256))
    {
        problems.push(format!(
            "{}: SHA-256 read back {sum}, the manifest says {}",
            file.name, file.sha256
        ));
    }
    (checked, bytes)
}

/// The errant binlog `file`, as `checked` read it back (its `bytes` when streamed): its GTID set is the manifest's
/// errant set, and the GTIDs its event headers name are exactly that set, each once.
fn check_errant_binlog(
    manifest: &ArchiveManifest,
    errant: Option<&GtidSet>,
    file: &ArchiveFile,
    checked: &ArchiveFileRead,
    bytes: Option<Vec<u8>>,
    read: &mut ArchiveRead,
) {
    if file.gtid_set != manifest.errant_gtid_set {
        let same = match (errant, parse_gtid_set(&file.gtid_set)) {
            (Some(errant), Ok(set)) => *errant == set,
            _ => false,
        };
        if !same {
            read.problems.push(format!(
                "{}: its GTID set {:?} is not the manifest's errantGtidSet {:?}",
                file.name, file.gtid_set, manifest.errant_gtid_set
            ));
        }
    }
    match bytes {
        Some(bytes) => {
            read.binlog_gtids = binlog_gtids(&bytes);
            if let Some(errant) = errant {
                if let Some(problem) = markers_problem(&file.name, errant, &read.binlog_gtids) {
                    read.problems.push(problem);
                }
            }
        }
        None if checked.read_bytes.is_some() => read.problems.push(format!(
            "{}: too large to read back, so its GTIDs were not read",
            file.name
        )),
        None => {}
    }
}

/// Why the GTIDs found in an errant binlog are not exactly `errant`, each once.
fn markers_problem(file: &str, errant: &GtidSet, markers: &[String]) -> Option<String> {
    let mut found = GtidSet::empty(Flavor::MariaDb);
    let mut twice = Vec::new();
    let mut unreadable = Vec::new();
    for marker in markers {
        match parse_gtid(marker) {
            Ok(gtid) if found.contains_gtid(&gtid) => twice.push(marker.clone()),
            Ok(gtid) => found.insert(gtid),
            Err(_) => unreadable.push(marker.clone()),
        }
    }
    let missing = errant.subtract(&found);
    let extra = found.subtract(errant);
    if missing.is_empty() && extra.is_empty() && twice.is_empty() && unreadable.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!(
            "{} of the errant set missing ({missing})",
            missing.count()
        ));
    }
    if !extra.is_empty() {
        parts.push(format!("{} not in the errant set ({extra})", extra.count()));
    }
    if !twice.is_empty() {
        parts.push(format!("found twice: {}", twice.join(",")));
    }
    if !unreadable.is_empty() {
        parts.push(format!("unreadable: {}", unreadable.join(",")));
    }
    Some(format!(
        "{file} holds {} transactions, not exactly the errant set {errant}: {}",
        markers.len(),
        parts.join("; ")
    ))
}

/// Whether `archive` counts as written since `since` (the scenario's start): it has a
/// manifest whose `createdAt` is no earlier than `since` less [`ARCHIVE_CLOCK_SLACK`].
pub fn written_since(archive: &ArchiveRead, since: jiff::Timestamp) -> bool {
    archive.manifest
        && archive.created_at.is_some_and(|created| {
            created >= since.checked_sub(ARCHIVE_CLOCK_SLACK).unwrap_or(since)
        })
}

/// Whether an `archive` expectation's observation satisfies it: an archive with a manifest
/// written since `since` exists, and every such archive verifies. The error says what is
/// missing or what does not verify.
pub fn judge_observation(
    observation: &ArchiveObservation,
    since: jiff::Timestamp,
) -> Result<(), String> {
    let site = observation.site;
    let current: Vec<&ArchiveRead> = observation
        .archives
        .iter()
        .filter(|archive| written_since(archive, since))
        .collect();
    let broken: Vec<String> = current
        .iter()
        .flat_map(|archive| {
            archive
                .problems
                .iter()
                .map(move |problem| format!("archive {}: {problem}", archive.name))
        })
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "{site}'s archive does not verify: {}",
            broken.join("; ")
        ));
    }
    if current.is_empty() {
        let seen: Vec<String> = observation
            .archives
            .iter()
            .map(|archive| {
                if !archive.manifest {
                    format!("{} (partial: no manifest.json)", archive.name)
                } else if let Some(created) = archive.created_at {
                    format!(
                        "{} (written {created:.0}, before the scenario)",
                        archive.name
                    )
                } else {
                    format!("{} ({})", archive.name, archive.problems.join("; "))
                }
            })
            .collect();
        return Err(format!(
            "no archive with a manifest written since {since:.0} on {site}'s backups volume (found: {})",
            if seen.is_empty() {
                "none".to_owned()
            } else {
                seen.join(", ")
            }
        ));
    }
    Ok(())
}

/// One archive read of the history.
struct Read<'a> {
    at_ns: u64,
    site: Site,
    since: jiff::Timestamp,
    archives: &'a [ArchiveRead],
}

/// Every archive read of the history that completed.
fn archive_reads(history: &History) -> Vec<Read<'_>> {
    history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Ok)
        .filter_map(|event| match &event.op {
            Op::ArchiveRead {
                site,
                since,
                archives,
            } => Some(Read {
                at_ns: event.mono_ns,
                site: *site,
                since: *since,
                archives,
            }),
            _ => None,
        })
        .collect()
}

/// Judges every archive read of the history against the writes the rpo checker counts lost
/// (module docs).
pub fn check_archive(history: &History) -> Verdict {
    let reads = archive_reads(history);
    if reads.is_empty() {
        return Verdict::from_findings(
            NAME,
            "not judged: no step read an archive".to_owned(),
            Vec::new(),
        );
    }
    let computed = match losses(history) {
        Ok(computed) => computed,
        Err(unknown) => {
            let (_, why) = *unknown;
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!(
                    "the archives read cannot be compared with the writes lost: {why}"
                )],
            );
        }
    };
    let mut findings = Vec::new();
    let judged: Vec<String> = reads
        .iter()
        .filter_map(|read| judge_read(read, &computed, &mut findings))
        .collect();
    Verdict::from_findings(NAME, judged.join("; "), findings)
}

/// One archive read against the writes lost in the failover that demoted its site: its
/// findings pushed, and what it judged (`None`: nothing to compare).
fn judge_read(read: &Read<'_>, computed: &Losses, findings: &mut Vec<String>) -> Option<String> {
    let site = read.site;
    let intact = intact_archives(read, findings);
    if intact.is_empty() {
        findings.push(format!(
            "no intact archive of {site} written in this scenario was read (of {} directories)",
            read.archives.len()
        ));
        return None;
    }
    let archived = archived_gtids(&intact, site, findings);
    let names: Vec<&str> = intact.iter().map(|archive| archive.name.as_str()).collect();
    let names = names.join(", ");
    let Some((index, boundary)) =
        computed
            .boundaries
            .iter()
            .enumerate()
            .rev()
            .find(|(_, boundary)| {
                boundary.record.kind == FailoverKind::Emergency
                    && boundary.record.from == site
                    && boundary.started_ns <= read.at_ns
            })
    else {
        findings.push(format!(
            "archive {names} of {site} was read, but no emergency failover away from {site} was observed before it: there are no lost writes to compare it with"
        ));
        return None;
    };
    let lost_ids: &[u64] = computed.lost_in.get(index).map_or(&[], Vec::as_slice);
    let against = Against {
        computed,
        read,
        archived: &archived,
        names: &names,
        failover: failover_label(&boundary.record),
        lost_ids,
        lost: lost_ids.iter().copied().collect(),
    };
    let kept = against.lost_kept(findings);
    let foreign = against.foreign(findings);
    let others = archived.count().saturating_sub(kept + foreign);
    Some(format!(
        "{site}: {kept} of the {} acknowledged writes lost in the {} are in {names}, with {others} other errant transaction{} (writes of unknown outcome, the counter app, other writers)",
        against.lost.len(),
        against.failover,
        if others == 1 { "" } else { "s" }
    ))
}

/// The archives of a read written in this scenario that verify; each problem of one that does
/// not is a finding.
fn intact_archives<'a>(read: &Read<'a>, findings: &mut Vec<String>) -> Vec<&'a ArchiveRead> {
    let current: Vec<&ArchiveRead> = read
        .archives
        .iter()
        .filter(|archive| written_since(archive, read.since))
        .collect();
    for archive in &current {
        for problem in &archive.problems {
            findings.push(format!(
                "archive {} of {}: {problem}",
                archive.name, read.site
            ));
        }
    }
    current
        .into_iter()
        .filter(|archive| archive.problems.is_empty())
        .collect()
}

/// The GTIDs the intact archives' errant binlogs hold; one that does not parse is a finding.
fn archived_gtids(intact: &[&ArchiveRead], site: Site, findings: &mut Vec<String>) -> GtidSet {
    let mut archived = GtidSet::empty(Flavor::MariaDb);
    for archive in intact {
        for marker in &archive.binlog_gtids {
            match parse_gtid(marker) {
                Ok(gtid) => archived.insert(gtid),
                Err(error) => findings.push(format!(
                    "archive {} of {site}: GTID {marker:?} does not parse: {error}",
                    archive.name
                )),
            }
        }
    }
    archived
}

/// One read's archived GTIDs against the writes lost in the failover that demoted its site.
struct Against<'a> {
    computed: &'a Losses,
    read: &'a Read<'a>,
    /// The GTIDs of the read's intact archives.
    archived: &'a GtidSet,
    /// The intact archives' names, for findings.
    names: &'a str,
    /// The failover's name, for findings.
    failover: String,
    /// The acknowledged writes lost in it.
    lost_ids: &'a [u64],
    /// The same, as a set.
    lost: BTreeSet<u64>,
}

impl Against<'_> {
    /// How many writes lost in the failover are archived; one missing, or without a GTID to
    /// look for, is a finding.
    fn lost_kept(&self, findings: &mut Vec<String>) -> u64 {
        let (site, names, failover) = (self.read.site, self.names, &self.failover);
        let mut kept = 0u64;
        for write in self.computed.records(self.lost_ids) {
            let Some(text) = write.gtid.as_deref() else {
                findings.push(format!(
                    "acknowledged write {} was lost in the {failover} but recorded no GTID, so {site}'s archive cannot be checked for it",
                    write.id
                ));
                continue;
            };
            match parse_gtid(text) {
                Ok(gtid) if self.archived.contains_gtid(&gtid) => kept += 1,
                Ok(_) => findings.push(format!(
                    "acknowledged write {} ({text}) was lost in the {failover} and is in no archive of {site} ({names}): thrown away without a copy",
                    write.id
                )),
                Err(error) => findings.push(format!(
                    "write {}'s GTID `{text}` does not parse: {error}",
                    write.id
                )),
            }
        }
        kept
    }

    /// How many archived GTIDs are those of acknowledged writes invoked before the read but
    /// not lost in the failover: each a finding, saying what became of the write.
    fn foreign(&self, findings: &mut Vec<String>) -> u64 {
        let computed = self.computed;
        let (site, names, failover) = (self.read.site, self.names, &self.failover);
        let lost_where: BTreeMap<u64, usize> = computed
            .lost_in
            .iter()
            .enumerate()
            .flat_map(|(index, ids)| ids.iter().map(move |id| (*id, index)))
            .collect();
        let mut foreign = 0u64;
        for write in computed.writes.values() {
            if write.outcome != EventType::Ok
                || write.start_ns > self.read.at_ns
                || self.lost.contains(&write.id)
            {
                continue;
            }
            let Some(text) = write.gtid.as_deref() else {
                continue;
            };
            let Ok(gtid) = parse_gtid(text) else {
                continue;
            };
            if !self.archived.contains_gtid(&gtid) {
                continue;
            }
            foreign += 1;
            let fate = if computed.on_active.contains(&write.id) {
                format!(
                    "which survived (it is on the active site {})",
                    computed.active
                )
            } else if let Some(other) = lost_where
                .get(&write.id)
                .and_then(|other| computed.boundaries.get(*other))
            {
                format!(
                    "which was lost in the {} instead",
                    failover_label(&other.record)
                )
            } else {
                "which was not lost in that failover".to_owned()
            };
            findings.push(format!(
                "{site}'s archive ({names}) holds {text}, the GTID of acknowledged write {} by {}, {fate}: not an errant transaction of {site} lost in the {failover}",
                write.id,
                write.site.map_or_else(|| "no site".to_owned(), |site| site.to_string()),
            ));
        }
        foreign
    }
}
