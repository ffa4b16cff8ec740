//! The harness's side of the in-cluster workload ([`crate::incluster`],
//! docs/design/harness.md#one-run, step 3): [`InClusterWorkload`] starts a run in the workload
//! pod with `bloodraven-workload ctl` through the Kubernetes API's exec, streams the run's log
//! back with `bloodraven-workload follow` (again through exec, followed again from the first
//! missing line whenever the stream breaks) and records each event into the scenario's
//! [`Recorder`]. The group's status and the Services' endpoints are still probed here, through
//! the API ([`workload::LiveWorkload::start_api_probes`]).
//!
//! Time: the pod's events carry its wall clock and its monotonic clock since the run started.
//! One offset places the run on the recorder's axis, read once from the run's anchor
//! ([`Recorder::mono_at_wall`] of the anchor's wall time); every event's time is that offset
//! plus its pod monotonic time ([`map_mono`]), so intervals within the workload are the pod's
//! monotonic clock's, and only the placement of the whole run depends on the two wall clocks
//! agreeing (they share the machine on localkube and kind; elsewhere NTP's skew).
//!
//! Completeness: on stop the pod reports how many lines its run wrote; lines the harness lacks
//! then are followed again once; lines still missing are recorded as an [`Op::WorkloadGap`]
//! (never dropped silently), which fails the workload liveness checker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, ListParams};
use kube::Client;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;
use tokio::task::JoinHandle;

use super::{topology, workload};
use crate::backend::Workload;
use crate::error::{Error, Result};
use crate::history::event::{Event, EventType, Op};
use crate::history::recorder::Recorder;
use crate::incluster::control::{self, Request, RunRef, StartRun};
use crate::incluster::lines::{parse_line, End, EventLine, LineBuffer, RunLine};
use crate::incluster::oneshot::HttpAnswer;
use crate::scenario::model::Site;

/// The workload's image repository (`bloodraven/workload:<version>`).
pub const WORKLOAD_IMAGE_REPOSITORY: &str = "bloodraven/workload";
/// The workload container's name in its pod.
pub const WORKLOAD_CONTAINER: &str = "workload";
/// The label selector of the workload's pods.
pub const WORKLOAD_SELECTOR: &str = "app.kubernetes.io/name=bloodraven-workload";
/// The binary in the workload image.
pub const WORKLOAD_BINARY: &str = "bloodraven-workload";
/// The process the gap events are recorded by.
pub const GAP_PROCESS: &str = "workload-log";
/// Consecutive broken `follow` streams (without a new line in between) before the harness
/// stops following until the run's stop.
pub const FOLLOW_RESTARTS_MAX: u32 = 20;
/// The pause before following again after a broken stream.
pub const FOLLOW_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long the follow stream may take to deliver the end line after the run stopped.
pub const STOP_DRAIN_MAX: Duration = Duration::from_secs(30);
/// The bound on the one `follow` run again after the stop for lines still missing.
pub const REFOLLOW_MAX: Duration = Duration::from_secs(30);
/// Attempts at `ctl stop` (a stop answered from the run's end line is idempotent).
pub const STOP_ATTEMPTS_MAX: u32 = 3;
/// The bound on one `ctl` exec (a stop drains operations of a few seconds each).
pub const CTL_EXEC_MAX: Duration = Duration::from_secs(90);
/// How often the site Services' ClusterIPs are read again while some are missing (a DNS
/// answer names a site by them).
pub const SITE_IPS_REFRESH: Duration = Duration::from_secs(2);

