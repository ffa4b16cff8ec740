//! The sidecar's tests, one test binary (linking one per file cost time on 2 cores): the
//! binary's exit codes and log lines (`binary`), discovery against an in-process DNS zone, the
//! HTTP API with mysqld unreachable (`http_api`), and the sidecar against real MariaDB
//! (`live_sidecar`, `backup`, `archive`: each test its own three-site playground from
//! `support`).

mod support;

mod archive;
mod backup;
mod binary;
mod discovery;
mod http_api;
mod live_sidecar;
