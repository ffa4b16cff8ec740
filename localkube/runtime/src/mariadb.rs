//! `localkube-mariadb-entrypoint`: the `mariadb:*` image's entrypoint contract, on the
//! host's MariaDB programs (as the official image's `docker-entrypoint.sh`):
//!
//! - a first argument starting with `-` means `mariadbd ARGS`;
//! - for `mariadbd`/`mysqld`, on first start (no `mysql/` in the datadir, `--datadir` or
//!   `/var/lib/mysql`): `MARIADB_ROOT_PASSWORD` (or `MARIADB_ALLOW_EMPTY_ROOT_PASSWORD`,
//!   `MARIADB_RANDOM_ROOT_PASSWORD`; `MYSQL_*` aliases) is required, the datadir is
//!   initialised with `mariadb-install-db`, a temporary server without networking sets the
//!   root password (`root@'%'` unless `MARIADB_ROOT_HOST`), `MARIADB_DATABASE`,
//!   `MARIADB_USER`/`MARIADB_PASSWORD` (ALL on that database), runs
//!   `/docker-entrypoint-initdb.d/*.{sh,sql,sql.gz,sql.xz,sql.zst}` in name order, and stops;
//! - then execs `mariadbd` with the image's defaults (listen on all addresses,
//!   `skip-name-resolve`, run as `mysql`) before the container's arguments, so the
//!   container's arguments win;
//! - any other command is exec'd as given.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::{Error, Result};

/// The init scripts directory of the official image.
pub const INITDB_DIR: &str = "/docker-entrypoint-initdb.d";
/// The socket the temporary (and by default the real) server uses.
pub const SOCKET: &str = "/run/mysqld/mysqld.sock";
/// How long the temporary server may take to accept connections.
const TEMP_SERVER_START_MAX: Duration = Duration::from_secs(60);

fn env(name: &str) -> Option<String> {
    let alias = name.replacen("MARIADB_", "MYSQL_", 1);
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var(alias).ok().filter(|v| !v.is_empty()))
}

fn log(message: &str) {
    eprintln!("[Entrypoint]: {message}");
}

fn fail(message: String) -> Error {
    Error::Invalid(message)
}

/// Runs the entrypoint with `args` (without `argv[0]`); returns only on failure.
pub fn entrypoint_main(mut args: Vec<String>) -> Result<std::convert::Infallible> {
    if args.is_empty() || args[0].starts_with('-') {
        args.insert(0, "mariadbd".into());
    }
    let is_server = matches!(args[0].as_str(), "mariadbd" | "mysqld");
    let wants_help = args
        .iter()
        .any(|a| matches!(a.as_str(), "--help" | "-?" | "--version" | "-V"));
    if !is_server || wants_help {
        return exec(&args);
    }
    let datadir = datadir_of(&args);
    let mysql_user = nix::unistd::User::from_name("mysql").ok().flatten();
    let as_root = nix::unistd::geteuid().is_root();
    std::fs::create_dir_all(&datadir).map_err(Error::io("create datadir", &datadir))?;
    std::fs::create_dir_all("/run/mysqld")
        .map_err(Error::io("create socket dir", "/run/mysqld"))?;
    if let (true, Some(user)) = (as_root, &mysql_user) {
        chown_recursive(&datadir, user.uid, user.gid)?;
        let _ = nix::unistd::chown("/run/mysqld", Some(user.uid), Some(user.gid));
    }
    let user_flag = if as_root && mysql_user.is_some() {
        vec!["--user=mysql".to_string()]
    } else {
        Vec::new()
    };
    if !datadir.join("mysql").is_dir() {
        initialize(&datadir, &user_flag)?;
    } else {
        log("MariaDB database directory already initialised; skipping initialisation");
    }
    // The image's own defaults first (its config has no bind-address and skips name
    // resolution); the container's arguments come after and win.
    let mut argv = vec![args[0].clone()];
    let mut rest = args[1..].to_vec();
    while rest.first().is_some_and(|a| {
        a.starts_with("--defaults-file")
            || a.starts_with("--defaults-extra-file")
            || a == "--no-defaults"
    }) {
        argv.push(rest.remove(0));
    }
    argv.extend(user_flag);
    argv.push("--bind-address=0.0.0.0".into());
    argv.push("--skip-name-resolve".into());
    argv.push(format!("--socket={SOCKET}"));
    argv.extend(rest);
    log(&format!("starting {}", argv.join(" ")));
    exec(&argv)
}