fn workload_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Workload {
        action: action.into(),
        reason: reason.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Pure: mapping, reassembly, gaps.

/// A pod monotonic time on the recorder's axis: `offset_ns` (where the pod's monotonic 0
/// falls, [`Recorder::mono_at_wall`] of the anchor's wall time) plus `pod_mono_ns`, clamped
/// to the axis (an event before the recorder started is placed at 0).
pub fn map_mono(offset_ns: i128, pod_mono_ns: u64) -> u64 {
    let mono = offset_ns + i128::from(pod_mono_ns);
    u64::try_from(mono.max(0)).unwrap_or(u64::MAX)
}

/// A pod event as a history event on the recorder's axis.
pub fn to_event(line: EventLine, offset_ns: i128) -> Event {
    Event {
        process: line.process,
        kind: line.kind,
        op: line.op,
        wall: line.wall,
        mono_ns: map_mono(offset_ns, line.mono_ns),
    }
}

/// Names the site of a DNS answer of one address by the site Services' ClusterIPs (the pod
/// cannot read them: its API access is reading pods), as the harness's own probe did.
pub fn name_dns_site(event: &mut Event, site_ips: &BTreeMap<String, Site>) {
    if let Op::Dns { addresses, site } = &mut event.op {
        if site.is_none() {
            if let [one] = addresses.as_slice() {
                *site = site_ips.get(one).copied();
            }
        }
    }
}

/// `3-7, 12` for the ranges `[(3, 7), (12, 12)]`.
pub fn format_ranges(ranges: &[(u64, u64)]) -> String {
    ranges
        .iter()
        .map(|(from, to)| {
            if from == to {
                from.to_string()
            } else {
                format!("{from}-{to}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lines of one run received so far, in whatever order and however often they came.
#[derive(Debug, Clone, Default)]
pub struct RunStream {
    offset_ns: Option<i128>,
    received: BTreeSet<u64>,
    /// Events received before the anchor: placed once it arrives.
    pending: Vec<EventLine>,
    end: Option<(u64, End)>,
    bad_lines: Vec<String>,
}

impl RunStream {
    /// Takes one line: returns the events to record now, on the recorder's axis (`mono_at_wall`
    /// places the anchor). A seq seen before (a follow run again from an earlier line) is
    /// ignored; a line out of order is taken where it belongs (the history is ordered by
    /// time, [`Recorder::snapshot`]).
    pub fn accept(
        &mut self,
        line: RunLine,
        mono_at_wall: impl FnOnce(jiff::Timestamp) -> i128,
    ) -> Vec<Event> {
        if !self.received.insert(line.seq()) {
            return Vec::new();
        }
        match line {
            RunLine::Anchor(anchor) => {
                let offset = mono_at_wall(anchor.wall) - i128::from(anchor.mono_ns);
                self.offset_ns = Some(offset);
                std::mem::take(&mut self.pending)
                    .into_iter()
                    .map(|event| to_event(event, offset))
                    .collect()
            }
            RunLine::Event(event) => match self.offset_ns {
                Some(offset) => vec![to_event(*event, offset)],
                None => {
                    self.pending.push(*event);
                    Vec::new()
                }
            },
            RunLine::End { seq, end } => {
                self.end = Some((seq, end));
                Vec::new()
            }
        }
    }

    /// Notes a line that could not be read (its seq is unknown: it stays missing).
    pub fn bad_line(&mut self, why: String) {
        self.bad_lines.push(why);
    }

    /// Lines received.
    pub fn received(&self) -> usize {
        self.received.len()
    }

    /// The end line, once received.
    pub fn end(&self) -> Option<&(u64, End)> {
        self.end.as_ref()
    }

    /// Where a new `follow` starts: the first line not received.
    pub fn next_from(&self) -> u64 {
        let mut next = 0;
        for seq in &self.received {
            if *seq != next {
                break;
            }
            next += 1;
        }
        next
    }

    /// The ranges of lines missing from 0 through `last_seq` (the end line's seq; without one
    /// known, through the highest received).
    pub fn missing(&self, last_seq: Option<u64>) -> Vec<(u64, u64)> {
        let Some(last) = last_seq.or_else(|| self.received.last().copied()) else {
            return Vec::new();
        };
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut next = 0;
        for seq in self.received.range(..=last) {
            if *seq > next {
                ranges.push((next, seq - 1));
            }
            next = seq + 1;
        }
        if next <= last {
            ranges.push((next, last));
        }
        ranges
    }

    /// Whether the end line and every line before it arrived.
    pub fn is_complete(&self) -> bool {
        self.end
            .as_ref()
            .is_some_and(|(seq, _)| self.missing(Some(*seq)).is_empty())
    }

    /// The gap to record once the run stopped, if any: lines missing through `last_seq` (the
    /// stop's answer, else the end line's), events never written or left unplaced, and
    /// `extra` reasons (the stop failed, the follow stream gave up). `None` when complete.
    pub fn gap(&self, run: &str, last_seq: Option<u64>, extra: &[String]) -> Option<Op> {
        let last_seq = last_seq.or(self.end.as_ref().map(|(seq, _)| *seq));
        let missing = self.missing(last_seq);
        let mut count: u64 = missing.iter().map(|(from, to)| to - from + 1).sum();
        let mut reasons: Vec<String> = Vec::new();
        if !missing.is_empty() {
            reasons.push(format!(
                "{count} lines never arrived through `follow`, nor when it was run again from the first missing line"
            ));
        }
        if last_seq.is_none() {
            reasons.push(
                "the run's length is unknown: neither its stop nor its end line was received"
                    .to_owned(),
            );
        }
        if let Some((_, end)) = &self.end {
            if end.unwritten > 0 {
                count += end.unwritten;
                reasons.push(format!("the pod could not write {} events", end.unwritten));
            }
            if let Some(why) = &end.aborted {
                reasons.push(format!("the run was aborted: {why}"));
            }
        }
        if self.offset_ns.is_none() && !self.pending.is_empty() {
            reasons.push(format!(
                "the anchor never arrived, so {} events received could not be placed on the history's time axis",
                self.pending.len()
            ));
        }
        if !self.bad_lines.is_empty() {
            reasons.push(format!(
                "{} lines could not be read, the first: {}",
                self.bad_lines.len(),
                self.bad_lines[0]
            ));
        }
        reasons.extend(extra.iter().cloned());
        (!reasons.is_empty()).then(|| Op::WorkloadGap {
            run: run.to_owned(),
            missing: format_ranges(&missing),
            missing_count: count,
            reason: reasons.join("; "),
        })
    }
}

/// How one `follow` exec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowExit {
    /// `follow` printed the end line and exited 0.
    Ended,
    /// `follow` exited [`crate::incluster::follow::EXIT_ABANDONED`]: the run has no end line
    /// and never will.
    Abandoned(String),
    /// The stream broke (or `follow` failed): follow again from the first missing line.
    Broken(String),
}

/// The exit code an exec's status reports (`details.causes[reason=ExitCode]`).
pub fn exit_code(status: &Status) -> Option<i32> {
    status
        .details
        .as_ref()?
        .causes
        .as_ref()?
        .iter()
        .find(|cause| cause.reason.as_deref() == Some("ExitCode"))?
        .message
        .as_deref()?
        .parse()
        .ok()
}

/// How a `follow` exec ended, from its status, its standard error and a read error.
pub fn follow_exit(status: Option<&Status>, stderr: &str, read_error: Option<&str>) -> FollowExit {
    match status {
        Some(status) if status.status.as_deref() == Some("Success") => FollowExit::Ended,
        Some(status) if exit_code(status) == Some(crate::incluster::follow::EXIT_ABANDONED) => {
            FollowExit::Abandoned(stderr.trim().to_owned())
        }
        Some(status) => FollowExit::Broken(format!(
            "follow failed: {} {}",
            status.message.as_deref().unwrap_or_default(),
            stderr.trim()
        )),
        None => FollowExit::Broken(match read_error {
            Some(error) => format!("the exec stream broke: {error}"),
            None => "the exec stream ended without a status".to_owned(),
        }),
    }
}

// ---------------------------------------------------------------------------------------
// The workload pod, through the API's exec.

/// One workload pod, reached through the Kubernetes API's exec.
#[derive(Clone)]
pub struct WorkloadPod {
    client: Client,
    namespace: String,
    pod: String,
    container: String,
    /// The daemon's `--dir` when not the default.
    dir: Option<String>,
}

impl std::fmt::Debug for WorkloadPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadPod")
            .field("namespace", &self.namespace)
            .field("pod", &self.pod)
            .finish()
    }
}

use super::exec::ExecOutput;

impl WorkloadPod {
    /// The pod `pod` in `namespace` (container [`WORKLOAD_CONTAINER`], default dir).
    pub fn new(client: Client, namespace: &str, pod: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            container: WORKLOAD_CONTAINER.to_owned(),
            dir: None,
        }
    }

    /// With the daemon's `--dir`.
    pub fn with_dir(mut self, dir: &str) -> Self {
        self.dir = Some(dir.to_owned());
        self
    }

    /// The running workload pod of `namespace` ([`WORKLOAD_SELECTOR`]): running, ready and
    /// not being deleted.
    pub async fn find(client: Client, namespace: &str) -> Result<Self> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let list = pods
            .list(&ListParams::default().labels(WORKLOAD_SELECTOR))
            .await
            .map_err(|e| workload_error(format!("list the workload pods in {namespace}"), e))?;
        let names: Vec<String> = list
            .iter()
            .filter_map(|pod| pod.metadata.name.clone())
            .collect();
        let ready = list.into_iter().find(|pod| {
            pod.metadata.deletion_timestamp.is_none()
                && pod.status.as_ref().is_some_and(|status| {
                    status.phase.as_deref() == Some("Running")
                        && status.conditions.iter().flatten().any(|condition| {
                            condition.type_ == "Ready" && condition.status == "True"
                        })
                })
        });
        match ready.and_then(|pod| pod.metadata.name) {
            Some(name) => Ok(Self::new(client, namespace, &name)),
            None => Err(workload_error(
                format!("find the workload pod in {namespace}"),
                format!("no running, ready pod matches {WORKLOAD_SELECTOR} (pods: {names:?})"),
            )),
        }
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.pod
    }

    fn argv(&self, subcommand: &str, args: &[&str]) -> Vec<String> {
        let mut argv = vec![WORKLOAD_BINARY.to_owned(), subcommand.to_owned()];
        if let (Some(dir), "ctl" | "follow") = (&self.dir, subcommand) {
            argv.push("--dir".to_owned());
            argv.push(dir.clone());
        }
        argv.extend(args.iter().map(|arg| (*arg).to_owned()));
        argv
    }

    async fn attach(&self, argv: Vec<String>, stdin: bool) -> Result<kube::api::AttachedProcess> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let params = AttachParams::default()
            .container(&self.container)
            .stdin(stdin)
            .stdout(true)
            .stderr(true);
        pods.exec(&self.pod, argv, &params)
            .await
            .map_err(|e| workload_error(format!("exec into {}/{}", self.namespace, self.pod), e))
    }

    /// Runs `argv` to its end, with `stdin` written and closed, bounded by [`CTL_EXEC_MAX`].
    async fn exec(&self, argv: Vec<String>, stdin: Option<Vec<u8>>) -> Result<ExecOutput> {
        super::exec::exec_collect(
            &self.client,
            super::exec::ExecTarget {
                namespace: &self.namespace,
                pod: &self.pod,
                container: &self.container,
            },
            argv,
            stdin,
            CTL_EXEC_MAX,
        )
        .await
    }

    /// The standard output of a command that must succeed.
    async fn run(&self, argv: Vec<String>, stdin: Option<Vec<u8>>) -> Result<Vec<u8>> {
        let action = format!(
            "run `{}` in {}/{}",
            argv.iter().take(2).cloned().collect::<Vec<_>>().join(" "),
            self.namespace,
            self.pod
        );
        let output = self.exec(argv, stdin).await?;
        match &output.status {
            Some(status) if status.status.as_deref() == Some("Success") => Ok(output.stdout),
            Some(status) => Err(workload_error(
                action,
                format!(
                    "{}: {}",
                    status.message.as_deref().unwrap_or("it failed"),
                    output.stderr.trim()
                ),
            )),
            None => Err(workload_error(
                action,
                format!(
                    "the exec reported no status (stderr {:?}): its outcome is unknown",
                    output.stderr.trim()
                ),
            )),
        }
    }

    /// Sends one control request ([`crate::incluster::control`]) and returns its result.
    pub async fn ctl(&self, request: &Request) -> Result<Value> {
        let text = serde_json::to_string(request).map_err(|source| Error::Json {
            what: "workload request",
            source,
        })?;
        let stdout = self.run(self.argv("ctl", &[&text]), None).await?;
        serde_json::from_slice(&stdout).map_err(|e| {
            workload_error(
                control::request_action(request),
                format!(
                    "unreadable answer ({e}): {:.200}",
                    String::from_utf8_lossy(&stdout)
                ),
            )
        })
    }

    /// The sorted A answers for `name` from the pod's resolver (the cluster DNS).
    pub async fn dns(&self, name: &str) -> Result<Vec<String>> {
        let stdout = self.run(self.argv("dns", &["--name", name]), None).await?;
        serde_json::from_slice(&stdout)
            .map_err(|e| workload_error(format!("look up {name} in the workload pod"), e))
    }

    /// The sorted A answers for `name` from the DNS server `server` (`ip:port`), asked from
    /// the pod.
    pub async fn dns_at(&self, name: &str, server: &str) -> Result<Vec<String>> {
        let stdout = self
            .run(
                self.argv("dns", &["--name", name, "--server", server]),
                None,
            )
            .await?;
        serde_json::from_slice(&stdout).map_err(|e| {
            workload_error(
                format!("look up {name} at {server} from the workload pod"),
                e,
            )
        })
    }

    /// Sends one HTTP request from the pod ([`crate::incluster::oneshot::http`]). The bearer
    /// token goes through the exec's standard input, not the command line.
    pub async fn http(&self, call: &HttpCall) -> Result<HttpAnswer> {
        // `--flag=value`: a value may start with `-` (a PEM's `-----BEGIN`, a body), which
        // clap would take for a flag of its own.
        let mut args: Vec<String> = vec![
            format!("--method={}", call.method),
            format!("--url={}", call.url),
            format!("--timeout-ms={}", call.timeout.as_millis()),
        ];
        if let Some(ca) = &call.ca_pem {
            args.push(format!("--ca-pem={ca}"));
        }
        for (name, value) in &call.headers {
            args.push(format!("--header={name}: {value}"));
        }
        if let Some(body) = &call.body {
            args.push(format!("--body={body}"));
        }
        for (host, address) in &call.resolve {
            args.push(format!(
                "--resolve={host}:{}:{}",
                address.port(),
                address.ip()
            ));
        }
        let stdin = call.bearer.as_ref().map(|token| token.as_bytes().to_vec());
        if stdin.is_some() {
            args.push("--bearer-file=-".to_owned());
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let stdout = self.run(self.argv("http", &refs), stdin).await?;
        serde_json::from_slice(&stdout)
            .map_err(|e| workload_error(format!("call {} from the workload pod", call.url), e))
    }

    /// Runs `follow --run RUN --from FROM`, handing each complete line to `on_line` as it
    /// arrives, until the stream ends.
    pub async fn follow(
        &self,
        run: &str,
        from: u64,
        mut on_line: impl FnMut(Result<String, String>),
    ) -> Result<FollowExit> {
        let from = from.to_string();
        let mut attached = self
            .attach(self.argv("follow", &["--run", run, "--from", &from]), false)
            .await?;
        let stderr = attached.stderr().map(|mut err| {
            tokio::spawn(async move {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text).await;
                text
            })
        });
        let status = attached.take_status();
        let mut read_error = None;
        if let Some(mut out) = attached.stdout() {
            let mut buffer = LineBuffer::default();
            let mut chunk = vec![0_u8; 64 * 1024];
            loop {
                match out.read(&mut chunk).await {
                    Ok(0) => break,
                    Ok(read) => buffer
                        .push(&chunk[..read])
                        .into_iter()
                        .for_each(&mut on_line),
                    Err(error) => {
                        read_error = Some(error.to_string());
                        break;
                    }
                }
            }
            if let Some(fragment) = buffer.into_fragment() {
                tracing::info!(
                    run,
                    bytes = fragment.len(),
                    "follow stream cut mid-line; the line is followed again"
                );
            }
        }
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        let stderr = match stderr {
            Some(task) => task.await.unwrap_or_default(),
            None => String::new(),
        };
        let _ = attached.join().await;
        Ok(follow_exit(status.as_ref(), &stderr, read_error.as_deref()))
    }
}

