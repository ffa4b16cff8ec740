//! Real MariaDB servers in temporary directories on loopback addresses, for tests of the live
//! client, the sidecar and the counter app (docs/design/style.md#test-tiers: tests against real
//! MariaDB).
//!
//! Each [`MariaDbServer`] is one `mariadbd` process with binary logging and GTIDs
//! (`log_bin`, `log_slave_updates`), started read-only like every Bloodraven mysqld, listening
//! on its own `127.x.y.z` address. Dropping it kills the process and removes its directory.
//! A missing `mariadbd` is an error that names the package to install, never a skipped test.

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use super::{
    client::{ConnectOptions, LiveMysql},
    error::{LiveError, LiveResult},
};
use crate::deadline::DEADLINE_SCHEMA;
use crate::{Flavor, ReplicationSource};

/// The administrative user every sandbox server has (all privileges, over TCP).
pub const ADMIN_USER: &str = "bloodraven_admin";
/// Its password.
pub const ADMIN_PASSWORD: &str = "admin-secret";
/// The sidecar's user on every sandbox server, with only the privileges the sidecar needs on
/// MariaDB 10.11 ([`SIDECAR_PRIVILEGES_MARIADB`]).
pub const SIDECAR_USER: &str = "bloodraven_sidecar";
/// Its password.
pub const SIDECAR_PASSWORD: &str = "sidecar-secret";
/// What the sidecar's MySQL user needs on MariaDB 10.11, and why: `READ_ONLY ADMIN` to set
/// `read_only` (10.11: `SUPER` no longer implies it), `REPLICATION SLAVE ADMIN` and `RELOAD`
/// to stop, reset and repoint replication, `SLAVE MONITOR`, `BINLOG MONITOR` and
/// `REPLICATION CLIENT` to observe it, `PROCESS` and `CONNECTION ADMIN` to list and kill
/// client connections, `BINLOG ADMIN` to keep its write deadline out of the binlog
/// (`sql_log_bin = 0`, [`crate::deadline`]). It never writes data; on its own schema
/// ([`SIDECAR_DEADLINE_PRIVILEGES`]) it keeps the write deadline.
pub const SIDECAR_PRIVILEGES_MARIADB: &str = "READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, RELOAD, \
     SLAVE MONITOR, BINLOG MONITOR, REPLICATION CLIENT, PROCESS, CONNECTION ADMIN, BINLOG ADMIN";
/// What the sidecar's MySQL user needs on [`crate::deadline::DEADLINE_SCHEMA`]`.*`: create the
/// schema, its table and event, and read and write the deadline.
pub const SIDECAR_DEADLINE_PRIVILEGES: &str = "CREATE, DROP, SELECT, INSERT, UPDATE, EVENT";
/// The replication user every sandbox server has.
pub const REPLICATION_USER: &str = "bloodraven_repl";
/// Its password.
pub const REPLICATION_PASSWORD: &str = "repl-secret";

/// How long a server may take to accept connections after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often readiness is polled.
const READY_POLL: Duration = Duration::from_millis(100);

/// Directories searched for the MariaDB binaries besides `PATH`.
const BINARY_DIRS: [&str; 3] = ["/usr/sbin", "/usr/bin", "/usr/local/bin"];

static NEXT_SANDBOX: AtomicU32 = AtomicU32::new(0);
static TEMPLATE: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();

/// A running `mariadbd` in a temporary directory.
#[derive(Debug)]
pub struct MariaDbServer {
    name: String,
    server_id: u32,
    address: SocketAddr,
    dir: PathBuf,
    child: Option<Child>,
    /// Extra environment of the `mariadbd` process (e.g. libfaketime's, for clock tests).
    env: Vec<(String, String)>,
    /// Started through a gate command and restarted whenever it exits, as a kubelet restarts
    /// a container ([`MariaDbServer::start_gated`]).
    gate: Option<Gate>,
}

/// The argv prefix a gated server runs `mariadbd` behind: given the data directory and the
/// gate's mark ([`MariaDbServer::gate_mark`]).
pub type GateCommand = fn(datadir: &Path, mark: &Path) -> Vec<String>;

