//! Hand-built histories for the checker, convergence and report tests.

use std::collections::BTreeMap;

use bloodraven_api::sidecar::{ArchiveFile, ArchiveManifest};
use bloodraven_harness::check::archive::{sha256_hex, verify_archive, FileContent};
use bloodraven_harness::history::event::{
    ArchiveRead, Event, EventType, FailoverKind, FailoverRecord, FaultPhase, HeldGtids, Op,
    ProbeOutcome, RestoreRecord, CANARY_ID_BASE,
};
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::Site;

/// The wall-clock time of monotonic 0.
pub fn epoch() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000).expect("valid timestamp")
}

/// The wall time `ms` after the epoch.
pub fn wall(ms: u64) -> jiff::Timestamp {
    epoch() + jiff::SignedDuration::from_millis(i64::try_from(ms).expect("small"))
}

/// The server id the support histories give a site (MariaDB GTIDs `0-<server>-<seq>`).
pub fn server_of(site: Site) -> u32 {
    match site {
        Site::Iad => 1,
        Site::Pdx => 2,
        Site::Reader => 3,
    }
}

/// The GTID the support histories give write `id` acknowledged by `site` (MariaDB text
/// form: domain 0, the site's server id, sequence id + 1).
pub fn gtid_of(site: Site, id: u64) -> String {
    format!("0-{}-{}", server_of(site), id + 1)
}

/// A MariaDB GTID set holding the GTIDs of writes `ids` by `site`, plus `others` GTIDs of
/// other writers (the counter app) on the same server, after every write id.
pub fn gtid_set(site: Site, ids: &[u64], others: u64) -> String {
    let server = server_of(site);
    let mut items: Vec<String> = ids
        .iter()
        .map(|id| format!("0-{server}-{seq}..{seq}", seq = id + 1))
        .collect();
    if others > 0 {
        items.push(format!("0-{server}-900001..{}", 900_000 + others));
    }
    items.join(",")
}

/// Builds a history from operations given at millisecond offsets; events are sorted by time.
#[derive(Default)]
pub struct Builder {
    events: Vec<Event>,
    /// `spec.writeLease.duration` in ms, recorded by the status snapshots that follow.
    lease_ms: Option<u64>,
}

impl Builder {
    /// A builder that goes on from `history`'s events.
    pub fn from_history(history: History) -> Self {
        Builder {
            events: history.events,
            lease_ms: None,
        }
    }

    /// The status snapshots after this one record `spec.writeLease.duration` = `ms`.
    pub fn lease(mut self, ms: u64) -> Self {
        self.lease_ms = Some(ms);
        self
    }

    /// The automatic seal (process `seal`) at `ms` after `active`'s primary was taken away:
    /// `held` as (site, executed, retrieved) GTID set texts, `unread` as (site, why). The
    /// completion is `ok` when nothing was left out, `fail` otherwise.
    pub fn survivors_held(
        mut self,
        ms: u64,
        active: Site,
        held: &[(Site, &str, &str)],
        unread: &[(Site, &str)],
    ) -> Self {
        let trigger =
            format!("kill {{\"kill\":{{\"site\":\"{active}\",\"container\":\"mysql\"}}}}");
        let op = |sites, unread| Op::SurvivorsHeld {
            trigger: trigger.clone(),
            active,
            sites,
            unread,
        };
        self.push(
            "seal",
            EventType::Invoke,
            op(BTreeMap::new(), BTreeMap::new()),
            ms,
        );
        let sites: BTreeMap<Site, HeldGtids> = held
            .iter()
            .map(|(site, executed, retrieved)| {
                (
                    *site,
                    HeldGtids {
                        executed: (*executed).to_owned(),
                        retrieved: (*retrieved).to_owned(),
                    },
                )
            })
            .collect();
        let left_out: BTreeMap<Site, String> = unread
            .iter()
            .map(|(site, why)| (*site, (*why).to_owned()))
            .collect();
        let kind = if left_out.is_empty() {
            EventType::Ok
        } else {
            EventType::Fail
        };
        self.push("seal", kind, op(sites, left_out), ms + 150);
        self
    }