/// One HTTP request sent from the workload pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCall {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The URL.
    pub url: String,
    /// CA certificates (PEM) to trust: public, so passed as an argument.
    pub ca_pem: Option<String>,
    /// The bearer token (sent through standard input).
    pub bearer: Option<String>,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<String>,
    /// Host names resolved to an address (the deploy API's Service name to one pod).
    pub resolve: Vec<(String, std::net::SocketAddr)>,
    /// The bound on the request.
    pub timeout: Duration,
}

// ---------------------------------------------------------------------------------------
// The workload.

/// What a run starts with (the hosts are Service DNS names the pod resolves, e.g.
/// `mysql-playground-primary.<ns>.svc.cluster.local`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InClusterSpec {
    /// The run's id (unique per daemon: it names the log).
    pub run: String,
    /// `-primary`'s host.
    pub primary: String,
    /// `-replicas`' host.
    pub replicas: String,
    /// The group's DNS hostname (empty: no DNS probe).
    pub dns_hostname: String,
    /// The DNS server the probe asks (`ip:port`; `None`: the pod's resolver).
    pub dns_server: Option<String>,
    /// The workload user's password.
    pub password: String,
    /// The group whose sites the pod probes by pod IP, with their namespace and sites (the
    /// pod finds the pods through the API itself); `None`: no site probes.
    pub site_probes: Option<SiteProbeSpec>,
}

