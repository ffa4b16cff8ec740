//! `bloodraven-workload serve --dir DIR`: the workload pod's process. It opens no TCP port;
//! it listens on `DIR/control.sock` ([`super::control`]) and runs at most one run at a time,
//! whose writers, readers and DNS probe are [`crate::live::workload`]'s and whose site probes
//! are [`crate::live::site_probes`]' (when `start` names a group), recording into the run's log
//! ([`super::runlog::RunLog`]). It also keeps the held connections of the
//! `open-connection` and `send-write` faults. On SIGTERM or SIGINT it ends the active run as
//! aborted (its end line says so) and exits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use bloodraven_mysql::live::LiveMysql;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::control::{self, Request, Response};
use super::lines::{parse_line, RunLine};
use super::runlog::{self, RunLog};
use super::site_pods;
use crate::error::{Error, Result};
use crate::live::{site_probes, topology, workload};
use crate::scenario::model::{SentWrite, Site};

/// What `serve` needs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The state directory (control socket, run logs).
    pub dir: PathBuf,
    /// The resolver configuration whose first nameserver the DNS probe asks.
    pub resolv_conf: PathBuf,
}

struct ActiveRun {
    log: Arc<RunLog>,
    stop: watch::Sender<bool>,
    /// `None` once a stop took them (the run is being drained).
    tasks: Option<Vec<JoinHandle<()>>>,
}

type HeldConnection = (LiveMysql, mysql_async::Conn);

struct Daemon {
    options: ServeOptions,
    active: Mutex<Option<ActiveRun>>,
    password: Mutex<Option<String>>,
    held: tokio::sync::Mutex<BTreeMap<String, HeldConnection>>,
    sent: Mutex<BTreeMap<String, Arc<Mutex<SentWrite>>>>,
}

fn workload_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Workload {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// Serves `options.dir` until SIGTERM or SIGINT. Closes the logs of runs a previous daemon
/// left open ([`runlog::close_abandoned`]) first; refuses to start when another daemon
/// answers on the control socket.
pub async fn serve(options: ServeOptions) -> Result<()> {
    std::fs::create_dir_all(&options.dir).map_err(|source| Error::Write {
        path: options.dir.clone(),
        source,
    })?;
    for abandoned in runlog::close_abandoned(&options.dir)? {
        tracing::warn!(run = %abandoned.run, lines = abandoned.lines, cut_bytes = abandoned.cut_bytes, "closed the log of a run a previous daemon left open, as aborted");
    }
    let socket = runlog::control_socket(&options.dir);
    if socket.exists() {
        if UnixStream::connect(&socket).await.is_ok() {
            return Err(workload_error(
                format!("serve {}", options.dir.display()),
                format!("another daemon answers on {}", socket.display()),
            ));
        }
        std::fs::remove_file(&socket).map_err(|source| Error::Write {
            path: socket.clone(),
            source,
        })?;
    }
    let listener = UnixListener::bind(&socket)
        .map_err(|e| workload_error(format!("listen on {}", socket.display()), e))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| workload_error("watch for SIGTERM", e))?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| workload_error("watch for SIGINT", e))?;
    tracing::info!(dir = %options.dir.display(), socket = %socket.display(), "workload daemon serving");
    let daemon = Arc::new(Daemon {
        options,
        active: Mutex::new(None),
        password: Mutex::new(None),
        held: tokio::sync::Mutex::new(BTreeMap::new()),
        sent: Mutex::new(BTreeMap::new()),
    });
    let signal = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let daemon = daemon.clone();
                    tokio::spawn(async move { daemon.handle(stream).await });
                }
                Err(error) => tracing::warn!(%error, "failed to accept a control connection"),
            },
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
        }
    };
    tracing::info!(signal, "workload daemon stopping");
    daemon.abort_active(signal).await;
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

impl Daemon {
    async fn handle(self: Arc<Self>, stream: UnixStream) {
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        let read = BufReader::new(read.take(control::MESSAGE_BYTES_MAX))
            .read_line(&mut line)
            .await;
        let response = match read {
            Ok(_) => match control::parse_request(line.trim()) {
                Ok(request) => {
                    let action = control::request_action(&request);
                    match self.answer(request).await {
                        Ok(value) => Response::Ok(value),
                        Err(error) => {
                            tracing::warn!(%action, %error, "request failed");
                            Response::Error(error.to_string())
                        }
                    }
                }
                Err(why) => Response::Error(format!("read the request: {why}")),
            },
            Err(error) => Response::Error(format!("read the request: {error}")),
        };
        let mut text = serde_json::to_string(&response)
            .unwrap_or_else(|e| format!("{{\"error\":\"encode the answer: {e}\"}}"));
        text.push('\n');
        if let Err(error) = write.write_all(text.as_bytes()).await {
            tracing::warn!(%error, "failed to answer a control request");
        }
    }