    fn push(&mut self, process: &str, kind: EventType, op: Op, ms: u64) {
        self.events.push(Event {
            process: process.to_owned(),
            kind,
            op,
            wall: wall(ms),
            mono_ns: ms * 1_000_000,
        });
    }

    /// A write of `id` by `process` from `start` to `end` ms with `outcome`; `site` (and the
    /// GTID of [`gtid_of`]) on ok.
    pub fn write(
        self,
        process: &str,
        id: u64,
        start: u64,
        end: u64,
        outcome: EventType,
        site: Option<Site>,
    ) -> Self {
        let gtid = site
            .filter(|_| outcome == EventType::Ok)
            .map(|site| gtid_of(site, id));
        self.raw_write(process, id, start, end, outcome, site, gtid)
    }

    /// A write with an explicit GTID (or none).
    #[allow(clippy::too_many_arguments)]
    pub fn raw_write(
        mut self,
        process: &str,
        id: u64,
        start: u64,
        end: u64,
        outcome: EventType,
        site: Option<Site>,
        gtid: Option<String>,
    ) -> Self {
        self.push(
            process,
            EventType::Invoke,
            Op::Write {
                id,
                site: None,
                gtid: None,
                error: None,
            },
            start,
        );
        let error = (outcome != EventType::Ok).then(|| "timeout".to_owned());
        self.push(
            process,
            outcome,
            Op::Write {
                id,
                site,
                gtid,
                error,
            },
            end,
        );
        self
    }

    /// A site probe of `site` (process `site-probe-<site>`) from `start` to `end` ms, canary
    /// `CANARY_ID_BASE + id`, ending `outcome`: acknowledged (answered by `site`, read_only 0),
    /// refused (error 1290, read_only 1), unknown (`info`, read_only 0) or unreachable.
    pub fn probe(
        mut self,
        site: Site,
        id: u64,
        start: u64,
        end: u64,
        outcome: ProbeOutcome,
    ) -> Self {
        let process = format!("site-probe-{site}");
        let canary_id = CANARY_ID_BASE + id;
        let op = |answered, read_only, outcome, error_code| Op::SiteProbe {
            site,
            pod_ip: Some("10.244.0.9".to_owned()),
            canary_id,
            answered,
            read_only,
            outcome,
            error_code,
            error: None,
        };
        self.push(
            &process,
            EventType::Invoke,
            op(None, None, None, None),
            start,
        );
        let (kind, completion) = match outcome {
            ProbeOutcome::Acknowledged => (
                EventType::Ok,
                op(Some(site), Some(false), Some(outcome), None),
            ),
            ProbeOutcome::Refused => (
                EventType::Fail,
                op(Some(site), Some(true), Some(outcome), Some(1290)),
            ),
            ProbeOutcome::Unknown => (
                EventType::Info,
                op(Some(site), Some(false), Some(outcome), None),
            ),
            ProbeOutcome::Unreachable | ProbeOutcome::NoAddress => {
                (EventType::Fail, op(None, None, Some(outcome), None))
            }
        };
        self.push(&process, kind, completion, end);
        self
    }

    /// Site probes of `site` every `step` ms from `from` to `to` (exclusive), each taking
    /// 5 ms and ending `outcome`; canary ids from `first_id`.
    pub fn probes(
        mut self,
        site: Site,
        first_id: u64,
        from: u64,
        to: u64,
        step: u64,
        outcome: ProbeOutcome,
    ) -> Self {
        let mut id = first_id;
        let mut at = from;
        while at < to {
            self = self.probe(site, id, at, at + 5, outcome);
            id += 1;
            at += step;
        }
        self
    }

    /// An acknowledged write.
    pub fn ok(self, process: &str, id: u64, start: u64, end: u64, site: Site) -> Self {
        self.write(process, id, start, end, EventType::Ok, Some(site))
    }

    /// A sequence of acknowledged writes by `writer-0` every `step` ms from `from` to `to`
    /// (exclusive), each taking `latency` ms, ids from `first_id`.
    pub fn writes(
        mut self,
        first_id: u64,
        from: u64,
        to: u64,
        step: u64,
        latency: u64,
        site: Site,
    ) -> Self {
        let mut id = first_id;
        let mut at = from;
        while at < to {
            self = self.ok("writer-0", id, at, at + latency, site);
            id += 1;
            at += step;
        }
        self
    }