/// Which sites the workload pod probes directly ([`crate::live::site_probes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteProbeSpec {
    /// The group.
    pub group: String,
    /// The namespace of its pods.
    pub namespace: String,
    /// Its sites.
    pub sites: Vec<Site>,
}

/// What the stop found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// Lines received (anchor, events and end).
    pub lines_received: usize,
    /// The gap recorded, if any.
    pub gap: Option<Op>,
}

/// How the follow task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FollowOutcome {
    Ended,
    Abandoned(String),
    GaveUp(String),
}

struct Shared {
    run: String,
    pod: WorkloadPod,
    recorder: Arc<Recorder>,
    stream: Mutex<RunStream>,
    site_ips: Mutex<BTreeMap<String, Site>>,
}

impl Shared {
    fn take_line(&self, line: Result<String, String>) {
        let parsed = line.and_then(|text| parse_line(&text));
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let events = match parsed {
            Ok(line) => stream.accept(line, |wall| self.recorder.mono_at_wall(wall)),
            Err(why) => {
                stream.bad_line(why);
                Vec::new()
            }
        };
        drop(stream);
        if events.is_empty() {
            return;
        }
        let site_ips = self.site_ips.lock().unwrap_or_else(PoisonError::into_inner);
        for mut event in events {
            name_dns_site(&mut event, &site_ips);
            self.recorder.record_at(
                &event.process,
                event.kind,
                event.op,
                event.wall,
                event.mono_ns,
            );
        }
    }