    async fn answer(&self, request: Request) -> Result<Value> {
        match request {
            Request::Start(start) => self.start(start),
            Request::Stop(run) => self.stop(&run.run).await,
            Request::Status(run) => Ok(json!({"run": run.run, "active": self.is_active(&run.run)})),
            Request::OpenConnection(open) => self.open_connection(open).await,
            Request::SendWrite(send) => self.send_write(&send.name, send.id.unwrap_or(1)).await,
            Request::Connection(name) => self.observe_connection(&name.name).await,
            Request::CloseConnections(_) => {
                let closed = std::mem::take(&mut *self.held.lock().await);
                self.sent
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
                // Dropping a connection closes it.
                Ok(json!({"closed": closed.len()}))
            }
            Request::Ping(_) => Ok(json!({"pong": true})),
        }
    }

    fn is_active(&self, run: &str) -> bool {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|active| active.log.run() == run)
    }

    fn start(&self, start: control::StartRun) -> Result<Value> {
        let action = format!("start run {}", start.run);
        let mut active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = active.as_ref() {
            return Err(workload_error(
                action,
                format!(
                    "run {} is still active: stop it first (one run at a time: the writers' ids start at 1 in every run)",
                    running.log.run()
                ),
            ));
        }
        for (what, host) in [("primary", &start.primary), ("replicas", &start.replicas)] {
            workload::split_host_port(host)
                .map_err(|why| workload_error(&action, format!("{what}: {why}")))?;
        }
        let dns = if start.dns_hostname.is_empty() {
            None
        } else {
            let server = match &start.dns_server {
                Some(server) => server.parse::<std::net::SocketAddr>().map_err(|e| {
                    workload_error(&action, format!("dnsServer {server:?} is not ip:port: {e}"))
                })?,
                None => super::resolv::nameserver(&self.options.resolv_conf)?,
            };
            let resolver = workload::resolver(server)
                .ok_or_else(|| workload_error(&action, format!("build a resolver for {server}")))?;
            Some(resolver)
        };
        let log = Arc::new(RunLog::create(&self.options.dir, &start.run)?);
        let targets = workload::WorkloadTargets {
            primary: start.primary.clone(),
            replicas: start.replicas.clone(),
            password: start.password.clone(),
        };
        let (stop, stopped) = watch::channel(false);
        let mut tasks = workload::spawn_clients(&targets, &log, &stopped);
        if let Some(group) = &start.group {
            tasks.extend(spawn_site_probes(&start, group, &log, &stopped));
        }
        if let Some(resolver) = dns {
            tasks.push(tokio::spawn(workload::dns_loop(
                resolver,
                start.dns_hostname.clone(),
                log.clone(),
                stopped,
            )));
        }
        *self.password.lock().unwrap_or_else(PoisonError::into_inner) = Some(start.password);
        tracing::info!(run = %start.run, primary = %start.primary, replicas = %start.replicas, dns_hostname = %start.dns_hostname, group = ?start.group, log = %log.path().display(), "run started");
        let path = log.path().display().to_string();
        *active = Some(ActiveRun {
            log,
            stop,
            tasks: Some(tasks),
        });
        Ok(json!({"run": start.run, "log": path}))
    }

    /// Stops the run, waits for its tasks (each ends after its in-flight operation was
    /// written), writes the end line. A run already ended answers from its end line, so a
    /// `ctl stop` repeated after a broken exec stream gets the same counts.
    async fn stop(&self, run: &str) -> Result<Value> {
        let action = format!("stop run {run}");
        let taken = {
            let mut active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
            match active.as_mut() {
                Some(running) if running.log.run() == run => match running.tasks.take() {
                    Some(tasks) => {
                        let _ = running.stop.send(true);
                        Some((running.log.clone(), tasks))
                    }
                    None => {
                        return Err(workload_error(
                            action,
                            "another request is stopping it; ask again when it answered",
                        ))
                    }
                },
                Some(_) | None => None,
            }
        };
        let Some((log, tasks)) = taken else {
            return ended_run(&self.options.dir, run);
        };
        let mut panicked = 0;
        for task in tasks {
            if task.await.is_err() {
                panicked += 1;
            }
        }
        let aborted = (panicked > 0).then(|| {
            format!("{panicked} workload tasks panicked: their last operations never completed")
        });
        let ended = log.end(aborted.clone());
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let ended = ended?;
        tracing::info!(
            run,
            events = ended.events,
            unwritten = ended.unwritten,
            "run stopped"
        );
        Ok(json!({
            "run": run,
            "events": ended.events,
            "lastSeq": ended.last_seq,
            "unwritten": ended.unwritten,
            "aborted": aborted.or(ended.first_error),
        }))
    }

    async fn abort_active(&self, signal: &str) {
        let taken = {
            let mut active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
            active.as_mut().and_then(|running| {
                let _ = running.stop.send(true);
                running
                    .tasks
                    .take()
                    .map(|tasks| (running.log.clone(), tasks))
            })
        };
        if let Some((log, tasks)) = taken {
            for task in tasks {
                let _ = task.await;
            }
            let why = format!(
                "the workload daemon was stopped ({signal}) while run {} was active",
                log.run()
            );
            if let Err(error) = log.end(Some(why)) {
                tracing::error!(run = %log.run(), %error, "failed to close the run's log");
            }
        }
    }

    async fn open_connection(&self, open: control::OpenConnection) -> Result<Value> {
        let action = format!("open connection {} to {}", open.name, open.host);
        // A connection opened again under a name drops that name's earlier sent write.
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&open.name);
        let password = match open.password {
            Some(password) => password,
            None => self
                .password
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .ok_or_else(|| {
                    workload_error(&action, "no password given and no run was started")
                })?,
        };
        let client = workload::client_for(&open.host, &password);
        let conn = client
            .connect()
            .await
            .map_err(|e| workload_error(&action, e))?;
        self.held
            .lock()
            .await
            .insert(open.name.clone(), (client, conn));
        Ok(json!({"opened": open.name}))
    }

    /// Moves the held connection into a task that runs one write on it, bounded by
    /// [`workload::SENT_WRITE_WAIT_MAX`], and keeps what it was told.
    async fn send_write(&self, name: &str, id: u64) -> Result<Value> {
        let Some((client, mut conn)) = self.held.lock().await.remove(name) else {
            return Err(workload_error(
                format!("send a write on connection {name}"),
                "no connection has that name",
            ));
        };
        let outcome = Arc::new(Mutex::new(SentWrite::Pending));
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), outcome.clone());
        let statement = workload::held_write_statement(id);
        let name_owned = name.to_owned();
        tokio::spawn(async move {
            let result = client
                .execute_within(&mut conn, &statement, workload::SENT_WRITE_WAIT_MAX)
                .await;
            let seen = match &result {
                Ok(()) => SentWrite::Acknowledged,
                Err(_) => SentWrite::NotAcknowledged,
            };
            tracing::info!(connection = %name_owned, outcome = seen.as_str(), error = result.err().map(|e| e.to_string()), "sent write answered");
            *outcome.lock().unwrap_or_else(PoisonError::into_inner) = seen;
        });
        Ok(json!({"sent": name, "id": id}))
    }

    /// A sent write's outcome (`{"sentWrite"}`), else who answers on the held connection and
    /// what a write on it gets (`{"writeError": null | <errno>, "site"}`), as the harness's
    /// `connection` observation reads it.
    async fn observe_connection(&self, name: &str) -> Result<Value> {
        let sent = self
            .sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .map(|outcome| *outcome.lock().unwrap_or_else(PoisonError::into_inner));
        if let Some(sent) = sent {
            return Ok(json!({"sentWrite": sent.as_str()}));
        }
        let mut held = self.held.lock().await;
        let Some((client, conn)) = held.get_mut(name) else {
            return Err(workload_error(
                format!("observe connection {name}"),
                "no connection has that name",
            ));
        };
        let site = client
            .rows(conn, "SELECT @@hostname AS h")
            .await
            .ok()
            .and_then(|rows| rows.first().and_then(|row| row.get("h").cloned().flatten()))
            .and_then(|host| topology::site_of_hostname(&host))
            .map(|site| site.name());
        let write_error = match client
            .execute(conn, &workload::held_write_statement(1))
            .await
        {
            Ok(()) => Value::Null,
            Err(error) => json!(workload::write_error_code(&error)),
        };
        Ok(json!({"writeError": write_error, "site": site}))
    }
}

