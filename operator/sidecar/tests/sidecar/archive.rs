//! The archive job against real MariaDB (docs/design/operator.md#returning-primary: before a
//! rejoin re-seeds a returning primary, an archive of exactly its errant transactions and a
//! full dump are kept on its backups volume): three `mariadbd` and three in-process sidecars,
//! as in `backup`.

use std::path::{Path, PathBuf};

use bloodraven_api::sidecar::{
    ArchiveManifest, ArchiveRequest, BackupRequest, JobKind, JobState, ARCHIVES_DIR,
    ARCHIVE_MANIFEST, PATH_ARCHIVE, PATH_BACKUP,
};
use bloodraven_mysql::{
    live::sandbox::{ADMIN_PASSWORD, ADMIN_USER},
    Flavor, Gtid, GtidSet,
};

use crate::backup::{
    backup_root, binlog_state, fence_iad, finished, ids, post, sql, writable, SLACK,
};
use crate::support::{Playground, GROUP};

/// Runs `statement` on iad as the admin user, after `session` (a session variable: another
/// server id or domain) when given; returns the GTID it was binlogged under.
async fn write_on_iad(playground: &Playground, session: Option<&str>, statement: &str) -> Gtid {
    let admin = playground.server(0).admin_client();
    let mut conn = admin.connect().await.expect("admin connects");
    if let Some(session) = session {
        admin.execute(&mut conn, session).await.expect(session);
    }
    admin.execute(&mut conn, statement).await.expect(statement);
    let text = admin
        .rows(&mut conn, "SELECT @@SESSION.last_gtid AS g")
        .await
        .expect("last_gtid")
        .remove(0)
        .remove("g")
        .flatten()
        .expect("a GTID");
    gtid(&text)
}

fn gtid(text: &str) -> Gtid {
    let parts: Vec<&str> = text.split('-').collect();
    let number = |index: usize| parts[index].parse::<u64>().expect(text);
    Gtid::mariadb(
        u32::try_from(number(0)).expect("domain"),
        u32::try_from(number(1)).expect("server id"),
        number(2),
    )
}

fn set(text: &str) -> GtidSet {
    GtidSet::parse(Flavor::MariaDb, text).expect(text)
}

/// The items of a `gtid_binlog_state`, sorted (the server lists them in its own order).
fn items(state: &str) -> Vec<String> {
    let mut items: Vec<String> = state
        .split(',')
        .map(|item| item.trim().to_owned())
        .collect();
    items.sort();
    items
}

fn request(name: &str, rejoin_id: u64, errant: &str) -> ArchiveRequest {
    ArchiveRequest {
        group: GROUP.to_owned(),
        name: name.to_owned(),
        rejoin_id,
        errant_gtid_set: errant.to_owned(),
    }
}

fn archives(root: &Path) -> PathBuf {
    root.join("iad").join(ARCHIVES_DIR)
}

/// Every manifest under the site's archives directory.
fn manifests(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(archives(root)) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(ARCHIVE_MANIFEST))
        .filter(|path| path.exists())
        .collect()
}

