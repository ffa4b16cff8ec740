//! The client workload: a client that follows the DNS record with a new connection per write,
//! and (with `--held-connections`) connections held open across a failover that keep writing
//! to the site they connected to.
//!
//! The DNS-following client lives beside the operator (its network node); the held connections
//! live one beside the operator and one in each read-write site (application pods scheduled
//! there), so a site cut off from the operator may still hear from a client of its own. A
//! write to a frozen mysqld is sent and
//! waits: it commits when mysqld thaws, if `read_only` is still off then, and is acknowledged
//! then (harness scenario 028's `sentWrite`); a kill of the frozen mysqld ends it unexecuted.
//! Every acknowledged write is recorded with its site and its [sent, acknowledged] interval for
//! the harness's split-brain judgement ([`crate::epochs`]).
//!
//! A held connection is what the harness's hold counter is (scenario 037): after a promotion it
//! is still connected to the demoted site and gets `ERROR 1290` (read-only) for every write, and
//! keeps the connection. It reconnects through the DNS record only when the connection breaks
//! (mysqld stops, the sidecar's fence kills client connections, the link is cut) or when its
//! random lifetime ends.

use crate::clock::SimTime;
use crate::network::OPERATOR_NODE;
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};
use rand::Rng;

/// Mean time between the DNS-following client's writes, in milliseconds (about 20 a second).
pub const WRITE_INTERVAL_MILLIS_MEAN: u64 = 50;

/// Probability that a committed write's acknowledgement never reaches the client.
pub const ACK_LOSS_PROBABILITY: f64 = 0.02;

/// How long the DNS-following client waits for a write's answer before it gives up (the write
/// is then `info`: it may still commit, unacknowledged). Shorter than any failover, as the
/// harness's workload guarantees for its overlap check.
pub const CLIENT_TIMEOUT_MILLIS: u64 = 3_000;

/// Network nodes of the held connections with `--held-connections`: the operator's, iad's and
/// pdx's.
pub const HELD_CONNECTION_NODES: [usize; 3] = [OPERATOR_NODE, 0, 1];

/// Mean time between a held connection's writes, in milliseconds.
pub const HELD_WRITE_INTERVAL_MILLIS_MEAN: u64 = 200;

/// Mean lifetime of a held connection before the client reconnects on its own.
pub const HELD_LIFETIME_MILLIS_MEAN: u64 = 30_000;

/// Shortest delay before a broken held connection reconnects.
pub const RECONNECT_MILLIS_MIN: u64 = 100;

/// Longest delay before a broken held connection reconnects.
pub const RECONNECT_MILLIS_MAX: u64 = 1_000;

/// Writes that may wait on one frozen mysqld at once (the client's connection pool); more are
/// refused.
pub const PENDING_WRITES_MAX: usize = 256;

/// A write sent to a frozen mysqld, waiting for it to thaw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingWrite {
    /// The held connection that sent it; `None` for the DNS-following client.
    pub connection: Option<usize>,
    /// When it was sent (the harness's invoke time).
    pub sent_at: SimTime,
    /// When the client stops waiting for the answer; `None`: a held connection waits as long
    /// as its connection lasts.
    pub give_up_at: Option<SimTime>,
}

/// One held connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldConnection {
    /// The network node the client runs on.
    pub node: usize,
    /// The site it is connected to; `None` while reconnecting.
    pub site: Option<usize>,
    /// The site's [`crate::site::Site::connection_generation`] when it connected: a different
    /// one means the connection was dropped.
    pub generation: u64,
    /// When it reconnects on its own.
    pub expires_at: SimTime,
    /// Whether a write is waiting on a frozen mysqld.
    pub in_flight: bool,
}

/// The client workload's state.
#[derive(Debug)]
pub struct ClientState {
    /// The held connections (empty without `--held-connections`).
    pub held: Vec<HeldConnection>,
    /// Per site, the writes waiting on its frozen mysqld, in the order sent.
    pub pending: Vec<Vec<PendingWrite>>,
}

impl ClientState {
    /// No held connection yet, nothing pending, for `site_count` sites.
    pub fn new(site_count: usize) -> ClientState {
        ClientState {
            held: Vec::new(),
            pending: vec![Vec::new(); site_count],
        }
    }
}

impl World {
    /// Starts the workload: the DNS-following client, and the held connections when on.
    pub fn start_clients(&mut self) {
        self.schedule_in(WRITE_INTERVAL_MILLIS_MEAN, Event::Write);
        if !self.cfg.held_connections {
            return;
        }
        for (connection, node) in HELD_CONNECTION_NODES.into_iter().enumerate() {
            self.clients.held.push(HeldConnection {
                node,
                site: None,
                generation: 0,
                expires_at: SimTime(0),
                in_flight: false,
            });
            let delay = self
                .rng
                .random_range(RECONNECT_MILLIS_MIN..=RECONNECT_MILLIS_MAX);
            self.schedule_in(delay, Event::HeldReconnect { connection });
        }
    }

