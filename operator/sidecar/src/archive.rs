//! The archive job ([`bloodraven_api::sidecar::ArchiveRequest`], `POST /v1/archive`): before a
//! rejoin re-seeds a returning primary, keep what the re-seed discards
//! (docs/design/operator.md#returning-primary: no transaction is thrown away unless an archive
//! names it).
//!
//! # What it writes
//!
//! `<backup dir>/`[`ARCHIVES_DIR`]`/<name>/` holds:
//!
//! - [`ERRANT_BINLOG`]: the binlog events of exactly the errant transactions, as
//!   `mariadb-binlog --verbose` prints them (statements, and row events with their
//!   reconstructed SQL in `###` comments). They are read from mysqld over TCP as the backup
//!   jobs' account (`--read-from-remote-server`: the binlog files are not always on a volume
//!   the sidecar mounts, and in the tests' sandbox they are outside the data directory), one
//!   `mariadb-binlog` run per run of the set ([`GtidSet::mariadb_runs`]): domain D, server S,
//!   numbers A..=B are `--start-position=D-S-(A-1) --stop-position=D-S-B --do-domain-ids=D
//!   --do-server-ids=S`. mysqld accepts that start position while its binlog state holds
//!   S's GTIDs of domain D up to at least A-1, which [`admit`] checked; it then skips the
//!   domain's events up to S's first one above A-1. A run `mariadb-binlog` cannot read (a
//!   purged binlog, a start position no event of S reaches) fails the job naming the run.
//!   The file is then read back: the set of its `GTID d-s-n` markers must equal the errant
//!   set, each once, or the job fails naming the difference (missing, not asked for, twice).
//! - [`DUMP`]: a full logical dump of the site as it is, by the backup job's dump code, with
//!   the GTID set of its snapshot.
//! - last, [`ARCHIVE_MANIFEST`] ([`ArchiveManifest`]): each file's role, GTID set, size and
//!   SHA-256.
//!
//! Every file is written under a `.partial` name, synced, then renamed, and the directory
//! synced; the manifest comes last the same way. An archive without a manifest is partial and
//! never counts: a crash mid-way leaves none, the next attempt of that name starts the
//! directory over, and a job that fails removes it.
//!
//! # When it runs
//!
//! Only while an explicit operator fence is in force and mysqld reads read-only (the site
//! takes no write meanwhile), and only for an errant set the site holds: each errant GTID
//! `D-S-N` needs an entry `D-S-M` with `M >= N` in its `gtid_binlog_state`. That is the
//! exact meaning of the state (S's last transaction of domain D is M, so S can have written
//! N); [`GtidSet::contains`] on the parsed state would be stricter than the server: the state
//! `0-7-6,0-1-7` reads as 1..=6 by server 7, and would refuse server 1's real errant `0-1-4..5`
//! ([`GtidSet`]'s model credits a run to its last writer). The binlog read-back above is the exact check. The job never
//! changes mysqld; it needs the backup account's `REPLICATION SLAVE` (the pods run it as
//! `root`).

use std::{
    io::{BufRead, Write},
    path::Path,
    process::Stdio,
    time::Duration,
};

use axum::http::StatusCode;
use bloodraven_api::sidecar::{
    ArchiveFile, ArchiveManifest, JobKind, JobState, JobStatus, ARCHIVES_DIR, ARCHIVE_MANIFEST,
};
use bloodraven_mysql::{live::ConnectOptions, Flavor, Gtid, GtidSet};

use crate::{
    backup::{binlog_state, client, dump, fail, last_lines, parse_list, tool, JobError},
    clock::wall_now,
    config::BackupSettings,
    physical::sync_dir,
    state::Shared,
};

/// The errant transactions' binlog events.
pub(crate) const ERRANT_BINLOG: &str = "errant.binlog.sql";
/// The full logical dump.
pub(crate) const DUMP: &str = "dump.sql";
/// [`ArchiveFile::role`] of [`ERRANT_BINLOG`].
pub(crate) const ROLE_ERRANT_BINLOG: &str = "errant-binlog";
/// [`ArchiveFile::role`] of [`DUMP`].
pub(crate) const ROLE_DUMP: &str = "dump";
/// The most runs an errant set may have (one `mariadb-binlog` each). An emergency failover
/// leaves one run per domain and server; a set this fragmented is refused, not archived.
pub(crate) const RUNS_MAX: usize = 256;
/// How long one `mariadb-binlog` run may take.
const BINLOG_READ_WAIT_MAX: Duration = Duration::from_secs(600);
/// How many GTIDs a failure message lists of a difference before it says "and N more".
const LISTED_MAX: usize = 20;