/// A gated server's supervisor: a thread that restarts the gate command whenever it exits.
#[derive(Debug)]
struct Gate {
    command: GateCommand,
    child: Arc<Mutex<Option<Child>>>,
    stop: Arc<AtomicBool>,
    restarts: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often the supervisor looks at the gated process.
const SUPERVISE_POLL: Duration = Duration::from_millis(50);

/// Allocates `count` distinct loopback addresses sharing one free port.
///
/// The addresses are `127.a.b.1..=count`, with `a.b` unique to this process and call, so
/// concurrent tests do not collide; the port is one the kernel reported free on all of them.
pub fn loopback_addresses(count: u8) -> LiveResult<Vec<SocketAddr>> {
    let serial = NEXT_SANDBOX.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let second = u8::try_from(20 + pid % 200).unwrap_or(20);
    let third = u8::try_from(serial % 250).unwrap_or(0);
    let ips: Vec<Ipv4Addr> = (1..=count)
        .map(|last| Ipv4Addr::new(127, second, third, last))
        .collect();
    const ATTEMPTS_MAX: usize = 20;
    for _ in 0..ATTEMPTS_MAX {
        let first = ips.first().copied().unwrap_or(Ipv4Addr::LOCALHOST);
        let probe =
            TcpListener::bind((first, 0)).map_err(|e| sandbox_error("bind a loopback port", e))?;
        let port = probe
            .local_addr()
            .map_err(|e| sandbox_error("read a loopback port", e))?
            .port();
        let all_free = ips
            .iter()
            .skip(1)
            .all(|ip| TcpListener::bind((*ip, port)).is_ok());
        drop(probe);
        if all_free {
            return Ok(ips.iter().map(|ip| SocketAddr::from((*ip, port))).collect());
        }
    }
    Err(LiveError::Sandbox {
        what: "find a port free on every sandbox address".to_owned(),
        reason: format!("{ATTEMPTS_MAX} attempts failed"),
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn sandbox_error(what: &str, error: impl std::fmt::Display) -> LiveError {
    LiveError::Sandbox {
        what: what.to_owned(),
        reason: error.to_string(),
    }
}

/// Finds a MariaDB binary, or explains how to install it.
pub fn find_binary(name: &str) -> LiveResult<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(BINARY_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| LiveError::Sandbox {
            what: format!("find {name}"),
            reason: "not on PATH nor in /usr/sbin; install Debian's mariadb-server \
                     (apt-get install -y mariadb-server) to run the tests against real MariaDB"
                .to_owned(),
        })
}

fn running_as_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

fn unique_dir(label: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "bloodraven-{label}-{}-{}-{nanos}",
        std::process::id(),
        NEXT_SANDBOX.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Returns an initialised data directory that servers start from as copies (installing takes
/// seconds, copying milliseconds).
///
/// It is made once per machine with `mariadb-install-db`, at a fixed path under the temporary
/// directory named after the `mariadbd` binary's size and modification time, and kept for
/// later test runs: built under a unique name and renamed into place, so concurrent test
/// processes agree on one copy.
fn template_datadir() -> LiveResult<PathBuf> {
    let lock = TEMPLATE.get_or_init(|| Mutex::new(None));
    let mut guard = lock
        .lock()
        .map_err(|_| sandbox_error("lock the template datadir", "poisoned"))?;
    if let Some(dir) = guard.as_ref() {
        if dir.is_dir() {
            return Ok(dir.clone());
        }
    }
    let mariadbd = find_binary("mariadbd")?;
    let stamp = fs::metadata(&mariadbd)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            format!("{}-{modified}", m.len())
        })
        .map_err(|e| sandbox_error("read the mariadbd binary", e))?;
    let datadir = std::env::temp_dir().join(format!("bloodraven-mariadb-template-{stamp}"));
    if datadir.join("mysql").is_dir() {
        *guard = Some(datadir.clone());
        return Ok(datadir);
    }
    let install = find_binary("mariadb-install-db")?;
    let building = unique_dir("template");
    let mut command = Command::new(install);
    command
        .arg("--no-defaults")
        .arg(format!("--datadir={}", building.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if running_as_root() {
        command.arg("--user=root");
    }
    let output = command
        .output()
        .map_err(|e| sandbox_error("run mariadb-install-db", e))?;
    if !output.status.success() {
        let _ = fs::remove_dir_all(&building);
        return Err(LiveError::Sandbox {
            what: "run mariadb-install-db".to_owned(),
            reason: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    if fs::rename(&building, &datadir).is_err() {
        // Another process won the race; its copy is as good as ours.
        let _ = fs::remove_dir_all(&building);
        if !datadir.join("mysql").is_dir() {
            return Err(sandbox_error(
                "install the template datadir",
                format!("{} is incomplete", datadir.display()),
            ));
        }
    }
    *guard = Some(datadir.clone());
    Ok(datadir)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

impl MariaDbServer {
    /// Starts `mariadbd` named `name` (its `report_host`, which the counter app reports as
    /// `dbHost`) with `server_id`, read-only, listening on `address`, and waits until the
    /// admin user can connect.
    pub async fn start(name: &str, server_id: u32, address: SocketAddr) -> LiveResult<Self> {
        Self::start_with_env(name, server_id, address, Vec::new()).await
    }

    /// [`MariaDbServer::start`] with `env` added to `mariadbd`'s environment (kept across
    /// restarts): a test runs mysqld under libfaketime this way to step its wall clock.
    pub async fn start_with_env(
        name: &str,
        server_id: u32,
        address: SocketAddr,
        env: Vec<(String, String)>,
    ) -> LiveResult<Self> {
        let mariadbd = find_binary("mariadbd")?;
        let template = tokio::task::spawn_blocking(template_datadir)
            .await
            .map_err(|e| sandbox_error("initialise the template datadir", e))??;
        let dir = unique_dir(name);
        let datadir = dir.join("data");
        let copy_from = template.clone();
        let copy_to = datadir.clone();
        tokio::task::spawn_blocking(move || copy_dir(&copy_from, &copy_to))
            .await
            .map_err(|e| sandbox_error("copy the template datadir", e))?
            .map_err(|e| sandbox_error("copy the template datadir", e))?;
        // Users are created with binary logging off, so no server starts with GTIDs of its
        // own that a replica's source would not have.
        let init = format!(
            "SET SESSION sql_log_bin = 0;\n\
             CREATE USER IF NOT EXISTS '{ADMIN_USER}'@'%' IDENTIFIED BY '{ADMIN_PASSWORD}';\n\
             GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'%' WITH GRANT OPTION;\n\
             CREATE USER IF NOT EXISTS '{REPLICATION_USER}'@'%' IDENTIFIED BY '{REPLICATION_PASSWORD}';\n\
             GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{REPLICATION_USER}'@'%';\n\
             CREATE USER IF NOT EXISTS '{SIDECAR_USER}'@'%' IDENTIFIED BY '{SIDECAR_PASSWORD}';\n\
             GRANT {SIDECAR_PRIVILEGES_MARIADB} ON *.* TO '{SIDECAR_USER}'@'%';\n\
             GRANT {SIDECAR_DEADLINE_PRIVILEGES} ON `{DEADLINE_SCHEMA}`.* TO '{SIDECAR_USER}'@'%';\n"
        );
        let init_file = dir.join("init.sql");
        fs::write(&init_file, init).map_err(|e| sandbox_error("write the init file", e))?;
        let mut server = Self {
            name: name.to_owned(),
            server_id,
            address,
            dir,
            child: None,
            env,
            gate: None,
        };
        server.spawn(&mariadbd)?;
        server.wait_ready().await?;
        Ok(server)
    }

    /// [`MariaDbServer::start`] through `gate` (`gate(datadir, mark)` is the argv before
    /// `mariadbd` and its arguments): the process is restarted at once whenever it exits,
    /// as the kubelet restarts a pod's container. Bloodraven's restore gate holds it down while
    /// a restore journal is in the data directory.
    pub async fn start_gated(
        name: &str,
        server_id: u32,
        address: SocketAddr,
        gate: GateCommand,
    ) -> LiveResult<Self> {
        let mut server = Self::start(name, server_id, address).await?;
        server.kill();
        server.gate = Some(Gate {
            command: gate,
            child: Arc::new(Mutex::new(None)),
            stop: Arc::new(AtomicBool::new(false)),
            restarts: Arc::new(AtomicU32::new(0)),
            thread: None,
        });
        server.supervise()?;
        server.wait_ready().await?;
        Ok(server)
    }

    /// The mark a gated server's gate touches while it holds mysqld down.
    pub fn gate_mark(&self) -> PathBuf {
        self.dir.join("mysqld-gate-held")
    }

    /// How many times a gated server's process was restarted after it exited.
    pub fn gate_restarts(&self) -> u32 {
        self.gate
            .as_ref()
            .map_or(0, |gate| gate.restarts.load(Ordering::Relaxed))
    }

    fn supervise(&mut self) -> LiveResult<()> {
        let mariadbd = find_binary("mariadbd")?;
        let Some(gate) = self.gate.as_mut() else {
            return Ok(());
        };
        let mut argv = (gate.command)(&self.dir.join("data"), &self.dir.join("mysqld-gate-held"));
        argv.push(mariadbd.display().to_string());
        argv.extend(Self::mariadbd_args(
            &self.dir,
            self.address,
            self.server_id,
            &self.name,
        ));
        let log_path = self.dir.join("stdout.log");
        let env = self.env.clone();
        let (child, stop, restarts) = (
            Arc::clone(&gate.child),
            Arc::clone(&gate.stop),
            Arc::clone(&gate.restarts),
        );
        stop.store(false, Ordering::Relaxed);
        let name = self.name.clone();
        let spawn = move || -> std::io::Result<Child> {
            let log = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)?;
            Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::from(log.try_clone()?))
                .stderr(Stdio::from(log))
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .spawn()
        };
        let first = spawn().map_err(|e| sandbox_error("spawn the gated mariadbd", e))?;
        *lock(&child) = Some(first);
        gate.thread = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(SUPERVISE_POLL);
                let mut slot = lock(&child);
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let exited = match slot.as_mut().map(Child::try_wait) {
                    Some(Ok(Some(_)) | Err(_)) | None => true,
                    Some(Ok(None)) => false,
                };
                if exited {
                    match spawn() {
                        Ok(next) => {
                            restarts.fetch_add(1, Ordering::Relaxed);
                            tracing::info!(server = %name, pid = next.id(), "gated mariadbd restarted");
                            *slot = Some(next);
                        }
                        Err(error) => {
                            tracing::warn!(server = %name, %error, "restart the gated mariadbd")
                        }
                    }
                }
            }
        }));
        Ok(())
    }

    fn mariadbd_args(dir: &Path, address: SocketAddr, server_id: u32, name: &str) -> Vec<String> {
        let mut args = vec![
            "--no-defaults".to_owned(),
            format!("--datadir={}", dir.join("data").display()),
            format!("--socket={}", dir.join("mysqld.sock").display()),
            format!("--pid-file={}", dir.join("mysqld.pid").display()),
            format!("--log-error={}", dir.join("error.log").display()),
            format!("--init-file={}", dir.join("init.sql").display()),
            format!("--log-bin={}", dir.join("binlog").display()),
            format!("--bind-address={}", address.ip()),
            format!("--port={}", address.port()),
            format!("--server-id={server_id}"),
            format!("--report-host={name}"),
        ];
        args.extend(
            [
                "--log-slave-updates",
                "--read-only",
                "--event-scheduler=ON",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=16M",
                "--innodb-log-file-size=8M",
                "--max-connections=200",
            ]
            .map(str::to_owned),
        );
        if running_as_root() {
            args.push("--user=root".to_owned());
        }
        args
    }

    fn spawn(&mut self, mariadbd: &Path) -> LiveResult<()> {
        if self.gate.is_some() {
            return self.supervise();
        }
        let dir = &self.dir;
        let log = fs::File::create(dir.join("stdout.log"))
            .map_err(|e| sandbox_error("create the server log", e))?;
        let mut command = Command::new(mariadbd);
        command
            .args(Self::mariadbd_args(
                dir,
                self.address,
                self.server_id,
                &self.name,
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                log.try_clone()
                    .map_err(|e| sandbox_error("open the server log", e))?,
            ))
            .stderr(Stdio::from(log))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let child = command
            .spawn()
            .map_err(|e| sandbox_error("spawn mariadbd", e))?;
        tracing::info!(server = %self.name, address = %self.address, pid = child.id(), "mariadbd started");
        self.child = Some(child);
        Ok(())
    }

    async fn wait_ready(&mut self) -> LiveResult<()> {
        let client = self.admin_client();
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            match client.connect().await {
                Ok(conn) => {
                    drop(conn);
                    return Ok(());
                }
                Err(error) => {
                    let exited = match self.child.as_mut().map(Child::try_wait) {
                        Some(Ok(Some(status))) => Some(status.to_string()),
                        Some(Ok(None)) | None | Some(Err(_)) => None,
                    };
                    if let Some(status) = exited {
                        return Err(LiveError::Sandbox {
                            what: format!("start mariadbd {}", self.name),
                            reason: format!("exited with {status}: {}", self.error_log_tail()),
                        });
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(LiveError::Sandbox {
                            what: format!("start mariadbd {}", self.name),
                            reason: format!(
                                "not ready within {READY_TIMEOUT:?} ({error}): {}",
                                self.error_log_tail()
                            ),
                        });
                    }
                    tokio::time::sleep(READY_POLL).await;
                }
            }
        }
    }

    fn error_log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// The server's name (its `report_host`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Connection options for `user`.
    pub fn options(&self, user: &str, password: &str) -> ConnectOptions {
        ConnectOptions {
            host: self.address.ip().to_string(),
            port: self.address.port(),
            user: user.to_owned(),
            password: password.to_owned(),
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(10),
        }
    }

    /// A live client as the admin user.
    pub fn admin_client(&self) -> LiveMysql {
        LiveMysql::new(Flavor::MariaDb, self.options(ADMIN_USER, ADMIN_PASSWORD))
    }

    /// This server as a replication source (by address, as the sandbox has no Service names).
    pub fn as_source(&self) -> ReplicationSource {
        ReplicationSource {
            host: self.address.ip().to_string(),
            port: self.address.port(),
            user: REPLICATION_USER.to_owned(),
            password: REPLICATION_PASSWORD.to_owned(),
            connect_retry_seconds: 1,
        }
    }

    /// The server's data directory.
    pub fn datadir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// mysqld's pid file (`--pid-file`), as a sidecar's watchdog reads it.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("mysqld.pid")
    }

    /// The running mysqld's pid; `None` once it was killed by [`MariaDbServer::kill`].
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// Whether the mysqld started last has exited (reaping it if so): a kill from outside
    /// (a sidecar's watchdog) shows here.
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut().map(std::process::Child::try_wait) {
            Some(Ok(Some(_)) | Err(_)) | None => true,
            Some(Ok(None)) => false,
        }
    }