    fn received(&self) -> usize {
        self.stream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .received()
    }

    fn next_from(&self) -> u64 {
        self.stream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_from()
    }

    fn complete_through(&self, last_seq: Option<u64>) -> bool {
        complete_through(
            &self.stream.lock().unwrap_or_else(PoisonError::into_inner),
            last_seq,
        )
    }

    fn end_seen(&self) -> bool {
        self.stream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .end()
            .is_some()
    }

    async fn follow_once(&self, from: u64) -> Result<FollowExit> {
        self.pod
            .follow(&self.run, from, |line| self.take_line(line))
            .await
    }

    /// Follows the run until its end line, again from the first missing line whenever the
    /// stream breaks (at most [`FOLLOW_RESTARTS_MAX`] times in a row without a new line).
    async fn follow_loop(self: Arc<Self>) -> FollowOutcome {
        let mut broken_in_a_row = 0;
        loop {
            let before = self.received();
            let exit = self.follow_once(self.next_from()).await;
            if self.end_seen() {
                return FollowOutcome::Ended;
            }
            let why = match exit {
                Ok(FollowExit::Abandoned(why)) => return FollowOutcome::Abandoned(why),
                Ok(FollowExit::Ended) => {
                    "follow exited 0 but its end line was not received".to_owned()
                }
                Ok(FollowExit::Broken(why)) => why,
                Err(error) => error.to_string(),
            };
            broken_in_a_row = if self.received() > before {
                1
            } else {
                broken_in_a_row + 1
            };
            tracing::info!(run = %self.run, %why, broken_in_a_row, "follow stream ended early; following again");
            if broken_in_a_row > FOLLOW_RESTARTS_MAX {
                return FollowOutcome::GaveUp(format!(
                    "the follow stream broke {FOLLOW_RESTARTS_MAX} times in a row without a new line, the last: {why}"
                ));
            }
            tokio::time::sleep(FOLLOW_RETRY_PAUSE).await;
        }
    }

    /// Reads the site Services' ClusterIPs while some are missing.
    async fn site_ips_loop(self: Arc<Self>, client: Client) {
        loop {
            let known = self
                .site_ips
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            if known < Site::ALL.len() {
                if let Ok(ips) = topology::site_cluster_ips(&client).await {
                    *self.site_ips.lock().unwrap_or_else(PoisonError::into_inner) = ips;
                }
            }
            tokio::time::sleep(SITE_IPS_REFRESH).await;
        }
    }
}

/// The workload running in the workload pod, recorded into the scenario's [`Recorder`].
pub struct InClusterWorkload {
    shared: Arc<Shared>,
    follower: Option<JoinHandle<FollowOutcome>>,
    site_ips: Option<JoinHandle<()>>,
    probes: Option<workload::LiveWorkload>,
    handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for InClusterWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InClusterWorkload")
            .field("run", &self.shared.run)
            .field("pod", &self.shared.pod)
            .finish()
    }
}