/// The errant set of a request, or why it is unusable (answered 400).
pub(crate) fn errant_set(text: &str) -> Result<GtidSet, JobError> {
    let set = GtidSet::parse(Flavor::MariaDb, text)
        .map_err(|error| fail(format!("read the errant GTID set {text:?}: {error}")))?;
    if set.is_empty() {
        return Err(fail(format!(
            "the errant GTID set {text:?} is empty: there is nothing to archive"
        )));
    }
    let runs = set.mariadb_runs().len();
    if runs > RUNS_MAX {
        return Err(fail(format!(
            "the errant GTID set has {runs} runs of transactions, more than {RUNS_MAX}: refused rather than read from the binlog run by run"
        )));
    }
    Ok(set)
}

/// What a site can hold by its `gtid_binlog_state`: for each entry `D-S-M`, transactions
/// 1..=M of domain D by server S (module docs).
pub(crate) fn holdable(state: &str) -> Result<GtidSet, JobError> {
    let ranges: Vec<String> = parse_list(state)?
        .into_iter()
        .filter(|&(_, _, last)| last > 0)
        .map(|(domain, server, last)| format!("{domain}-{server}-1..{last}"))
        .collect();
    GtidSet::parse(Flavor::MariaDb, &ranges.join(","))
        .map_err(|error| fail(format!("read gtid_binlog_state {state:?}: {error}")))
}

/// Whether an archive job may start.
#[derive(Debug)]
pub(crate) enum Admission {
    /// It may.
    Start,
    /// This very archive exists already (same rejoin, same errant set): its job, succeeded.
    Archived(Box<JobStatus>),
}

/// The archive's checks before it starts (module docs), in this order: an archive of that name
/// already written (the same one is answered as done, a different one refused), the fence,
/// mysqld read-only, the errant set held. Refusals carry their status: 409, or 503 when mysqld
/// cannot be read.
pub(crate) async fn admit(
    shared: &Shared,
    settings: &BackupSettings,
    name: &str,
    rejoin_id: u64,
    errant: &GtidSet,
) -> Result<Admission, (StatusCode, String)> {
    let site = shared.site();
    let conflict = |message: String| (StatusCode::CONFLICT, message);
    let manifest_path = settings
        .dir
        .join(ARCHIVES_DIR)
        .join(name)
        .join(ARCHIVE_MANIFEST);
    match std::fs::read_to_string(&manifest_path) {
        Ok(text) => {
            let manifest: ArchiveManifest = serde_json::from_str(&text).map_err(|error| {
                conflict(format!(
                    "archive {name} on {site}: {} exists but does not read: {error}",
                    manifest_path.display()
                ))
            })?;
            let same_set = GtidSet::parse(Flavor::MariaDb, &manifest.errant_gtid_set)
                .is_ok_and(|archived| archived == *errant);
            if manifest.rejoin_id == rejoin_id && same_set {
                return Ok(Admission::Archived(Box::new(archived_job(&manifest))));
            }
            return Err(conflict(format!(
                "archive {name} on {site}: it exists for rejoin {} with errant set {}; this request names rejoin {rejoin_id} and {errant}; an archive is never overwritten",
                manifest.rejoin_id, manifest.errant_gtid_set
            )));
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(conflict(format!(
                "archive {name} on {site}: read {}: {error}",
                manifest_path.display()
            )))
        }
    }
    if shared.lease().fence_state().is_none() {
        return Err(conflict(format!(
            "archive on {site}: no explicit fence is in force (POST /v1/fence first)"
        )));
    }
    let mysql = client(&settings.mysql);
    let unavailable = |error: String| (StatusCode::SERVICE_UNAVAILABLE, error);
    let mut conn = mysql
        .connect()
        .await
        .map_err(|error| unavailable(format!("archive on {site}: {error}")))?;
    let read_only = mysql
        .read_only_on(&mut conn)
        .await
        .map_err(|error| unavailable(format!("archive on {site}: read read_only: {error}")))?;
    drop(conn);
    if !read_only.read_only {
        return Err(conflict(format!(
            "archive on {site}: mysqld is writable; it must read read-only under the fence"
        )));
    }
    let state = binlog_state(&mysql)
        .await
        .map_err(|error| unavailable(format!("archive on {site}: {error}")))?;
    let held = holdable(&state).map_err(|error| conflict(error.to_string()))?;
    let missing = errant.subtract(&held);
    if !missing.is_empty() {
        return Err(conflict(format!(
            "archive on {site}: the site does not hold {missing} of the errant set {errant} (its gtid_binlog_state is {state:?})"
        )));
    }
    Ok(Admission::Start)
}

