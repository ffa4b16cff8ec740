//! Hand-built histories for checker and report tests.

#![allow(dead_code)]

use bloodraven_harness::history::event::{
    Event, EventType, FailoverKind, FailoverRecord, FaultPhase, Op,
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

/// The GTID the support histories give write `id` acknowledged by `site` (MariaDB text
/// form: domain 0, the site's server id (iad 1, pdx 2, reader 3), sequence id + 1).
pub fn gtid_of(site: Site, id: u64) -> String {
    let server = match site {
        Site::Iad => 1,
        Site::Pdx => 2,
        Site::Reader => 3,
    };
    format!("0-{server}-{}", id + 1)
}

/// Builds a history from operations given at millisecond offsets; events are sorted by time.
#[derive(Default)]
pub struct Builder {
    events: Vec<Event>,
}

impl Builder {
    fn push(&mut self, process: &str, kind: EventType, op: Op, ms: u64) {
        self.events.push(Event {
            process: process.to_owned(),
            kind,
            op,
            wall: wall(ms),
            mono_ns: ms * 1_000_000,
        });
    }

    /// A write of `id` by `process` from `start` to `end` ms with `outcome`; `site` on ok.
    pub fn write(
        mut self,
        process: &str,
        id: u64,
        start: u64,
        end: u64,
        outcome: EventType,
        site: Option<Site>,
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
        let gtid = site
            .filter(|_| outcome == EventType::Ok)
            .map(|site| gtid_of(site, id));
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

    /// A group status snapshot.
    pub fn status(
        mut self,
        ms: u64,
        active: Site,
        generation: u64,
        last_failover: Option<FailoverRecord>,
    ) -> Self {
        self.push(
            "status",
            EventType::Invoke,
            Op::Status {
                active_site: None,
                topology_generation: 0,
                authority: None,
                last_failover: None,
            },
            ms,
        );
        self.push(
            "status",
            EventType::Ok,
            Op::Status {
                active_site: Some(active),
                topology_generation: generation,
                authority: Some("Valid".to_owned()),
                last_failover,
            },
            ms,
        );
        self
    }

    /// A fault interval.
    pub fn fault(mut self, name: &str, start: u64, end: Option<u64>) -> Self {
        self.push(
            "nemesis",
            EventType::Invoke,
            Op::Fault {
                name: name.to_owned(),
                phase: FaultPhase::Start,
                detail: String::new(),
            },
            start,
        );
        self.push(
            "nemesis",
            EventType::Ok,
            Op::Fault {
                name: name.to_owned(),
                phase: FaultPhase::Start,
                detail: String::new(),
            },
            start,
        );
        if let Some(end) = end {
            self.push(
                "nemesis",
                EventType::Invoke,
                Op::Fault {
                    name: name.to_owned(),
                    phase: FaultPhase::End,
                    detail: String::new(),
                },
                end,
            );
            self.push(
                "nemesis",
                EventType::Ok,
                Op::Fault {
                    name: name.to_owned(),
                    phase: FaultPhase::End,
                    detail: String::new(),
                },
                end,
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

    /// The final read.
    pub fn final_state(mut self, ms: u64, ids: Vec<u64>) -> Self {
        self.push(
            "final",
            EventType::Invoke,
            Op::FinalState { ids: Vec::new() },
            ms,
        );
        self.push("final", EventType::Ok, Op::FinalState { ids }, ms);
        self
    }

    /// The history, events in time order (stable for equal times).
    pub fn build(mut self) -> History {
        self.events.sort_by_key(|event| event.mono_ns);
        History::new(self.events)
    }
}

/// A failover record with phases at the given ms offsets.
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
        exact,
    }
}

/// A typical emergency failover: writes on iad until it dies at 10s (ids 0..100), writes
/// on pdx from 20s (ids 1000..), the kill at 10s, detection at 16s, fenced 17s, promoted 18s.
pub fn emergency(lost_ids: &[u64], reported: Option<u64>, exact: bool) -> History {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [16_000, 16_000, 17_000, 18_000],
        reported,
        exact,
    );
    let acknowledged_iad: Vec<u64> = (0..100).collect();
    let acknowledged_pdx: Vec<u64> = (1000..1100).collect();
    let final_ids: Vec<u64> = acknowledged_iad
        .iter()
        .chain(&acknowledged_pdx)
        .copied()
        .filter(|id| !lost_ids.contains(id))
        .collect();
    Builder::default()
        .status(500, Site::Iad, 1, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .fault("kill", 10_000, Some(40_000))
        .write("writer-0", 500, 10_000, 12_000, EventType::Info, None)
        .write("writer-0", 501, 12_100, 14_100, EventType::Fail, None)
        .status(18_500, Site::Pdx, 2, Some(record.clone()))
        .primary_endpoints(19_000, vec![Site::Pdx])
        .dns(25_000, Site::Pdx)
        .writes(1000, 20_000, 30_000, 100, 20, Site::Pdx)
        .status(
            45_000,
            Site::Pdx,
            2,
            Some(FailoverRecord { exact, ..record }),
        )
        .final_state(50_000, final_ids)
        .build()
}
