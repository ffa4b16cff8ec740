//! The counter demo app: `GET /api/counter` reads, `POST /api/counter` increments, through
//! the group's primary Service host; a background poller reads on a timer.
//!
//! Its connection policy is the point of the demo (docs/design/requirements.md R000.20): with
//! [`Policy::Hold`] it keeps one connection forever, so after a failover it keeps talking to
//! the demoted site and every write comes back ERROR 1290; with [`Policy::Reconnect`] it
//! reconnects on ERROR 1290 and whenever the host name resolves elsewhere.
//!
//! - [`config`]: flags and environment.
//! - [`app`]: the counter and its connection.
//! - [`schema`]: the app user's statements (built with bloodraven-mysql's grant builder: no
//!   privilege that bypasses read_only) and the grant check.
//! - [`server`]: the HTTP API and the poller.

pub mod app;
pub mod config;
mod error;
mod http;
mod resolve;
pub mod schema;
pub mod server;

pub use app::{Counter, CounterView, Policy};
pub use config::Config;
pub use error::{Error, Result};
pub use http::HEADER_CONNECTION_ID;
pub use server::{CounterServer, RunningCounter};