/// The job of an archive already written, as its manifest tells.
fn archived_job(manifest: &ArchiveManifest) -> JobStatus {
    JobStatus {
        kind: JobKind::Archive,
        name: manifest.name.clone(),
        restore_id: manifest.rejoin_id,
        state: JobState::Succeeded,
        started_at: manifest.created_at,
        finished_at: Some(manifest.created_at),
        gtid_set: Some(manifest.errant_gtid_set.clone()),
        message: Some(summary(manifest)),
    }
}

/// The job's one-line outcome.
pub(crate) fn summary(manifest: &ArchiveManifest) -> String {
    let files: Vec<String> = manifest
        .files
        .iter()
        .map(|file| format!("{} {} bytes ({})", file.name, file.bytes, file.role))
        .collect();
    format!(
        "archived errant set {} of rejoin {} in {ARCHIVES_DIR}/{}: {}",
        manifest.errant_gtid_set,
        manifest.rejoin_id,
        manifest.name,
        files.join(", ")
    )
}

/// Runs the job: the archive written and its outcome `(errant set, summary)`, or the reason
/// it failed (its directory then removed).
pub(crate) async fn run(
    shared: &Shared,
    settings: &BackupSettings,
    name: &str,
    rejoin_id: u64,
    errant: &GtidSet,
) -> Result<(String, String), JobError> {
    let archives = settings.dir.join(ARCHIVES_DIR);
    let dir = archives.join(name);
    // A directory without a manifest is what a cut-off job left: started over.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|error| {
            fail(format!(
                "remove the partial archive {}: {error}",
                dir.display()
            ))
        })?;
    }
    std::fs::create_dir_all(&dir)
        .map_err(|error| fail(format!("create {}: {error}", dir.display())))?;
    sync_dir(&archives)?;
    sync_dir(&settings.dir)?;
    let outcome = write(shared, settings, &dir, name, rejoin_id, errant).await;
    if let Err(error) = &outcome {
        if let Err(removal) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(site = shared.site(), archive = name, %error, %removal, "remove the failed archive's files (it has no manifest, so it never counts)");
        }
    }
    outcome
}

async fn write(
    shared: &Shared,
    settings: &BackupSettings,
    dir: &Path,
    name: &str,
    rejoin_id: u64,
    errant: &GtidSet,
) -> Result<(String, String), JobError> {
    let site = shared.site();
    let errant_text = errant.to_string();
    let binlog_partial = dir.join(partial_name(ERRANT_BINLOG));
    let said = select(&settings.mysql, errant, &binlog_partial).await?;
    let found = read_gtids(&binlog_partial)?;
    if let Some(problem) = selection_problem(errant, &found) {
        let said = if said.is_empty() {
            String::new()
        } else {
            format!("; mariadb-binlog said: {said}")
        };
        return Err(fail(format!(
            "select the errant transactions from the binlog of {site}: {problem}{said}"
        )));
    }
    let binlog = place(dir, ERRANT_BINLOG)?;
    tracing::info!(site, archive = name, rejoin_id, errant_gtid_set = %errant_text, transactions = errant.count(), "archive: errant transactions selected from the binlog");

    let dump_partial = dir.join(partial_name(DUMP));
    let dumped = dump(&settings.mysql, &dump_partial).await?;
    let snapshot = holdable(&dumped.gtid_set)?;
    let absent = errant.subtract(&snapshot);
    if !absent.is_empty() {
        return Err(fail(format!(
            "dump {site}: its snapshot ({}) lacks {absent} of the errant set",
            dumped.gtid_set
        )));
    }
    let dump_path = place(dir, DUMP)?;
    tracing::info!(site, archive = name, rejoin_id, gtid_set = dumped.gtid_set, databases = ?dumped.databases, bytes = dumped.bytes, "archive: site dumped");

    let files = vec![
        describe(&binlog, ROLE_ERRANT_BINLOG, &errant_text)?,
        describe(&dump_path, ROLE_DUMP, &dumped.gtid_set)?,
    ];
    let manifest = ArchiveManifest {
        name: name.to_owned(),
        site: site.to_owned(),
        rejoin_id,
        errant_gtid_set: errant_text.clone(),
        created_at: wall_now(),
        files,
    };
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|error| fail(format!("encode the manifest of archive {name}: {error}")))?;
    let manifest_partial = dir.join(partial_name(ARCHIVE_MANIFEST));
    write_synced(&manifest_partial, &text)?;
    place(dir, ARCHIVE_MANIFEST)?;
    Ok((errant_text, summary(&manifest)))
}