    /// The DNS-following client's write: a new connection to the site the record names.
    pub fn client_write(&mut self) {
        let delay = self.exponential(WRITE_INTERVAL_MILLIS_MEAN);
        self.schedule_in(delay, Event::Write);
        let Some(target) = self.store.dns_target_site() else {
            self.stats.refused_writes += 1;
            return;
        };
        if !self.net.connected(target, OPERATOR_NODE) || !self.sites[target].mysqld_up {
            self.stats.refused_writes += 1;
            return;
        }
        if self.sites[target].frozen {
            let give_up_at = Some(self.now.plus_millis(CLIENT_TIMEOUT_MILLIS));
            self.send_into_freeze(target, None, give_up_at);
            return;
        }
        if self.sites[target].read_only {
            self.stats.refused_writes += 1;
            return;
        }
        self.commit_and_acknowledge(target, self.now);
    }

    /// Commits one write on `site` (which accepts writes) sent at `sent_at`; the client is told
    /// unless the acknowledgement is lost.
    fn commit_and_acknowledge(&mut self, site: usize, sent_at: SimTime) {
        let txn = self.sites[site].commit();
        if self.rng.random_bool(ACK_LOSS_PROBABILITY) {
            // Committed, but the client never learns it: not an acknowledged write.
            return;
        }
        self.checker.on_ack(txn, site, sent_at, self.now);
        self.stats.acked_writes += 1;
    }

    /// A write sent to the frozen mysqld of `site` waits for it.
    fn send_into_freeze(
        &mut self,
        site: usize,
        connection: Option<usize>,
        give_up_at: Option<SimTime>,
    ) {
        if self.clients.pending[site].len() >= PENDING_WRITES_MAX {
            self.stats.refused_writes += 1;
            return;
        }
        self.clients.pending[site].push(PendingWrite {
            connection,
            sent_at: self.now,
            give_up_at,
        });
        if let Some(connection) = connection {
            self.clients.held[connection].in_flight = true;
        }
    }

    /// The held connection's next write.
    pub fn held_write(&mut self, connection: usize) {
        let held = self.clients.held[connection];
        let Some(site) = held.site else {
            return;
        };
        if held.in_flight {
            return;
        }
        let broken = !self.net.connected(site, held.node)
            || !self.sites[site].mysqld_up
            || self.sites[site].connection_generation != held.generation;
        if broken || self.now >= held.expires_at {
            self.drop_held(connection, if broken { "broken" } else { "lifetime" });
            return;
        }
        if self.sites[site].frozen {
            self.send_into_freeze(site, Some(connection), None);
            return;
        }
        if self.sites[site].read_only {
            // ERROR 1290: the server runs with --read-only. The connection stays.
            self.stats.refused_writes += 1;
        } else {
            self.commit_and_acknowledge(site, self.now);
        }
        self.schedule_held_write(connection);
    }

    fn schedule_held_write(&mut self, connection: usize) {
        let delay = self.exponential(HELD_WRITE_INTERVAL_MILLIS_MEAN);
        self.schedule_in(delay, Event::HeldWrite { connection });
    }

    /// The held connection is gone; it reconnects through DNS after a short delay.
    fn drop_held(&mut self, connection: usize, why: &str) {
        let held = &mut self.clients.held[connection];
        let was = held.site.take();
        held.in_flight = false;
        trace!(
            self.trace,
            self.now,
            "client",
            "held connection {connection} to {} closed ({why})",
            was.map_or("-", |s| SITE_NAMES[s])
        );
        let delay = self
            .rng
            .random_range(RECONNECT_MILLIS_MIN..=RECONNECT_MILLIS_MAX);
        self.schedule_in(delay, Event::HeldReconnect { connection });
    }

    /// The held connection (re)connects to the site the DNS record names now.
    pub fn held_reconnect(&mut self, connection: usize) {
        let held = self.clients.held[connection];
        if held.site.is_some() {
            return;
        }
        let target = self
            .store
            .dns_target_site()
            .filter(|&site| self.net.connected(site, held.node) && self.sites[site].answers());
        let Some(site) = target else {
            let delay = self
                .rng
                .random_range(RECONNECT_MILLIS_MIN..=RECONNECT_MILLIS_MAX);
            self.schedule_in(delay, Event::HeldReconnect { connection });
            return;
        };
        let lifetime = self.exponential(HELD_LIFETIME_MILLIS_MEAN);
        self.clients.held[connection] = HeldConnection {
            node: held.node,
            site: Some(site),
            generation: self.sites[site].connection_generation,
            expires_at: self.now.plus_millis(lifetime),
            in_flight: false,
        };
        trace!(
            self.trace,
            self.now,
            "client",
            "held connection {connection} connects to {} (for {lifetime} ms)",
            SITE_NAMES[site]
        );
        self.schedule_held_write(connection);
    }