impl InClusterWorkload {
    /// Starts run `spec.run` in `pod` (`ctl start`), the stream of its log (`follow`) and the
    /// API probes of the group's status and endpoints. Must be called on a runtime.
    pub async fn start(
        client: Client,
        pod: WorkloadPod,
        spec: InClusterSpec,
        recorder: Arc<Recorder>,
    ) -> Result<Self> {
        let site_ips = topology::site_cluster_ips(&client)
            .await
            .unwrap_or_default();
        let (group, namespace, sites) = match spec.site_probes {
            Some(probes) => (Some(probes.group), Some(probes.namespace), probes.sites),
            None => (None, None, Vec::new()),
        };
        pod.ctl(&Request::Start(StartRun {
            run: spec.run.clone(),
            primary: spec.primary,
            replicas: spec.replicas,
            dns_hostname: spec.dns_hostname,
            dns_server: spec.dns_server,
            password: spec.password,
            group,
            namespace,
            sites,
        }))
        .await?;
        let shared = Arc::new(Shared {
            run: spec.run,
            pod,
            recorder: recorder.clone(),
            stream: Mutex::new(RunStream::default()),
            site_ips: Mutex::new(site_ips),
        });
        let follower = tokio::spawn(shared.clone().follow_loop());
        let site_task = tokio::spawn(shared.clone().site_ips_loop(client.clone()));
        let probes = workload::LiveWorkload::start_api_probes(client, recorder);
        Ok(Self {
            shared,
            follower: Some(follower),
            site_ips: Some(site_task),
            probes: Some(probes),
            handle: tokio::runtime::Handle::current(),
        })
    }

    /// The pod the run is in (for `openConnection` and friends through [`WorkloadPod::ctl`]).
    pub fn pod(&self) -> &WorkloadPod {
        &self.shared.pod
    }

    /// Stops the run (`ctl stop`, which drains in-flight operations), waits for the follow
    /// stream to deliver the end line, follows again once from the first missing line if
    /// lines are missing, and records an [`Op::WorkloadGap`] for whatever is still missing.
    /// An error when `ctl stop` failed and the end line never arrived (the gap is recorded
    /// then too).
    pub async fn stop_and_drain(&mut self) -> Result<StopReport> {
        if let Some(probes) = self.probes.take() {
            probes.stop().await;
        }
        let run = self.shared.run.clone();
        let (last_seq, stop_error) = self.stop_run(&run).await;
        let mut extra: Vec<String> = Vec::new();
        if let Some(error) = &stop_error {
            extra.push(format!("failed to {error}"));
        }
        let outcome = self.follower_outcome().await;
        if !self.shared.complete_through(last_seq) {
            extra.extend(self.follow_again().await);
            extra.extend(follow_problem(outcome));
        }
        if let Some(task) = self.site_ips.take() {
            task.abort();
        }
        let (gap, received, complete) = {
            let stream = self
                .shared
                .stream
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let complete = complete_through(&stream, last_seq);
            // The end line and every line before it arrived: the run stopped (the pod writes
            // the end line only then) and the history holds all of it, whatever else failed
            // on the way (the stream's breaks, a `ctl stop` whose answer was lost).
            let extra: &[String] = if complete { &[] } else { &extra };
            (
                stream.gap(&run, last_seq, extra),
                stream.received(),
                complete,
            )
        };
        if let Some(op) = &gap {
            tracing::error!(%run, gap = ?op, "the in-cluster workload's history is incomplete");
            self.shared.recorder.invoke(GAP_PROCESS, op.clone());
            self.shared
                .recorder
                .complete(GAP_PROCESS, EventType::Fail, op.clone());
        }
        match stop_error {
            Some(error) if !complete => Err(error),
            Some(_) | None => Ok(StopReport {
                lines_received: received,
                gap,
            }),
        }
    }

    /// `ctl stop` for `run`, up to [`STOP_ATTEMPTS_MAX`] times: the last line it wrote (its
    /// answer's `lastSeq`), or the error of the last attempt.
    async fn stop_run(&self, run: &str) -> (Option<u64>, Option<Error>) {
        let mut stop_error = None;
        for attempt in 1..=STOP_ATTEMPTS_MAX {
            match self
                .shared
                .pod
                .ctl(&Request::Stop(RunRef {
                    run: run.to_owned(),
                }))
                .await
            {
                Ok(answer) => return (answer["lastSeq"].as_u64(), None),
                Err(error) => {
                    tracing::warn!(%run, attempt, %error, "failed to stop the in-cluster run");
                    stop_error = Some(error);
                    tokio::time::sleep(FOLLOW_RETRY_PAUSE).await;
                }
            }
        }
        (None, stop_error)
    }

    /// How the follow task ended, waiting at most [`STOP_DRAIN_MAX`] (`None`: it had not, and
    /// was aborted, or there was none).
    async fn follower_outcome(&mut self) -> Option<FollowOutcome> {
        let mut follower = self.follower.take()?;
        match tokio::time::timeout(STOP_DRAIN_MAX, &mut follower).await {
            Ok(Ok(outcome)) => Some(outcome),
            Ok(Err(joined)) => Some(FollowOutcome::GaveUp(format!(
                "the follow task failed: {joined}"
            ))),
            Err(_) => {
                follower.abort();
                None
            }
        }
    }

    /// Follows once more from the first missing line, for at most [`REFOLLOW_MAX`]: why that
    /// did not end the stream, if it did not.
    async fn follow_again(&self) -> Option<String> {
        let from = self.shared.next_from();
        match tokio::time::timeout(REFOLLOW_MAX, self.shared.follow_once(from)).await {
            Ok(Ok(FollowExit::Ended)) => None,
            Ok(Ok(FollowExit::Abandoned(why) | FollowExit::Broken(why))) => {
                Some(format!("following again from seq {from}: {why}"))
            }
            Ok(Err(error)) => Some(format!(
                "following again from seq {from}: failed to {error}"
            )),
            Err(_) => Some(format!(
                "following again from seq {from} did not end within {} s",
                REFOLLOW_MAX.as_secs()
            )),
        }
    }
}

