//! bloodraven-mysql's tests, one test binary (linking one per file cost time on 2 cores): the
//! parsers against recorded server output (`replication_status`, `grants`), the GTID set
//! algebra's properties, and, with the `live` feature, the live client against real mariadbd
//! (`live_*`; the sandbox gives each server its own loopback address, so they run in parallel).

mod grants;
mod gtid_properties;
mod replication_status;

#[cfg(feature = "live")]
mod live_clock_step;
#[cfg(feature = "live")]
mod live_mariadb;
#[cfg(feature = "live")]
mod live_refused;