    /// mysqld of `site` thawed: every write waiting on it executes now, in the order sent. One
    /// that finds `read_only` off commits; the client hears of it if it is still waiting and
    /// still connected.
    pub fn release_pending_writes(&mut self, site: usize) {
        let pending = std::mem::take(&mut self.clients.pending[site]);
        for write in pending {
            let node = write.connection.map_or(OPERATOR_NODE, |connection| {
                self.clients.held[connection].node
            });
            let connected = self.net.connected(site, node);
            let held_alive = write.connection.is_none_or(|connection| {
                let held = self.clients.held[connection];
                held.site == Some(site) && held.generation == self.sites[site].connection_generation
            });
            let waiting = write.give_up_at.is_none_or(|at| self.now <= at);
            if self.sites[site].accepts_writes() {
                if connected && held_alive && waiting {
                    trace!(
                        self.trace,
                        self.now,
                        "client",
                        "write sent into {}'s freeze at {} commits on thaw",
                        SITE_NAMES[site],
                        write.sent_at
                    );
                    self.commit_and_acknowledge(site, write.sent_at);
                } else {
                    // Executed for a client that stopped listening: committed, not acknowledged.
                    self.sites[site].commit();
                }
            } else {
                self.stats.refused_writes += 1;
            }
            if let Some(connection) = write.connection {
                if held_alive {
                    self.clients.held[connection].in_flight = false;
                    self.schedule_held_write(connection);
                }
            }
        }
    }

    /// mysqld of `site` stopped (crash, kill): writes waiting on it were never executed, and
    /// the held connections waiting with them are broken.
    pub fn abandon_pending_writes(&mut self, site: usize) {
        let pending = std::mem::take(&mut self.clients.pending[site]);
        for write in pending {
            self.stats.refused_writes += 1;
            if let Some(connection) = write.connection {
                if self.clients.held[connection].site == Some(site) {
                    self.drop_held(connection, "mysqld stopped");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimConfig;

    fn world(held_connections: bool) -> World {
        let cfg = SimConfig {
            held_connections,
            ..SimConfig::new(3)
        };
        World::new(cfg)
    }

    /// Makes iad writable and the DNS record name it, as after bootstrap.
    fn iad_active(world: &mut World) {
        world.sites[0].read_only = false;
        world.store.dns = Some(bloodraven_api::DNSEndpointSpec::a_record(
            "db",
            &crate::store::cluster_ip(0),
            10,
        ));
    }

    // Scenario 037: a held connection stays on the site it connected to after that site is
    // demoted; it gets ERROR 1290 and keeps writing there, never following DNS by itself.
    #[test]
    fn scenario_037_held_connection_keeps_writing_to_its_site_after_demotion() {
        let mut world = world(true);
        iad_active(&mut world);
        world.held_reconnect(0);
        assert_eq!(world.clients.held[0].site, Some(0));
        world.clients.held[0].expires_at = SimTime(u64::MAX);
        world.held_write(0);
        assert_eq!(world.stats.acked_writes, 1);
        // pdx is promoted and the record follows it; iad is demoted.
        world.sites[0].read_only = true;
        world.sites[1].read_only = false;
        world.store.dns = Some(bloodraven_api::DNSEndpointSpec::a_record(
            "db",
            &crate::store::cluster_ip(1),
            10,
        ));
        let refused = world.stats.refused_writes;
        world.held_write(0);
        assert_eq!(world.clients.held[0].site, Some(0), "still on iad");
        assert_eq!(world.stats.refused_writes, refused + 1);
        // If iad were writable again, the held connection would write to it, not to pdx.
        world.sites[0].read_only = false;
        world.held_write(0);
        assert_eq!(world.stats.acked_writes, 2);
        assert_eq!(world.sites[1].executed.count(), 0);
        // Killing client connections breaks it; it reconnects through DNS to pdx.
        world.sites[0].kill_client_connections();
        world.held_write(0);
        assert_eq!(world.clients.held[0].site, None);
        world.held_reconnect(0);
        assert_eq!(world.clients.held[0].site, Some(1));
    }

    // Scenario 028: a write sent into a freeze waits; it commits and is acknowledged at the
    // thaw if read_only is still off then, and a kill ends it unexecuted.
    #[test]
    fn scenario_028_write_sent_into_a_freeze_completes_on_thaw_or_dies_with_the_kill() {
        let mut world = world(true);
        iad_active(&mut world);
        world.held_reconnect(0);
        world.clients.held[0].expires_at = SimTime(u64::MAX);
        world.sites[0].frozen = true;
        world.held_write(0);
        assert!(world.clients.held[0].in_flight);
        assert_eq!(world.clients.pending[0].len(), 1);
        assert_eq!(world.stats.acked_writes, 0);
        world.now = SimTime(10_000);
        world.sites[0].frozen = false;
        world.release_pending_writes(0);
        assert_eq!(world.stats.acked_writes, 1);
        assert!(!world.clients.held[0].in_flight);
        // Frozen again, then killed: the waiting write never executes.
        world.sites[0].frozen = true;
        world.held_write(0);
        let executed = world.sites[0].executed.count();
        world.sites[0].crash();
        world.abandon_pending_writes(0);
        assert_eq!(world.sites[0].executed.count(), executed);
        assert_eq!(world.clients.held[0].site, None);
        assert_eq!(world.stats.acked_writes, 1);
    }
}