/// The GTIDs of a `mariadb-binlog` output, read here independently of the sidecar: the
/// header lines of its GTID events, `#<date> <time> server id S ... \tGTID D-S-N ...`.
fn binlog_gtids(text: &str) -> Vec<Gtid> {
    text.lines()
        .filter(|line| line.starts_with('#') && line.contains(" server id "))
        .filter_map(|line| line.split_once("\tGTID "))
        .map(|(_, rest)| gtid(rest.split_whitespace().next().expect("a GTID")))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

async fn error_of(playground: &Playground, body: &ArchiveRequest) -> (reqwest::StatusCode, String) {
    let (status, body) = post(playground, 0, PATH_ARCHIVE, body).await;
    (
        status,
        body["error"].as_str().unwrap_or_default().to_owned(),
    )
}

// docs/design/operator.md#returning-primary: iad writes while pdx and the reader no longer
// replicate, under two server ids and in two domains; those writes are errant relative to pdx.
// Fenced, iad archives them: the binlog file holds exactly them (each once, nothing else),
// the manifest's sizes and SHA-256 match the files, and the dump loads into another server
// with every row. An unfenced site and a set the site does not hold are refused; the same
// request again is answered with the finished job, also after a restart from the manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_site_archives_exactly_its_errant_transactions_and_a_dump() {
    let root = backup_root("archive");
    let mut playground = writable(&root).await;
    sql(&playground, 0, "CREATE DATABASE app").await;
    sql(
        &playground,
        0,
        "CREATE TABLE app.items (id INT PRIMARY KEY, note VARCHAR(40)) ENGINE=InnoDB",
    )
    .await;
    sql(
        &playground,
        0,
        "INSERT INTO app.items VALUES (1, 'shared-1'), (2, 'shared-2')",
    )
    .await;
    let iad = playground.server(0).admin_client();
    let pdx = playground.server(1).admin_client();
    let started = tokio::time::Instant::now();
    while binlog_state(&pdx).await != binlog_state(&iad).await {
        assert!(started.elapsed() < SLACK * 4, "pdx does not follow iad");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for index in [1, 2] {
        sql(&playground, index, "STOP ALL SLAVES").await;
    }
    let pdx_state = binlog_state(&pdx).await;

    // The errant writes: two runs of server 1 around one of server 7, and one in domain 1.
    let mut errant = GtidSet::empty(Flavor::MariaDb);
    for (session, statement) in [
        (None, "INSERT INTO app.items VALUES (4, 'errant-a')"),
        (None, "INSERT INTO app.items VALUES (5, 'errant-b')"),
        (
            Some("SET SESSION server_id = 7"),
            "INSERT INTO app.items VALUES (6, 'errant-c')",
        ),
        (None, "INSERT INTO app.items VALUES (7, 'errant-d')"),
        (
            Some("SET SESSION gtid_domain_id = 1"),
            "INSERT INTO app.items VALUES (100, 'errant-e')",
        ),
    ] {
        errant.insert(write_on_iad(&playground, session, statement).await);
    }
    assert_eq!(errant.count(), 5, "{errant}");
    assert_eq!(
        errant.mariadb_runs().len(),
        4,
        "non-contiguous, two servers, two domains: {errant}"
    );
    let pdx_set = set(&pdx_state);
    for (domain, _, first, _) in errant.mariadb_runs() {
        assert!(
            pdx_set
                .domain_last_seq(domain)
                .is_none_or(|last| last < first),
            "pdx ({pdx_state}) lacks every errant transaction ({errant})"
        );
    }
    let errant_text = errant.to_string();

    // Refused while not fenced.
    let archive = request("a1", 3, &errant_text);
    let (status, error) = error_of(&playground, &archive).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{error}");
    assert!(error.contains("no explicit fence"), "{error}");
    fence_iad(&playground).await;
    let at_fence = binlog_state(&iad).await;

    // Refused: a set the site does not hold, by a server that never wrote, unreadable, empty,
    // a bad name, another group.
    let beyond = errant.union(&set(&format!(
        "0-1-{}..{}",
        errant.domain_last_seq(0).expect("domain 0") + 10,
        errant.domain_last_seq(0).expect("domain 0") + 10
    )));
    for (body, wanted_status, fragment) in [
        (
            request("a1", 3, &beyond.to_string()),
            reqwest::StatusCode::CONFLICT,
            "does not hold",
        ),
        (
            request("a1", 3, "0-9-1..1"),
            reqwest::StatusCode::CONFLICT,
            "does not hold 0-9-1",
        ),
        (
            request("a1", 3, "0-1"),
            reqwest::StatusCode::BAD_REQUEST,
            "read the errant GTID set",
        ),
        (
            request("a1", 3, ""),
            reqwest::StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            request("../a1", 3, &errant_text),
            reqwest::StatusCode::BAD_REQUEST,
            "backup name",
        ),
        (
            ArchiveRequest {
                group: "other".to_owned(),
                ..request("a1", 3, &errant_text)
            },
            reqwest::StatusCode::CONFLICT,
            "serves group",
        ),
    ] {
        let (status, error) = error_of(&playground, &body).await;
        assert_eq!(status, wanted_status, "{body:?}: {error}");
        assert!(error.contains(fragment), "{body:?}: {error}");
    }
    assert!(manifests(&root.0).is_empty(), "a refusal writes nothing");
    // No backup may take the archives' directory.
    let (status, body) = post(
        &playground,
        0,
        PATH_BACKUP,
        &BackupRequest {
            group: GROUP.to_owned(),
            name: ARCHIVES_DIR.to_owned(),
        },
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{body}");

    // The archive.
    let (status, body) = post(&playground, 0, PATH_ARCHIVE, &archive).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Archive, "a1", 3).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.gtid_set.as_deref(), Some(errant_text.as_str()));
    let message = job.message.clone().unwrap_or_default();
    assert!(
        message.contains("errant.binlog.sql") && message.contains("dump.sql"),
        "{message}"
    );

    // Read back: the manifest, each file's size and checksum, nothing partial beside them.
    let dir = archives(&root.0).join("a1");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("archive directory")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dump.sql", "errant.binlog.sql", "manifest.json"]);
    let manifest: ArchiveManifest =
        serde_json::from_slice(&std::fs::read(dir.join(ARCHIVE_MANIFEST)).expect("manifest"))
            .expect("manifest reads");
    assert_eq!(
        (
            manifest.name.as_str(),
            manifest.site.as_str(),
            manifest.rejoin_id
        ),
        ("a1", "iad", 3)
    );
    assert_eq!(set(&manifest.errant_gtid_set), errant);
    assert_eq!(manifest.files.len(), 2, "{manifest:?}");
    for file in &manifest.files {
        let bytes = std::fs::read(dir.join(&file.name)).expect("archived file");
        assert_eq!(file.bytes, bytes.len() as u64, "{file:?}");
        assert_eq!(file.sha256, sha256_hex(&bytes), "{file:?}");
    }
    let binlog_file = &manifest.files[0];
    assert_eq!(
        (binlog_file.name.as_str(), binlog_file.role.as_str()),
        ("errant.binlog.sql", "errant-binlog")
    );
    assert_eq!(set(&binlog_file.gtid_set), errant);
    let dump_file = &manifest.files[1];
    assert_eq!(
        (dump_file.name.as_str(), dump_file.role.as_str()),
        ("dump.sql", "dump")
    );
    assert_eq!(
        items(&dump_file.gtid_set),
        items(&at_fence),
        "the dump's snapshot set is the binlog state iad was fenced at"
    );

    // The binlog file holds exactly the errant transactions, each once.
    let text = std::fs::read_to_string(dir.join("errant.binlog.sql")).expect("binlog file");
    let found = binlog_gtids(&text);
    assert_eq!(found.len(), 5, "each once: {found:?}");
    let mut found_set = GtidSet::empty(Flavor::MariaDb);
    for gtid in found {
        found_set.insert(gtid);
    }
    assert_eq!(found_set, errant);
    for note in ["errant-a", "errant-b", "errant-c", "errant-d", "errant-e"] {
        assert!(text.contains(note), "{note} is in the binlog file");
    }
    assert!(
        !text.contains("shared-1"),
        "nothing before the errant writes"
    );

    // The dump loads (into pdx, as a re-seed would) with every row iad holds.
    let dump = std::fs::File::open(dir.join("dump.sql")).expect("dump");
    let options = playground.server(1).options(ADMIN_USER, ADMIN_PASSWORD);
    let loaded = std::process::Command::new("mariadb")
        .arg("--no-defaults")
        .arg(format!("--host={}", options.host))
        .arg(format!("--port={}", options.port))
        .arg("--protocol=TCP")
        .arg(format!("--user={}", options.user))
        .arg("--init-command=SET SESSION sql_log_bin = 0")
        .env("MYSQL_PWD", &options.password)
        .stdin(dump)
        .output()
        .expect("run mariadb");
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    assert_eq!(
        ids(&playground, 1).await,
        ["1", "2", "4", "5", "6", "7", "100"]
    );
    assert_eq!(ids(&playground, 1).await, ids(&playground, 0).await);

    // Asked again: the finished job. The same name for another rejoin: refused.
    let (status, body) = post(&playground, 0, PATH_ARCHIVE, &archive).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["state"], "Succeeded", "{body}");
    let (status, error) = error_of(&playground, &request("a1", 4, &errant_text)).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{error}");
    assert!(error.contains("never overwritten"), "{error}");
    // After a restart that forgot the job (and the fence), the manifest answers.
    // The sidecar's record of its last job on the volume (`last-job.json`).
    std::fs::remove_file(root.0.join("iad").join("last-job.json")).expect("last job");
    playground.restart_sidecar(0).await;
    assert!(playground.status(0).await.job.is_none());
    let (status, body) = post(&playground, 0, PATH_ARCHIVE, &archive).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["state"], "Succeeded", "{body}");
    assert_eq!(body["gtidSet"], errant_text.as_str(), "{body}");
}