    /// A group status snapshot (pollInterval 2s, failureThreshold 3).
    pub fn status(
        self,
        ms: u64,
        active: Site,
        generation: u64,
        last_failover: Option<FailoverRecord>,
    ) -> Self {
        self.status_with(ms, active, generation, last_failover, Some((2_000, 3)))
    }

    /// A group status snapshot reporting a restore in place (no failover).
    pub fn restore_status(
        self,
        ms: u64,
        active: Site,
        generation: u64,
        restore: RestoreRecord,
    ) -> Self {
        self.push_status(
            ms,
            Op::Status {
                active_site: Some(active),
                topology_generation: generation,
                authority: Some("Valid".to_owned()),
                last_failover: None,
                restore: Some(Box::new(restore)),
                poll_interval_ms: Some(2_000),
                failure_threshold: Some(3),
                lease_ms: None,
            },
        )
    }

    /// A group status snapshot with the spec's (pollInterval ms, failureThreshold), if known.
    pub fn status_with(
        self,
        ms: u64,
        active: Site,
        generation: u64,
        last_failover: Option<FailoverRecord>,
        detection: Option<(u64, u32)>,
    ) -> Self {
        let lease_ms = self.lease_ms;
        self.push_status(
            ms,
            Op::Status {
                active_site: Some(active),
                topology_generation: generation,
                authority: Some("Valid".to_owned()),
                last_failover,
                restore: None,
                poll_interval_ms: detection.map(|(interval, _)| interval),
                failure_threshold: detection.map(|(_, threshold)| threshold),
                lease_ms,
            },
        )
    }

    /// The status reader's invoke, then its completion `read`, at `ms`.
    fn push_status(mut self, ms: u64, read: Op) -> Self {
        self.push("status", EventType::Invoke, Op::status_unknown(), ms);
        self.push("status", EventType::Ok, read, ms);
        self
    }

    fn fault_event(&mut self, name: &str, sites: &[Site], phase: FaultPhase, ms: u64) {
        self.fault_event_detailed(name, sites, phase, ms, "");
    }

    fn fault_event_detailed(
        &mut self,
        name: &str,
        sites: &[Site],
        phase: FaultPhase,
        ms: u64,
        detail: &str,
    ) {
        for kind in [EventType::Invoke, EventType::Ok] {
            self.push(
                "nemesis",
                kind,
                Op::Fault {
                    name: name.to_owned(),
                    phase,
                    detail: detail.to_owned(),
                    sites: sites.to_vec(),
                },
                ms,
            );
        }
    }

    /// A fault started at `start` whose step is `detail` (the scenario's JSON).
    pub fn fault_detailed(mut self, name: &str, sites: &[Site], start: u64, detail: &str) -> Self {
        self.fault_event_detailed(name, sites, FaultPhase::Start, start, detail);
        self
    }

    /// A fault on `sites` from `start` (its effective start) until `end` (if healed).
    pub fn fault(mut self, name: &str, sites: &[Site], start: u64, end: Option<u64>) -> Self {
        self.fault_event(name, sites, FaultPhase::Start, start);
        if let Some(end) = end {
            self.fault_event(name, sites, FaultPhase::End, end);
        }
        self
    }

    /// A fault whose injection was invoked at `invoke` and took effect (its start completed)
    /// at `effective`.
    pub fn fault_taking(mut self, name: &str, sites: &[Site], invoke: u64, effective: u64) -> Self {
        for (kind, at) in [(EventType::Invoke, invoke), (EventType::Ok, effective)] {
            self.push(
                "nemesis",
                kind,
                Op::Fault {
                    name: name.to_owned(),
                    phase: FaultPhase::Start,
                    detail: String::new(),
                    sites: sites.to_vec(),
                },
                at,
            );
        }
        self
    }

    /// An endpoints observation of `-primary`.
    pub fn primary_endpoints(mut self, ms: u64, sites: Vec<Site>) -> Self {
        self.push(
            "endpoints",
            EventType::Invoke,
            Op::Endpoints {
                service: "primary".to_owned(),
                sites: Vec::new(),
            },
            ms,
        );
        self.push(
            "endpoints",
            EventType::Ok,
            Op::Endpoints {
                service: "primary".to_owned(),
                sites,
            },
            ms,
        );
        self
    }