/// The name a file is written under before it is complete.
fn partial_name(name: &str) -> String {
    format!(".{name}.partial")
}

/// Renames `dir/.<name>.partial` (synced) to `dir/<name>` and syncs the directory.
fn place(dir: &Path, name: &str) -> Result<std::path::PathBuf, JobError> {
    let from = dir.join(partial_name(name));
    let to = dir.join(name);
    std::fs::File::open(&from)
        .and_then(|file| file.sync_all())
        .and_then(|()| std::fs::rename(&from, &to))
        .map_err(|error| fail(format!("put {} in place: {error}", to.display())))?;
    sync_dir(dir)?;
    Ok(to)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), JobError> {
    std::fs::File::create(path)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .map_err(|error| fail(format!("write {}: {error}", path.display())))
}

/// A file of the archive: its size and SHA-256, read back from the volume.
fn describe(path: &Path, role: &str, gtid_set: &str) -> Result<ArchiveFile, JobError> {
    let (bytes, sha256) = sha256_file(path)?;
    Ok(ArchiveFile {
        name: path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        role: role.to_owned(),
        gtid_set: gtid_set.to_owned(),
        bytes,
        sha256,
    })
}

/// Size and lowercase hex SHA-256 of a file.
pub(crate) fn sha256_file(path: &Path) -> Result<(u64, String), JobError> {
    use std::io::Read;
    let read = |error: std::io::Error| fail(format!("read {}: {error}", path.display()));
    let mut file = std::fs::File::open(path).map_err(read)?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buffer = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let count = file.read(&mut buffer).map_err(read)?;
        if count == 0 {
            break;
        }
        context.update(&buffer[..count]);
        bytes += count as u64;
    }
    Ok((bytes, hex(context.finish().as_ref())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One `mariadb-binlog` selection: transactions `first..=last` of `domain` by `server_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) domain: u32,
    pub(crate) server_id: u32,
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl Selection {
    /// One per run of the set.
    pub(crate) fn of(errant: &GtidSet) -> Vec<Selection> {
        errant
            .mariadb_runs()
            .into_iter()
            .map(|(domain, server_id, first, last)| Selection {
                domain,
                server_id,
                first,
                last,
            })
            .collect()
    }

    /// The selecting arguments of `mariadb-binlog` (the start position is exclusive, the stop
    /// position inclusive).
    pub(crate) fn args(&self) -> Vec<String> {
        let Selection {
            domain,
            server_id,
            first,
            last,
        } = *self;
        vec![
            format!("--start-position={domain}-{server_id}-{}", first - 1),
            format!("--stop-position={domain}-{server_id}-{last}"),
            format!("--do-domain-ids={domain}"),
            format!("--do-server-ids={server_id}"),
        ]
    }
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{}-{}..{}",
            self.domain, self.server_id, self.first, self.last
        )
    }
}

/// Writes the binlog events of `errant` from mysqld at `options` into `out`, one
/// `mariadb-binlog` run per selection, each after a `--` comment line naming it. Returns what
/// the runs wrote on stderr (their warnings, e.g. a stop position not reached).
async fn select(
    options: &ConnectOptions,
    errant: &GtidSet,
    out: &Path,
) -> Result<String, JobError> {
    let mysql = client(options);
    let mut conn = mysql.connect().await.map_err(|e| fail(e.to_string()))?;
    let logs = mysql
        .rows(&mut conn, "SHOW BINARY LOGS")
        .await
        .map_err(|e| fail(format!("list the binary logs: {e}")))?;
    drop(conn);
    let first_log = logs
        .first()
        .and_then(|row| row.get("Log_name").cloned().flatten())
        .ok_or_else(|| {
            fail(format!(
                "list the binary logs of {}: none (is log_bin on?)",
                options.address()
            ))
        })?;
    let write_error = |error: std::io::Error| fail(format!("write {}: {error}", out.display()));
    let mut file = std::fs::File::create(out).map_err(write_error)?;
    let mut said = Vec::new();
    for selection in Selection::of(errant) {
        let args = selection.args();
        writeln!(
            file,
            "-- bloodraven archive: errant transactions {selection} (mariadb-binlog --read-from-remote-server {})",
            args.join(" ")
        )
        .map_err(write_error)?;
        let stdout = file.try_clone().map_err(write_error)?;
        let mut command = tool("mariadb-binlog", options)?;
        command
            .arg("--read-from-remote-server")
            .arg("--verbose")
            .args(&args)
            .arg("--to-last-log")
            .arg(&first_log)
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::piped());
        let output = tokio::time::timeout(
            BINLOG_READ_WAIT_MAX,
            crate::backup::run(&mut command, "mariadb-binlog"),
        )
            .await
            .map_err(|_| {
                fail(format!(
                    "read {selection} from the binlog of {}: mariadb-binlog did not finish within {BINLOG_READ_WAIT_MAX:?}",
                    options.address()
                ))
            })??;
        let stderr = last_lines(&output.stderr);
        if !output.status.success() {
            return Err(fail(format!(
                "read {selection} from the binlog of {}: mariadb-binlog exited with {}: {stderr}",
                options.address(),
                output.status
            )));
        }
        if !stderr.is_empty() {
            tracing::info!(range = %selection, stderr, "archive: mariadb-binlog warned");
            said.push(format!("{selection}: {stderr}"));
        }
    }
    file.sync_all().map_err(write_error)?;
    Ok(said.join("; "))
}

/// The GTIDs whose events a `mariadb-binlog` output holds, in the order they appear.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// Every GTID found.
    pub(crate) set: GtidSet,
    /// GTIDs found more than once (each repetition).
    pub(crate) repeated: Vec<Gtid>,
}

fn read_gtids(path: &Path) -> Result<Found, JobError> {
    let file = std::fs::File::open(path)
        .map_err(|error| fail(format!("read {}: {error}", path.display())))?;
    gtids_in(std::io::BufReader::new(file))
        .map_err(|error| fail(format!("read {}: {error}", path.display())))
}

/// The GTIDs of the event groups in `mariadb-binlog` output: the header lines of GTID events
/// (`#<date> <time> server id S  end_log_pos P ... \tGTID D-S-N <flags>`). Everything else
/// (statements, `###` row comments, the `Gtid list` of a file's start) is not a marker.
pub(crate) fn gtids_in(reader: impl BufRead) -> std::io::Result<Found> {
    let mut found = Found::default();
    // Lines are read as bytes: a statement or a row comment need not be UTF-8.
    for line in reader.split(b'\n') {
        let line = line?;
        let Some(gtid) = gtid_marker(&String::from_utf8_lossy(&line)) else {
            continue;
        };
        if found.set.contains_gtid(&gtid) {
            found.repeated.push(gtid);
        } else {
            found.set.insert(gtid);
        }
    }
    Ok(found)
}

/// The GTID of one GTID event header line, if it is one.
pub(crate) fn gtid_marker(line: &str) -> Option<Gtid> {
    let header = line.strip_prefix('#')?;
    if !header.starts_with(|c: char| c.is_ascii_digit()) || !header.contains(" server id ") {
        return None;
    }
    let (_, rest) = header.split_once("\tGTID ")?;
    let text = rest.split_whitespace().next()?;
    let mut parts = text.splitn(3, '-');
    let domain = parts.next()?.parse().ok()?;
    let server_id = parts.next()?.parse().ok()?;
    let seq = parts.next()?.parse().ok()?;
    Some(Gtid::mariadb(domain, server_id, seq))
}

/// Why what was read is not exactly `wanted`, or `None` when it is: the GTIDs missing, those
/// not asked for, and those found twice.
pub(crate) fn selection_problem(wanted: &GtidSet, found: &Found) -> Option<String> {
    let missing = wanted.subtract(&found.set);
    let unexpected = found.set.subtract(wanted);
    if missing.is_empty() && unexpected.is_empty() && found.repeated.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!(
            "{} missing ({missing}: not in the binlog, purged, or by another server)",
            missing.count()
        ));
    }
    if !unexpected.is_empty() {
        parts.push(format!(
            "{} not asked for ({unexpected})",
            unexpected.count()
        ));
    }
    if !found.repeated.is_empty() {
        let listed: Vec<String> = found
            .repeated
            .iter()
            .take(LISTED_MAX)
            .map(ToString::to_string)
            .collect();
        let more = found.repeated.len().saturating_sub(LISTED_MAX);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        parts.push(format!("found twice: {}{more}", listed.join(",")));
    }
    Some(format!(
        "the events read hold {} transactions ({}), not exactly the errant set {wanted}: {}",
        found.set.count(),
        found.set,
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(Flavor::MariaDb, text).expect("set")
    }

    // docs/design/operator.md#returning-primary: a non-contiguous errant set over two domains
    // and two servers is read run by run, each run with an exclusive start and an inclusive
    // stop in its own domain and server.
    #[test]
    fn each_run_of_the_errant_set_is_one_selection_by_domain_server_and_range() {
        let errant = set("0-1-5..6,0-1-9..10,0-7-7..7,1-7-3..3");
        let selections = Selection::of(&errant);
        assert_eq!(
            selections
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["0-1-5..6", "0-1-9..10", "0-7-7..7", "1-7-3..3"]
        );
        assert_eq!(
            selections[0].args(),
            [
                "--start-position=0-1-4",
                "--stop-position=0-1-6",
                "--do-domain-ids=0",
                "--do-server-ids=1"
            ]
        );
        assert_eq!(
            selections[3].args()[..2],
            ["--start-position=1-7-2", "--stop-position=1-7-3"]
        );
        // A run from the first number starts at the domain's empty position.
        assert_eq!(
            Selection::of(&set("2-3-1..4"))[0].args()[0],
            "--start-position=2-3-0"
        );
    }

    #[test]
    fn an_errant_set_must_parse_be_non_empty_and_not_too_fragmented() {
        assert_eq!(errant_set("0-1-5..6").expect("ok"), set("0-1-5..6"));
        let why = errant_set("0-1").expect_err("bad").to_string();
        assert!(why.contains("read the errant GTID set"), "{why}");
        let why = errant_set("").expect_err("empty").to_string();
        assert!(why.contains("empty"), "{why}");
        let fragmented: Vec<String> = (0..=RUNS_MAX as u64)
            .map(|n| format!("0-1-{}..{}", 2 * n + 1, 2 * n + 1))
            .collect();
        let why = errant_set(&fragmented.join(","))
            .expect_err("too many runs")
            .to_string();
        assert!(why.contains(&format!("more than {RUNS_MAX}")), "{why}");
    }

    // The site holds D-S-N when its gtid_binlog_state has D-S-M with M >= N, whoever wrote
    // the numbers below S's first (module docs): 0-1-5 is held though the state's position
    // items credit 1..=7 to server 7.
    #[test]
    fn a_site_can_hold_what_its_binlog_state_lists_per_server() {
        let held = holdable("0-7-7,0-1-10,1-1-2,1-7-3").expect("state");
        assert!(held.contains(&set("0-1-5..6,0-1-9..10,0-7-7..7,1-7-3..3")));
        assert!(!held.contains(&set("0-1-11..11")));
        assert!(!held.contains(&set("0-9-3..3")), "server 9 never wrote");
        assert!(!held.contains(&set("2-1-1..1")), "no such domain");
        assert!(holdable("").expect("empty").is_empty());
        assert!(holdable("0-1").is_err());
    }

    /// Lines as `mariadb-binlog --verbose` prints them (MariaDB 10.11), trimmed.
    const OUTPUT: &str = "/*!50530 SET @@SESSION.PSEUDO_SLAVE_MODE=1*/;
DELIMITER /*!*/;
# at 4
#700101  0:00:00 server id 1  end_log_pos 0 \tRotate to binlog.000001  pos: 4
#261206 13:02:55 server id 1  end_log_pos 285 CRC32 0x48f73c85 \tGtid list [0-1-4]
# at 1039
#261206 13:03:03 server id 1  end_log_pos 413 CRC32 0x6a3da9ee \tGTID 0-1-5 trans
/*M!100001 SET @@session.gtid_seq_no=5*//*!*/;
START TRANSACTION
insert into app.t values (5,'#261206 13:03:03 server id 1  end_log_pos 1 \tGTID 0-1-99 trans')
#261206 13:03:03 server id 1  end_log_pos 540 CRC32 0x277c7131 \tXid = 24
COMMIT/*!*/;
#261206 13:03:04 server id 1  end_log_pos 713 CRC32 0x0cd0227d \tGTID 0-1-6 cid=17 trans
### INSERT INTO `app`.`t`
### SET
###   @1=6
#261206 13:03:04 server id 7  end_log_pos 900 \tGTID 1-7-3 ddl
-- bloodraven archive: errant transactions 0-1-9..9
#261206 13:03:05 server id 1  end_log_pos 1000 CRC32 0x0cd0227e \tGTID 0-1-9 standalone
";

    #[test]
    fn the_gtids_of_a_binlog_output_are_its_gtid_event_headers() {
        let found = gtids_in(OUTPUT.as_bytes()).expect("read");
        assert_eq!(found.set, set("0-1-5..6,1-7-3..3,0-1-9..9"));
        assert!(found.repeated.is_empty());
        assert_eq!(
            gtid_marker("#261206 13:03:03 server id 1  end_log_pos 413 \tGTID 0-1-x trans"),
            None
        );
        assert_eq!(gtid_marker("### @1='\tGTID 0-1-5'"), None);
        let twice = format!("{OUTPUT}{OUTPUT}");
        let found = gtids_in(twice.as_bytes()).expect("read");
        assert_eq!(found.repeated.len(), 4);
    }

    // The read-back is what makes the archive exact: any difference from the errant set is
    // named, and a run that read nothing is a missing run.
    #[test]
    fn a_selection_that_is_not_exactly_the_errant_set_names_the_difference() {
        let found = gtids_in(OUTPUT.as_bytes()).expect("read");
        assert_eq!(
            selection_problem(&set("0-1-5..6,0-1-9..9,1-7-3..3"), &found),
            None
        );
        let problem = selection_problem(&set("0-1-5..7,0-1-9..9"), &found).expect("differs");
        assert!(problem.contains("1 missing (0-1-7..7"), "{problem}");
        assert!(problem.contains("1 not asked for (1-7-3"), "{problem}");
        let twice = gtids_in(format!("{OUTPUT}{OUTPUT}").as_bytes()).expect("read");
        let problem = selection_problem(&set("0-1-5..6,0-1-9..9,1-7-3..3"), &twice).expect("twice");
        assert!(
            problem.contains("found twice: 0-1-5,0-1-6,1-7-3,0-1-9"),
            "{problem}"
        );
        let none = Found::default();
        let problem = selection_problem(&set("0-1-5..6"), &none).expect("nothing read");
        assert!(problem.contains("2 missing"), "{problem}");
    }

    #[test]
    fn the_manifest_names_each_file_with_its_size_and_sha256() {
        let dir =
            std::env::temp_dir().join(format!("bloodraven-archive-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(ERRANT_BINLOG);
        std::fs::write(&path, b"abc").expect("write");
        let file = describe(&path, ROLE_ERRANT_BINLOG, "0-1-5..6").expect("describe");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(file.name, ERRANT_BINLOG);
        assert_eq!(file.bytes, 3);
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            file.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let manifest = ArchiveManifest {
            name: "a1".to_owned(),
            site: "iad".to_owned(),
            rejoin_id: 4,
            errant_gtid_set: "0-1-5..6".to_owned(),
            created_at: bloodraven_api::Timestamp::from_unix_millis(0),
            files: vec![file],
        };
        assert_eq!(
            summary(&manifest),
            "archived errant set 0-1-5..6 of rejoin 4 in archives/a1: errant.binlog.sql 3 bytes (errant-binlog)"
        );
        let job = archived_job(&manifest);
        assert!(job.is(JobKind::Archive, "a1", 4));
        assert_eq!(job.state, JobState::Succeeded);
        assert_eq!(job.gtid_set.as_deref(), Some("0-1-5..6"));
    }
}