// docs/design/operator.md#returning-primary: an archive never counts unless it holds exactly
// the errant set. A set credited to the wrong server (the site's binlog state allows it, its
// binlog does not hold it), a run over another server's transaction, and a set whose binlog
// was purged all fail, naming what is missing, and leave no manifest and no files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_whose_selection_is_not_the_errant_set_fails_and_leaves_no_manifest() {
    let root = backup_root("archive-fail");
    let playground = writable(&root).await;
    sql(&playground, 0, "CREATE DATABASE app").await;
    sql(
        &playground,
        0,
        "CREATE TABLE app.items (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await;
    let by_one = write_on_iad(&playground, None, "INSERT INTO app.items VALUES (1)").await;
    let by_seven = write_on_iad(
        &playground,
        Some("SET SESSION server_id = 7"),
        "INSERT INTO app.items VALUES (2)",
    )
    .await;
    let last = write_on_iad(&playground, None, "INSERT INTO app.items VALUES (3)").await;
    assert_eq!(by_seven.seq(), by_one.seq() + 1);
    fence_iad(&playground).await;

    // Server 7's binlog state entry (0-7-k+1) lets it hold 0-7-k; the binlog has it by server 1.
    let miscredited = format!("0-7-{}..{}", by_one.seq(), by_one.seq());
    let (status, body) = post(
        &playground,
        0,
        PATH_ARCHIVE,
        &request("wrong", 5, &miscredited),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Archive, "wrong", 5).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    // mariadb-binlog finds no 0-7-k and says so (it exits 1); the message names the range.
    let message = job.message.unwrap_or_default();
    assert!(
        message.contains(&format!("{miscredited} from the binlog")),
        "{message}"
    );
    assert_eq!(job.gtid_set, None);
    assert!(manifests(&root.0).is_empty());
    assert!(
        !archives(&root.0).join("wrong").exists(),
        "its files removed"
    );

    // A run over a number server 7 wrote: mariadb-binlog reads the run without complaint
    // (0-1-k and 0-1-k+2), and the read-back names what is missing.
    let over = format!("0-1-{}..{}", by_one.seq(), last.seq());
    let (status, body) = post(&playground, 0, PATH_ARCHIVE, &request("over", 7, &over)).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Archive, "over", 7).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let message = job.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "1 missing (0-1-{}..{}",
            by_seven.seq(),
            by_seven.seq()
        )),
        "{message}"
    );
    assert!(manifests(&root.0).is_empty());
    assert!(
        !archives(&root.0).join("over").exists(),
        "its files removed"
    );

    // The binlog holding the last write purged: the state still lists it, the binlog lacks it.
    // (No replica reads it any more: a binlog a replica's dump thread holds is not purged.)
    for index in [1, 2] {
        sql(&playground, index, "STOP ALL SLAVES").await;
    }
    sql(&playground, 0, "FLUSH BINARY LOGS").await;
    let admin = playground.server(0).admin_client();
    let mut conn = admin.connect().await.expect("admin connects");
    let current = admin
        .rows(&mut conn, "SHOW MASTER STATUS")
        .await
        .expect("master status")
        .remove(0)
        .remove("File")
        .flatten()
        .expect("current binlog");
    drop(conn);
    // Retried: a binlog is purged only once the replicas' dump threads are gone and mysqld's
    // binlog checkpoint has moved past it.
    let started = tokio::time::Instant::now();
    loop {
        sql(&playground, 0, &format!("PURGE BINARY LOGS TO '{current}'")).await;
        let mut conn = admin.connect().await.expect("admin connects");
        let logs = admin
            .rows(&mut conn, "SHOW BINARY LOGS")
            .await
            .expect("binary logs");
        if logs.len() == 1 {
            break;
        }
        assert!(
            started.elapsed() < SLACK * 8,
            "purge to {current}: {logs:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let purged = format!("0-1-{}..{}", last.seq(), last.seq());
    let (status, body) = post(&playground, 0, PATH_ARCHIVE, &request("purged", 6, &purged)).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Archive, "purged", 6).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let message = job.message.unwrap_or_default();
    assert!(message.contains(&purged), "{message}");
    assert!(manifests(&root.0).is_empty());
    assert!(
        !archives(&root.0).join("purged").exists(),
        "its files removed"
    );
}