/// Why the follow task did not deliver the whole stream (`None`: it ended).
fn follow_problem(outcome: Option<FollowOutcome>) -> Option<String> {
    match outcome {
        Some(FollowOutcome::Abandoned(why)) => {
            Some(format!("follow said the run was abandoned: {why}"))
        }
        Some(FollowOutcome::GaveUp(why)) => Some(why),
        None => Some(format!(
            "the follow stream had not ended {} s after the stop",
            STOP_DRAIN_MAX.as_secs()
        )),
        Some(FollowOutcome::Ended) => None,
    }
}

/// Whether the end line and every line through `last_seq` (the stop's answer) arrived.
fn complete_through(stream: &RunStream, last_seq: Option<u64>) -> bool {
    stream.is_complete() && last_seq.is_none_or(|last| stream.missing(Some(last)).is_empty())
}

impl Workload for InClusterWorkload {
    fn stop(mut self: Box<Self>) -> Result<()> {
        let handle = self.handle.clone();
        handle.block_on(self.stop_and_drain()).map(|_| ())
    }
}

impl Drop for InClusterWorkload {
    fn drop(&mut self) {
        if self.follower.is_none() && self.probes.is_none() {
            return;
        }
        // Dropped without `stop`: stop the run anyway (the trait's contract), off any runtime
        // thread (blocking inside one would panic).
        let mut rest = InClusterWorkload {
            shared: self.shared.clone(),
            follower: self.follower.take(),
            site_ips: self.site_ips.take(),
            probes: self.probes.take(),
            handle: self.handle.clone(),
        };
        let handle = self.handle.clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            handle.spawn(async move {
                let _ = rest.stop_and_drain().await;
            });
        } else {
            let _ = handle.block_on(rest.stop_and_drain());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incluster::lines::Anchor;

    fn anchor(wall_ms: i64) -> RunLine {
        RunLine::Anchor(Anchor {
            wall: jiff::Timestamp::from_millisecond(wall_ms).expect("wall"),
            mono_ns: 0,
        })
    }

    fn event(seq: u64, process: &str, kind: EventType, mono_ms: u64) -> RunLine {
        RunLine::Event(Box::new(EventLine {
            seq,
            process: process.to_owned(),
            kind,
            op: Op::Write {
                id: seq,
                site: None,
                gtid: None,
                error: None,
            },
            wall: jiff::Timestamp::from_millisecond(1_000_000).expect("wall"),
            mono_ns: mono_ms * 1_000_000,
        }))
    }

    fn end(seq: u64) -> RunLine {
        RunLine::End {
            seq,
            end: End {
                events: seq - 1,
                unwritten: 0,
                aborted: None,
            },
        }
    }

    /// The recorder started at wall 1_000_000 ms: a wall time maps to its distance from it.
    fn axis(wall: jiff::Timestamp) -> i128 {
        wall.as_nanosecond() - 1_000_000 * 1_000_000
    }

    // Module docs, "Time": one offset from the anchor's wall time; every event keeps the
    // pod's monotonic intervals (here the anchor is 2 s after the recorder started).
    #[test]
    fn pod_times_map_through_one_offset_from_the_anchor() {
        let mut stream = RunStream::default();
        assert!(stream.accept(anchor(1_002_000), axis).is_empty());
        let events = stream.accept(event(1, "writer-0", EventType::Invoke, 5), axis);
        assert_eq!(events[0].mono_ns, 2_005_000_000);
        let events = stream.accept(event(2, "writer-0", EventType::Ok, 7), axis);
        assert_eq!(
            events[0].mono_ns, 2_007_000_000,
            "the pod's 2 ms interval kept"
        );
        assert_eq!(
            map_mono(-5_000_000_000, 1_000),
            0,
            "before the axis: clamped to 0"
        );
    }

    // An out-of-order seq is placed where it belongs; an event before the anchor waits for it.
    #[test]
    fn out_of_order_lines_are_placed_and_events_wait_for_the_anchor() {
        let mut stream = RunStream::default();
        assert!(stream
            .accept(event(2, "writer-0", EventType::Ok, 9), axis)
            .is_empty());
        assert_eq!(stream.next_from(), 0);
        let placed = stream.accept(anchor(1_000_000), axis);
        assert_eq!(
            placed.len(),
            1,
            "the pending event is placed with the anchor"
        );
        assert_eq!(placed[0].mono_ns, 9_000_000);
        assert_eq!(stream.missing(None), vec![(1, 1)]);
        assert_eq!(stream.next_from(), 1);
        let late = stream.accept(event(1, "writer-0", EventType::Invoke, 3), axis);
        assert_eq!(late[0].mono_ns, 3_000_000);
        assert_eq!(stream.next_from(), 3);
    }

    // A follow run again from an earlier line repeats lines: each is taken once.
    #[test]
    fn a_duplicate_seq_after_following_again_is_ignored() {
        let mut stream = RunStream::default();
        stream.accept(anchor(1_000_000), axis);
        assert_eq!(
            stream
                .accept(event(1, "writer-0", EventType::Invoke, 1), axis)
                .len(),
            1
        );
        assert!(stream
            .accept(event(1, "writer-0", EventType::Invoke, 1), axis)
            .is_empty());
        assert!(stream.accept(anchor(1_000_000), axis).is_empty());
        stream.accept(event(2, "writer-0", EventType::Ok, 2), axis);
        stream.accept(end(3), axis);
        assert!(stream.is_complete());
        assert_eq!(stream.gap("r", Some(3), &[]), None);
    }

    // A stream that breaks mid-line, then is followed again from the first missing line: the
    // cut line is taken from the second stream, and nothing is missing.
    #[test]
    fn a_stream_broken_mid_line_is_completed_by_following_again() {
        let lines: Vec<String> = [
            anchor(1_000_000),
            event(1, "writer-0", EventType::Invoke, 1),
            event(2, "writer-0", EventType::Ok, 2),
            end(3),
        ]
        .iter()
        .map(RunLine::to_json)
        .collect();
        let whole = lines.join("\n") + "\n";
        let cut = lines[0].len() + 1 + lines[1].len() / 2;
        let mut stream = RunStream::default();
        let feed = |stream: &mut RunStream, bytes: &[u8]| {
            let mut buffer = LineBuffer::default();
            for line in buffer.push(bytes) {
                match line.and_then(|text| parse_line(&text)) {
                    Ok(line) => {
                        stream.accept(line, axis);
                    }
                    Err(why) => stream.bad_line(why),
                }
            }
            buffer.into_fragment()
        };
        let fragment = feed(&mut stream, &whole.as_bytes()[..cut]);
        assert!(fragment.is_some(), "the second line was cut");
        assert_eq!(stream.next_from(), 1);
        assert!(!stream.is_complete());
        // `follow --from 1` prints lines 1.. again.
        let again = lines[1..].join("\n") + "\n";
        assert!(feed(&mut stream, again.as_bytes()).is_none());
        assert!(stream.is_complete());
        assert_eq!(stream.gap("r", Some(3), &[]), None);
    }

    // Lines still missing after following again are a gap, named with their ranges and count.
    #[test]
    fn lines_still_missing_are_a_named_gap() {
        let mut stream = RunStream::default();
        stream.accept(anchor(1_000_000), axis);
        stream.accept(event(1, "writer-0", EventType::Invoke, 1), axis);
        stream.accept(event(4, "writer-1", EventType::Invoke, 4), axis);
        stream.accept(end(7), axis);
        assert_eq!(stream.missing(Some(7)), vec![(2, 3), (5, 6)]);
        match stream.gap("s020-1", Some(7), &["the follow stream broke".to_owned()]) {
            Some(Op::WorkloadGap {
                run,
                missing,
                missing_count,
                reason,
            }) => {
                assert_eq!(run, "s020-1");
                assert_eq!(missing, "2-3, 5-6");
                assert_eq!(missing_count, 4);
                assert!(
                    reason.contains("never arrived") && reason.contains("broke"),
                    "{reason}"
                );
            }
            other => panic!("no gap: {other:?}"),
        }
        // Fewer lines than the stop counted: the tail is missing.
        let mut short = RunStream::default();
        short.accept(anchor(1_000_000), axis);
        assert_eq!(short.missing(Some(4)), vec![(1, 4)]);
        // Unwritten events and an aborted run are gaps even with every line present.
        let mut aborted = RunStream::default();
        aborted.accept(anchor(1_000_000), axis);
        aborted.accept(
            RunLine::End {
                seq: 1,
                end: End {
                    events: 0,
                    unwritten: 2,
                    aborted: Some("SIGTERM".to_owned()),
                },
            },
            axis,
        );
        assert!(matches!(
            aborted.gap("r", Some(1), &[]),
            Some(Op::WorkloadGap {
                missing_count: 2,
                ..
            })
        ));
    }

    #[test]
    fn a_dns_answer_of_one_address_is_named_by_the_site_ips() {
        let ips: BTreeMap<String, Site> = [("10.96.0.20".to_owned(), Site::Pdx)].into();
        let mut event = Event {
            process: "dns".to_owned(),
            kind: EventType::Ok,
            op: Op::Dns {
                addresses: vec!["10.96.0.20".to_owned()],
                site: None,
            },
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: 0,
        };
        name_dns_site(&mut event, &ips);
        assert_eq!(
            event.op,
            Op::Dns {
                addresses: vec!["10.96.0.20".to_owned()],
                site: Some(Site::Pdx)
            }
        );
    }

    #[test]
    fn follow_exits_are_told_apart_by_status_and_exit_code() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
        let success = Status {
            status: Some("Success".to_owned()),
            ..Status::default()
        };
        assert_eq!(follow_exit(Some(&success), "", None), FollowExit::Ended);
        let exited = |code: &str| Status {
            status: Some("Failure".to_owned()),
            message: Some(format!(
                "command terminated with non-zero exit code: {code}"
            )),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".to_owned()),
                    message: Some(code.to_owned()),
                    ..StatusCause::default()
                }]),
                ..StatusDetails::default()
            }),
            ..Status::default()
        };
        assert_eq!(
            follow_exit(Some(&exited("3")), "gone\n", None),
            FollowExit::Abandoned("gone".to_owned())
        );
        assert!(matches!(
            follow_exit(Some(&exited("1")), "", None),
            FollowExit::Broken(_)
        ));
        assert!(matches!(
            follow_exit(None, "", Some("reset")),
            FollowExit::Broken(why) if why.contains("reset")
        ));
    }
}