    /// A DNS answer.
    pub fn dns(mut self, ms: u64, site: Site) -> Self {
        self.push(
            "dns",
            EventType::Invoke,
            Op::Dns {
                addresses: Vec::new(),
                site: None,
            },
            ms,
        );
        self.push(
            "dns",
            EventType::Ok,
            Op::Dns {
                addresses: vec!["10.96.0.1".to_owned()],
                site: Some(site),
            },
            ms,
        );
        self
    }

    /// The final read: the ids present per site read.
    pub fn final_state(self, ms: u64, sites: &[(Site, Vec<u64>)]) -> Self {
        self.final_rows(ms, sites, &[], &[])
    }

    /// The final read with the committing site of writes of unknown outcome (`committed`)
    /// and of canary rows (`canaries`), as (id, site).
    pub fn final_rows(
        mut self,
        ms: u64,
        sites: &[(Site, Vec<u64>)],
        committed: &[(u64, Site)],
        canaries: &[(u64, Site)],
    ) -> Self {
        self.push(
            "final",
            EventType::Invoke,
            Op::FinalState {
                sites: BTreeMap::new(),
                committed: BTreeMap::new(),
                canaries: BTreeMap::new(),
            },
            ms,
        );
        self.push(
            "final",
            EventType::Ok,
            Op::FinalState {
                sites: sites.iter().cloned().collect(),
                committed: committed.iter().copied().collect(),
                canaries: canaries.iter().copied().collect(),
            },
            ms,
        );
        self
    }

    /// The harness's read after the final state (process `gtid-state`): the executed sets and
    /// `status.lastFailover` read right after them.
    pub fn gtid_state(
        mut self,
        ms: u64,
        sites: &[(Site, &str)],
        last_failover: Option<FailoverRecord>,
    ) -> Self {
        let unread = Op::GtidState {
            sites: BTreeMap::new(),
            last_failover: None,
            active_site: None,
            error: None,
        };
        self.push("gtid-state", EventType::Invoke, unread, ms);
        self.push(
            "gtid-state",
            EventType::Ok,
            Op::GtidState {
                sites: sites
                    .iter()
                    .map(|(site, set)| (*site, (*set).to_owned()))
                    .collect(),
                last_failover,
                active_site: Some(Site::Pdx),
                error: None,
            },
            ms,
        );
        self
    }

    /// An `archive` expectation's read of `site`'s volume at `ms` (process `archive`, `ok`),
    /// archives counting from `since`.
    pub fn archive_read(
        mut self,
        ms: u64,
        site: Site,
        since: jiff::Timestamp,
        archives: Vec<ArchiveRead>,
    ) -> Self {
        let op = |archives| Op::ArchiveRead {
            site,
            since,
            archives,
        };
        self.push("archive", EventType::Invoke, op(Vec::new()), ms);
        self.push("archive", EventType::Ok, op(archives), ms + 100);
        self
    }

    /// The history, events in time order (stable for equal times).
    pub fn build(mut self) -> History {
        self.events.sort_by_key(|event| event.mono_ns);
        History::new(self.events)
    }
}

/// A failover record with phases [started, detected, fenced, promoted] at ms offsets.
pub fn failover(
    kind: FailoverKind,
    from: Site,
    to: Site,
    phases_ms: [u64; 4],
    lost: Option<u64>,
    exact: bool,
) -> FailoverRecord {
    let [started, detected, fenced, promoted] = phases_ms;
    FailoverRecord {
        kind,
        from,
        to,
        started_at: wall(started),
        detected_at: Some(wall(detected)),
        fenced_at: Some(wall(fenced)),
        promoted_at: Some(wall(promoted)),
        completed_at: Some(wall(promoted + 500)),
        lost_transactions: lost,
        lost_gtid_set: None,
        exact,
    }
}

/// What the operator reports of the emergency failover in [`emergency_with`].
#[derive(Debug, Clone, Default)]
pub struct Reported {
    /// The acknowledged iad writes its lostGtidSet names.
    pub writes: Vec<u64>,
    /// GTIDs of other writers (the counter app) in it.
    pub others: u64,
    /// `exact`.
    pub exact: bool,
}