/// The site probes of a run ([`site_probes`]) and the watch of the site pods that tells them
/// where to dial ([`site_pods`]): `start.sites` (all three when empty) of `group`, in
/// `start.namespace` (the pod's own when absent).
fn spawn_site_probes(
    start: &control::StartRun,
    group: &str,
    log: &Arc<RunLog>,
    stopped: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let sites = if start.sites.is_empty() {
        Site::ALL.to_vec()
    } else {
        start.sites.clone()
    };
    let (addresses, watched) =
        watch::channel(site_pods::SitePodIps::new(group, &sites).addresses(None));
    let targets = site_probes::SiteProbeTargets {
        group: group.to_owned(),
        sites: sites.clone(),
        password: start.password.clone(),
    };
    let mut tasks = vec![tokio::spawn(site_pods::watch_site_pods(
        group.to_owned(),
        start.namespace.clone(),
        sites,
        addresses,
        stopped.clone(),
    ))];
    tasks.extend(site_probes::spawn_site_probes(
        &targets, &watched, log, stopped,
    ));
    tasks
}

/// The stop answer of a run that already ended, from its log's end line.
fn ended_run(dir: &Path, run: &str) -> Result<Value> {
    let path = runlog::run_path(dir, run);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(workload_error(
                format!("stop run {run}"),
                "no such run (it was never started here)",
            ))
        }
        Err(source) => return Err(Error::Read { path, source }),
    };
    let end = text
        .lines()
        .filter_map(|line| parse_line(line).ok())
        .find_map(|line| match line {
            RunLine::End { seq, end } => Some((seq, end)),
            RunLine::Anchor(_) | RunLine::Event(_) => None,
        });
    match end {
        Some((seq, end)) => Ok(json!({
            "run": run,
            "events": end.events,
            "lastSeq": seq,
            "unwritten": end.unwritten,
            "aborted": end.aborted,
        })),
        None => Err(workload_error(
            format!("stop run {run}"),
            format!("it is not active and {} has no end line", path.display()),
        )),
    }
}