    /// Kills mysqld (SIGKILL) and waits for it; the data directory stays until drop. A gated
    /// server's supervisor is stopped first (nothing restarts it).
    pub fn kill(&mut self) {
        if let Some(gate) = self.gate.as_mut() {
            gate.stop.store(true, Ordering::Relaxed);
            if let Some(mut child) = lock(&gate.child).take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            if let Some(thread) = gate.thread.take() {
                let _ = thread.join();
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            tracing::info!(server = %self.name, "mariadbd killed");
        }
    }

    /// Starts mysqld again on the same data directory and address (a restart: it comes back
    /// read-only), waiting until it accepts connections.
    pub async fn restart(&mut self) -> LiveResult<()> {
        self.kill();
        let mariadbd = find_binary("mariadbd")?;
        self.spawn(&mariadbd)?;
        self.wait_ready().await
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Three servers replicating with GTIDs: the first is the source, the other two replicate
/// from it. All three are read-only; unfencing the source is left to the caller (the
/// sidecar, or the test).
#[derive(Debug)]
pub struct Topology {
    /// The servers, source first.
    pub servers: Vec<MariaDbServer>,
}

impl Topology {
    /// Starts `names.len()` servers (server ids 1..) and points every one after the first at
    /// the first.
    pub async fn start(names: &[&str]) -> LiveResult<Self> {
        Self::start_with(names, None).await
    }

    /// [`Topology::start`] with every server behind `gate` ([`MariaDbServer::start_gated`]).
    pub async fn start_gated(names: &[&str], gate: GateCommand) -> LiveResult<Self> {
        Self::start_with(names, Some(gate)).await
    }

    async fn start_with(names: &[&str], gate: Option<GateCommand>) -> LiveResult<Self> {
        let count = u8::try_from(names.len()).map_err(|e| sandbox_error("count servers", e))?;
        let addresses = loopback_addresses(count)?;
        let mut servers = Vec::new();
        for (index, (name, address)) in names.iter().zip(addresses).enumerate() {
            let server_id =
                u32::try_from(index + 1).map_err(|e| sandbox_error("number servers", e))?;
            servers.push(match gate {
                Some(gate) => MariaDbServer::start_gated(name, server_id, address, gate).await?,
                None => MariaDbServer::start(name, server_id, address).await?,
            });
        }
        let topology = Self { servers };
        if let Some((source, replicas)) = topology.servers.split_first() {
            let source = source.as_source();
            for replica in replicas {
                let outcome = replica.admin_client().repoint(&source).await;
                if !outcome.is_applied() {
                    return Err(LiveError::Sandbox {
                        what: format!("point {} at the source", replica.name()),
                        reason: format!("{:?}: {:?}", outcome.applied, outcome.error),
                    });
                }
            }
        }
        Ok(topology)
    }
}