/// The emergency failover iad -> pdx of [`emergency`]: the kill at 10 s, first failed poll
/// 11 s, detected 16 s (6 s after: the window of pollInterval 2 s x failureThreshold 3),
/// fenced 17 s, promoted 18 s.
pub fn emergency_record(reported: &Reported) -> FailoverRecord {
    let mut record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [11_000, 16_000, 17_000, 18_000],
        None,
        reported.exact,
    );
    record.lost_gtid_set = Some(gtid_set(Site::Iad, &reported.writes, reported.others));
    record.lost_transactions =
        Some(u64::try_from(reported.writes.len()).unwrap_or(u64::MAX) + reported.others);
    record
}

/// A typical emergency failover, valid for every checker when the operator reports the
/// lost writes exactly: iad acknowledges ids 0..100 until it is killed at 10 s (kept down
/// until 40 s); an info write (500) and a failed one (501) during the outage; pdx promoted
/// at 18 s acknowledges ids 1000..1100 from 20 s and ids 2000..2050 after the heal. The
/// final read finds every acknowledged write but `lost_ids` on pdx and the reader, and, when
/// the report is exact, iad readable again with its own 0..100.
pub fn emergency_with(lost_ids: &[u64], reported: &Reported) -> History {
    let record = emergency_record(reported);
    let first = FailoverRecord {
        exact: false,
        ..record.clone()
    };
    let survived: Vec<u64> = (0..100)
        .chain(1000..1100)
        .chain(2000..2050)
        .filter(|id| !lost_ids.contains(id))
        .collect();
    let mut sites = vec![(Site::Pdx, survived.clone()), (Site::Reader, survived)];
    if reported.exact {
        sites.push((Site::Iad, (0..100).collect()));
    }
    Builder::default()
        .status(500, Site::Iad, 1, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .write("writer-1", 500, 10_000, 12_000, EventType::Info, None)
        .write("writer-1", 501, 12_100, 14_100, EventType::Fail, None)
        .status(18_500, Site::Pdx, 2, Some(first))
        .primary_endpoints(19_000, vec![Site::Pdx])
        .dns(25_000, Site::Pdx)
        .writes(1000, 20_000, 30_000, 100, 20, Site::Pdx)
        .writes(2000, 41_000, 46_000, 100, 20, Site::Pdx)
        .status(45_000, Site::Pdx, 2, Some(record))
        .dns(46_000, Site::Pdx)
        .final_state(50_000, &sites)
        .build()
}

/// [`emergency_with`] where the operator names the first `reported` of `lost_ids` (and, past
/// them, `reported - lost_ids.len()` other writers' transactions).
pub fn emergency(lost_ids: &[u64], reported: Option<u64>, exact: bool) -> History {
    let count = usize::try_from(reported.unwrap_or(0)).unwrap_or(usize::MAX);
    let writes: Vec<u64> = lost_ids.iter().copied().take(count).collect();
    let others = reported
        .unwrap_or(0)
        .saturating_sub(u64::try_from(lost_ids.len()).unwrap_or(u64::MAX));
    emergency_with(
        lost_ids,
        &Reported {
            writes,
            others,
            exact,
        },
    )
}

/// What `mariadb-binlog --verbose` prints for the transactions `gtids` (MariaDB 10.11,
/// trimmed): a preamble with the file's `Gtid list`, then per transaction its `# at` line, its
/// GTID event header, a row image in `###` comments and its COMMIT.
pub fn binlog_text(gtids: &[String]) -> String {
    let mut text = String::from(
        "/*!50530 SET @@SESSION.PSEUDO_SLAVE_MODE=1*/;\nDELIMITER /*!*/;\n# at 4\n#700101  0:00:00 server id 1  end_log_pos 0 \tRotate to mysql-bin.000001  pos: 4\n#261206 13:02:55 server id 1  end_log_pos 285 CRC32 0x48f73c85 \tGtid list [0-1-4]\n",
    );
    for (index, gtid) in gtids.iter().enumerate() {
        let server = gtid.split('-').nth(1).unwrap_or("1");
        let at = 1039 + index * 500;
        text.push_str(&format!(
            "-- bloodraven archive: errant transactions {gtid}..{gtid}\n# at {at}\n#261206 13:03:03 server id {server}  end_log_pos {} CRC32 0x6a3da9ee \tGTID {gtid} trans\n/*M!100001 SET @@session.gtid_seq_no={}*//*!*/;\nSTART TRANSACTION\n### INSERT INTO `harness`.`writes`\n### SET\n###   @1={index}\n#261206 13:03:03 server id {server}  end_log_pos {} CRC32 0x277c7131 \tXid = 24\nCOMMIT/*!*/;\n",
            at + 120,
            gtid.rsplit('-').next().unwrap_or("1"),
            at + 400,
        ));
    }
    text.push_str("DELIMITER ;\n# End of log file\n");
    text
}

/// A hand-built archive directory on a site's volume: its manifest's bytes (`None`: none) and
/// the contents of the files it names, as the live reading would hand them over.
#[derive(Debug, Clone)]
pub struct ArchiveFixture {
    /// The directory's name.
    pub name: String,
    /// `manifest.json`.
    pub manifest: Option<Vec<u8>>,
    /// The files read back.
    pub files: BTreeMap<String, FileContent>,
}

impl ArchiveFixture {
    /// The archive `name` of `site` written at `created`, whose manifest names the errant set
    /// `errant_set` and whose errant binlog holds the transactions `binlog_gtids`; its manifest
    /// names both files with their true sizes and SHA-256.
    pub fn new(
        name: &str,
        site: Site,
        created: jiff::Timestamp,
        errant_set: &str,
        binlog_gtids: &[String],
    ) -> Self {
        let binlog = binlog_text(binlog_gtids).into_bytes();
        let dump = b"-- MariaDB dump\nCREATE DATABASE harness;\n".to_vec();
        let file = |name: &str, role: &str, gtid_set: &str, bytes: &[u8]| ArchiveFile {
            name: name.to_owned(),
            role: role.to_owned(),
            gtid_set: gtid_set.to_owned(),
            bytes: u64::try_from(bytes.len()).expect("small"),
            sha256: sha256_hex(bytes),
        };
        let manifest = ArchiveManifest {
            name: name.to_owned(),
            site: site.name().to_owned(),
            rejoin_id: 1_767_225_600,
            errant_gtid_set: errant_set.to_owned(),
            created_at: bloodraven_api::Timestamp::from_unix_millis(created.as_millisecond()),
            files: vec![
                file("errant.binlog.sql", "errant-binlog", errant_set, &binlog),
                file("dump.sql", "dump", "0-1-200", &dump),
            ],
        };
        ArchiveFixture {
            name: name.to_owned(),
            manifest: Some(serde_json::to_vec_pretty(&manifest).expect("manifest")),
            files: BTreeMap::from([
                ("errant.binlog.sql".to_owned(), FileContent::Bytes(binlog)),
                ("dump.sql".to_owned(), FileContent::Bytes(dump)),
            ]),
        }
    }

    /// An intact archive of `site` written at `created` holding exactly `gtids`.
    pub fn holding(name: &str, site: Site, created: jiff::Timestamp, gtids: &[String]) -> Self {
        let set: Vec<String> = gtids.iter().map(|gtid| range_item(gtid)).collect();
        ArchiveFixture::new(name, site, created, &set.join(","), gtids)
    }

    /// Edits the manifest as JSON.
    pub fn edit_manifest(mut self, edit: impl FnOnce(&mut serde_json::Value)) -> Self {
        let mut value: serde_json::Value =
            serde_json::from_slice(self.manifest.as_deref().expect("a manifest")).expect("json");
        edit(&mut value);
        self.manifest = Some(serde_json::to_vec(&value).expect("json"));
        self
    }

    /// What the harness's verification makes of it on `site`'s volume.
    pub fn read(&self, site: Site) -> ArchiveRead {
        verify_archive(&self.name, site, self.manifest.as_deref(), &self.files)
    }
}

/// `D-S-N` as the range item `D-S-N..N`.
pub fn range_item(gtid: &str) -> String {
    let seq = gtid.rsplit('-').next().unwrap_or("0");
    format!("{gtid}..{seq}")
}