fn exec(args: &[String]) -> Result<std::convert::Infallible> {
    let err = Command::new(&args[0]).args(&args[1..]).exec();
    Err(Error::io("exec", PathBuf::from(&args[0]))(err))
}

/// `--datadir=X` / `--datadir X` from the arguments, else `/var/lib/mysql`.
pub fn datadir_of(args: &[String]) -> PathBuf {
    let mut result = PathBuf::from("/var/lib/mysql");
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        if let Some(value) = arg.strip_prefix("--datadir=") {
            result = PathBuf::from(value);
        } else if arg == "--datadir" {
            if let Some(value) = iter.peek() {
                result = PathBuf::from(value.as_str());
            }
        }
    }
    result
}

fn chown_recursive(path: &Path, uid: nix::unistd::Uid, gid: nix::unistd::Gid) -> Result<()> {
    nix::unistd::chown(path, Some(uid), Some(gid))
        .map_err(Error::sys(format!("chown {}", path.display())))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path)
            .map_err(Error::io("list", path))?
            .flatten()
        {
            chown_recursive(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Escapes a string for a single-quoted SQL literal.
pub fn sql_string(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "\\'")
}

/// Escapes an identifier for backticks.
pub fn sql_ident(value: &str) -> String {
    value.replace('`', "``")
}

/// The statements that set up root, the database, the user and the replication user (as
/// the official image: `MARIADB_REPLICATION_USER`/`_PASSWORD` get `REPLICATION SLAVE` on
/// `*.*` from any host).
pub fn setup_sql(
    root_password: &str,
    root_host: &str,
    database: Option<&str>,
    user: Option<(&str, &str)>,
    replication: Option<(&str, &str)>,
) -> String {
    let pw = sql_string(root_password);
    let mut sql = String::from(
        "SET @orig_sql_log_bin= @@SESSION.SQL_LOG_BIN; SET @@SESSION.SQL_LOG_BIN=0;\n\
         SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');\n\
         DROP USER IF EXISTS root@'127.0.0.1', root@'::1';\n\
         EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\\'', @@hostname,'\\'');\n",
    );
    sql.push_str(&format!(
        "SET PASSWORD FOR 'root'@'localhost'= PASSWORD('{pw}');\n"
    ));
    if root_host != "localhost" {
        let host = sql_string(root_host);
        sql.push_str(&format!(
            "CREATE USER 'root'@'{host}' IDENTIFIED BY '{pw}';\nGRANT ALL ON *.* TO 'root'@'{host}' WITH GRANT OPTION;\nGRANT PROXY ON ''@'%' TO 'root'@'{host}' WITH GRANT OPTION;\n"
        ));
    }
    if let Some(db) = database {
        sql.push_str(&format!(
            "CREATE DATABASE IF NOT EXISTS `{}`;\n",
            sql_ident(db)
        ));
    }
    if let Some((name, password)) = user {
        let name = sql_string(name);
        sql.push_str(&format!(
            "CREATE USER '{name}'@'%' IDENTIFIED BY '{}';\n",
            sql_string(password)
        ));
        if let Some(db) = database {
            sql.push_str(&format!(
                "GRANT ALL ON `{}`.* TO '{name}'@'%';\n",
                sql_ident(db)
            ));
        }
    }
    if let Some((name, password)) = replication {
        let name = sql_string(name);
        sql.push_str(&format!(
            "CREATE USER '{name}'@'%' IDENTIFIED BY '{}';\nGRANT REPLICATION SLAVE ON *.* TO '{name}'@'%';\n",
            sql_string(password)
        ));
    }
    sql.push_str("FLUSH PRIVILEGES;\nSET @@SESSION.SQL_LOG_BIN=@orig_sql_log_bin;\n");
    sql
}

fn initialize(datadir: &Path, user_flag: &[String]) -> Result<()> {
    let root_password = env("MARIADB_ROOT_PASSWORD");
    let allow_empty = env("MARIADB_ALLOW_EMPTY_ROOT_PASSWORD").is_some();
    let random = env("MARIADB_RANDOM_ROOT_PASSWORD").is_some();
    let root_password = match (root_password, allow_empty, random) {
        (Some(pw), _, _) => pw,
        (None, _, true) => {
            let pw = random_password();
            log(&format!("GENERATED ROOT PASSWORD: {pw}"));
            pw
        }
        (None, true, false) => String::new(),
        (None, false, false) => {
            return Err(fail(
                "initialise database: the database is uninitialized and password option is not specified\n\tYou need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD".into(),
            ))
        }
    };
    log("initializing database files");
    let status = Command::new("mariadb-install-db")
        .arg(format!("--datadir={}", datadir.display()))
        .args(user_flag)
        .args([
            "--rpm",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-log-bin",
            "--expire-logs-days=0",
        ])
        .args([
            "--loose-innodb_buffer_pool_load_at_startup=0",
            "--loose-innodb_buffer_pool_dump_at_shutdown=0",
        ])
        .stdout(Stdio::inherit())
        .status()
        .map_err(Error::io("run", "mariadb-install-db"))?;
    if !status.success() {
        return Err(fail(format!(
            "initialise database: mariadb-install-db exited with {status}"
        )));
    }
    log("database files initialized; starting temporary server");
    let mut server = Command::new("mariadbd")
        .arg(format!("--datadir={}", datadir.display()))
        .args(user_flag)
        .args([
            "--skip-networking",
            "--default-time-zone=SYSTEM",
            "--skip-log-bin",
            "--expire-logs-days=0",
            "--wsrep_on=OFF",
        ])
        .arg(format!("--socket={SOCKET}"))
        .args([
            "--loose-innodb_buffer_pool_load_at_startup=0",
            "--loose-innodb_buffer_pool_dump_at_shutdown=0",
        ])
        .spawn()
        .map_err(Error::io("start temporary server", "mariadbd"))?;
    let result = configure(&mut server, &root_password);
    log("stopping temporary server");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = server.wait();
    result?;
    log("MariaDB init process done; ready for start up");
    Ok(())
}

fn client(password: &str) -> Command {
    let mut cmd = Command::new("mariadb");
    cmd.args([
        "--protocol=socket",
        "-uroot",
        "-hlocalhost",
        &format!("--socket={SOCKET}"),
    ]);
    cmd.env("MYSQL_PWD", password);
    cmd
}

fn run_sql(password: &str, sql: &[u8], database: Option<&str>) -> Result<()> {
    use std::io::Write;
    let mut cmd = client(password);
    if let Some(db) = database {
        cmd.arg(db);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .spawn()
        .map_err(Error::io("run", "mariadb"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(sql)
            .map_err(Error::io("send sql to", "mariadb"))?;
    }
    let status = child.wait().map_err(Error::io("wait for", "mariadb"))?;
    if status.success() {
        Ok(())
    } else {
        Err(fail(format!("run sql: mariadb exited with {status}")))
    }
}

fn configure(server: &mut Child, root_password: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = server.try_wait() {
            return Err(fail(format!(
                "start temporary server: mariadbd exited with {status}"
            )));
        }
        let ok = client("")
            .args(["-e", "SELECT 1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if ok.is_ok_and(|s| s.success()) {
            break;
        }
        if started.elapsed() > TEMP_SERVER_START_MAX {
            return Err(fail(
                "start temporary server: it did not accept connections within 60s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let database = env("MARIADB_DATABASE");
    let user = env("MARIADB_USER");
    let user_password = env("MARIADB_PASSWORD").unwrap_or_default();
    let root_host = env("MARIADB_ROOT_HOST").unwrap_or_else(|| "%".into());
    let replication_user = env("MARIADB_REPLICATION_USER");
    let replication_password = env("MARIADB_REPLICATION_PASSWORD").unwrap_or_default();
    let sql = setup_sql(
        root_password,
        &root_host,
        database.as_deref(),
        user.as_deref().map(|u| (u, user_password.as_str())),
        replication_user
            .as_deref()
            .map(|u| (u, replication_password.as_str())),
    );
    run_sql("", sql.as_bytes(), None)?;
    run_init_scripts(root_password, database.as_deref())
}

fn run_init_scripts(root_password: &str, database: Option<&str>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(INITDB_DIR) else {
        return Ok(());
    };
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    for file in files {
        let name = file
            .file_name()
            .and_then(OsStr::to_str)
            .unwrap_or_default()
            .to_string();
        let decompressor = [(".sql.gz", "gzip"), (".sql.xz", "xz"), (".sql.zst", "zstd")]
            .iter()
            .find(|(suffix, _)| name.ends_with(suffix))
            .map(|(_, tool)| *tool);
        if name.ends_with(".sh") {
            log(&format!("running {name}"));
            let executable =
                std::fs::metadata(&file).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
            let mut cmd = if executable {
                Command::new(&file)
            } else {
                let mut c = Command::new("bash");
                c.arg(&file);
                c
            };
            cmd.env("MARIADB_ROOT_PASSWORD", root_password);
            let status = cmd.status().map_err(Error::io("run init script", &file))?;
            if !status.success() {
                return Err(fail(format!(
                    "run init script {name}: it exited with {status}"
                )));
            }
        } else if name.ends_with(".sql") {
            log(&format!("running {name}"));
            let sql = std::fs::read(&file).map_err(Error::io("read init script", &file))?;
            run_sql(root_password, &sql, database)?;
        } else if let Some(tool) = decompressor {
            log(&format!("running {name}"));
            let output = Command::new(tool)
                .arg("-dc")
                .arg(&file)
                .output()
                .map_err(Error::io("decompress init script", &file))?;
            if !output.status.success() {
                return Err(fail(format!(
                    "decompress init script {name}: {tool} exited with {}",
                    output.status
                )));
            }
            run_sql(root_password, &output.stdout, database)?;
        } else {
            log(&format!("ignoring {name}"));
        }
    }
    Ok(())
}

fn random_password() -> String {
    use sha2::{Digest, Sha256};
    let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
    let digest = Sha256::digest(seed.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datadir_from_args() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            datadir_of(&args(&["mariadbd"])),
            PathBuf::from("/var/lib/mysql")
        );
        assert_eq!(
            datadir_of(&args(&["mariadbd", "--datadir=/d"])),
            PathBuf::from("/d")
        );
        assert_eq!(
            datadir_of(&args(&["mariadbd", "--datadir", "/e"])),
            PathBuf::from("/e")
        );
    }

    // Official image contract: root@'%' unless MARIADB_ROOT_HOST, user gets ALL on the database.
    #[test]
    fn setup_sql_escapes_and_grants() {
        let sql = setup_sql("p'w", "%", Some("app`db"), Some(("app", "secret")), None);
        assert!(sql.contains("PASSWORD('p\\'w')"));
        assert!(sql.contains("CREATE USER 'root'@'%'"));
        assert!(sql.contains("CREATE DATABASE IF NOT EXISTS `app``db`"));
        assert!(sql.contains("GRANT ALL ON `app``db`.* TO 'app'@'%'"));
        let local = setup_sql("x", "localhost", None, None, None);
        assert!(!local.contains("'root'@'%'"));
        assert!(!local.contains("REPLICATION"));
    }

    // Official image contract: MARIADB_REPLICATION_USER/_PASSWORD create a replication user
    // (docs/design/history.md#issue-8: the operator's StatefulSets replicate with it; without
    // it every replica's IO thread was refused with "Access denied for user 'replication'").
    #[test]
    fn setup_sql_creates_the_replication_user() {
        let sql = setup_sql("x", "%", None, None, Some(("replication", "r'pw")));
        assert!(
            sql.contains("CREATE USER 'replication'@'%' IDENTIFIED BY 'r\\'pw'"),
            "{sql}"
        );
        assert!(
            sql.contains("GRANT REPLICATION SLAVE ON *.* TO 'replication'@'%'"),
            "{sql}"
        );
    }
}
