//! The write deadline: a dead man's switch inside mysqld.
//!
//! The sidecar fences mysqld when its write lease stops counting, but a sidecar that was
//! killed and kept down, or that hangs, fences nothing; mysqld would go on acknowledging
//! writes while the majority grants the lease to another site
//! (docs/design/history.md#issue-10-case-2). So the sidecar also leaves the rule in mysqld
//! itself: a table holding the instant until which the server may be writable, and an event
//! that every [`SWITCH_PERIOD`] fences the server once that instant has passed. The sidecar
//! pushes the instant forward with every enforcement while its lease counts ([`arm_statement`])
//! and sets it before it ever unfences; if it stops doing so for any reason, mysqld fences
//! itself.
//!
//! The instant is written relative to mysqld's own clock (`NOW(6) + INTERVAL`, computed when
//! the statement runs), so the sidecar's and mysqld's clocks never meet. mysqld's clock is a
//! wall clock, and the lease (docs/design/operator.md#authority-sidecars-and-fencing: "The
//! requester measures expiry on its own monotonic clock") is not: a step of mysqld's wall clock
//! moves the switch against the lease. What each direction does, and why the sidecar's rule
//! ([`clock_step`]) bounds it:
//!
//! - **Forward** by `S`: the deadline passes `S` early, and if `S` exceeds what is left of it
//!   the switch fences a primary whose lease still counts. Inside mysqld that cannot be told
//!   from time really passing (a frozen mysqld thawed after its lease ran out looks exactly
//!   so, and must fence at once), so the event keeps firing on it. The sidecar, whose lease
//!   counts on its monotonic clock, reads mysqld's clock at every arm, sees the step, and the
//!   usual rule unfences: the arm writes `NOW(6) + INTERVAL` on the stepped clock, which is
//!   right again, and a read-only mysqld that the rule wants writable is made writable with
//!   more than the unfence margin of lease left. The write outage is at most one enforcement
//!   period after the event's run (the sidecar wakes at once on a step it saw, and at most a
//!   [`SWITCH_PERIOD`] later while it keeps a primary writable).
//! - **Backward** by `S`: the deadline lies `S` later than the lease, and worse, the event
//!   scheduler waits for its next activation on the wall clock, so the event does not run at
//!   all for `S` (seen with real MariaDB 10.11): even a deadline re-armed on the stepped clock
//!   would not fire. A live sidecar still fences on its monotonic clock, so this matters only
//!   for a sidecar that dies afterwards, which is the case the switch exists for. So the
//!   sidecar, seeing a backward step at an arm, re-creates the event ([`install_statements`]),
//!   which schedules it again from mysqld's new now. From then on the switch fires within the
//!   bound [`writable_for`] gives, measured on the clock mysqld has after the step.
//!
//! The bound that matters is the one of docs/design/operator.md#authority-sidecars-and-fencing:
//! the operator promotes another site only once the old primary's last grant is older than the
//! lease duration plus the clock-drift margin (on the peers' monotonic clocks), so a dead
//! sidecar's mysqld must be read-only by then. [`writable_for`] places the deadline so it is,
//! measured on mysqld's clock at the last arm; each arm re-bases it on mysqld's clock as it is
//! then, and re-creating the event after a backward step makes the scheduler honour it. So a
//! step that happens while the sidecar lives costs at most one enforcement period of it being
//! unseen, and then the bound holds.
//!
//! What remains: a step that happens after the sidecar's last arm (the sidecar is dead or hung
//! at the time of the step, a second fault on the same host) is not seen by anyone, and a
//! backward one delays the switch by `S`. Nothing inside mysqld can see it either: the only
//! clock the event has is the stepped one, and the scheduler does not run while it waits.
//! (A forward one fences early, which is safe.) Keeping a primary's host clock from stepping
//! backwards (slewing NTP) is the deployment's part, as docs/design/requirements.md R003.15
//! asks of the operator's nodes.
//!
//! Everything here runs with `sql_log_bin = 0`: the table, its row and the event are each
//! server's own, never replicated and never given a GTID (a fenced server writing its deadline
//! must not create an errant transaction). The event needs `event_scheduler = ON`.

use std::time::Duration;

use crate::{quote_string, Dialect};

/// The schema holding the deadline table and the event (one per server, never replicated).
pub const DEADLINE_SCHEMA: &str = "bloodraven_sidecar";
/// The table with the one row `id = 1` holding `writable_until`.
pub const DEADLINE_TABLE: &str = "write_deadline";
/// The event that fences the server once `writable_until` has passed.
pub const DEADLINE_EVENT: &str = "fence_at_write_deadline";
/// How often the event runs: the event scheduler's resolution is one second, so the server is
/// read-only at most this long after its deadline.
pub const SWITCH_PERIOD: Duration = Duration::from_secs(1);

/// Margin for the arming statement's own latency after the lease was read.
pub const ARM_SLACK: Duration = Duration::from_millis(100);

/// How far ahead the sidecar arms the deadline with `remaining` of lease left, when its own
/// enforcer fences `fence_lead` before the lease runs out (a quarter of it).
///
/// The deadline must lie after the enforcer's own fence, so a live sidecar fences first and
/// the switch never fires behind a client's table lock on a healthy primary, and the switch
/// (which fires up to a [`SWITCH_PERIOD`] after the deadline) must fence before the operator's
/// wait ends (the lease plus its 1 s clock-drift margin). With a lead longer than a period and
/// [`ARM_SLACK`] (leases of 4.4 s and more; the default is 6 s) the deadline lies that much
/// before expiry, so mysqld is read-only before the lease runs out: 4.9 s of 6 s, after the
/// enforcer's 4.5 s. With a shorter lead it lies half the lead into it: after the enforcer's
/// fence, and read-only at most a period minus half the lead after expiry (3 s: 2.625 s, at
/// most 0.625 s after expiry), still inside the operator's margin.
pub fn writable_for(remaining: Duration, fence_lead: Duration) -> Duration {
    let before_expiry = SWITCH_PERIOD + ARM_SLACK;
    let margin = if fence_lead > before_expiry {
        before_expiry
    } else {
        fence_lead / 2
    };
    remaining.saturating_sub(margin)
}

/// Binary logging off for the session: the switch's writes are the server's own. Run it first
/// on every connection that installs or arms.
pub const NO_BINLOG: &str = "SET SESSION sql_log_bin = 0";

/// A `SELECT` returning one text column `event_scheduler` (`ON` when events run).
pub fn event_scheduler_query() -> &'static str {
    "SELECT @@GLOBAL.event_scheduler AS event_scheduler"
}

/// Whether the value [`event_scheduler_query`] returned means events run.
pub fn event_scheduler_runs(value: &str) -> bool {
    value.eq_ignore_ascii_case("ON") || value == "1"
}

/// Creates the schema, the table (with a deadline already passed: a server is never writable
/// on a switch nobody armed) and the event, replacing an event of an older version. Run on one
/// connection, in order.
pub fn install_statements(dialect: &dyn Dialect) -> Vec<String> {
    let table = qualified(DEADLINE_TABLE);
    let event = qualified(DEADLINE_EVENT);
    vec![
        NO_BINLOG.to_string(),
        format!("CREATE DATABASE IF NOT EXISTS `{DEADLINE_SCHEMA}`"),
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, \
             writable_until DATETIME(6) NOT NULL) ENGINE = InnoDB"
        ),
        format!(
            "INSERT IGNORE INTO {table} (id, writable_until) VALUES (1, '1970-01-02 00:00:00')"
        ),
        format!("DROP EVENT IF EXISTS {event}"),
        format!(
            "CREATE EVENT {event} ON SCHEDULE EVERY {} SECOND ON COMPLETION PRESERVE ENABLE \
             COMMENT {} DO {}",
            SWITCH_PERIOD.as_secs(),
            quote_string("bloodraven: fence this server once its write deadline has passed"),
            event_body(dialect)
        ),
    ]
}

/// The event's body: fence unless a deadline still in the future says otherwise. A missing row
/// counts as a passed deadline.
fn event_body(dialect: &dyn Dialect) -> String {
    let fence = dialect.fence().join("; ");
    format!(
        "IF {} = 0 AND NOT IFNULL(NOW(6) < (SELECT writable_until FROM {} WHERE id = 1), FALSE) \
         THEN {fence}; END IF",
        dialect.fenced_variable(),
        qualified(DEADLINE_TABLE)
    )
}

/// Sets the deadline to `writable_for` from now, by mysqld's clock. Run after [`NO_BINLOG`] on
/// the same connection.
pub fn arm_statement(writable_for: Duration) -> String {
    let micros = u64::try_from(writable_for.as_micros()).unwrap_or(u64::MAX);
    format!(
        "INSERT INTO {} (id, writable_until) VALUES (1, NOW(6) + INTERVAL {micros} MICROSECOND) \
         ON DUPLICATE KEY UPDATE writable_until = VALUES(writable_until)",
        qualified(DEADLINE_TABLE)
    )
}

/// A `SELECT` returning one integer column `now_us`: mysqld's `NOW(6)` (the clock the event
/// compares the deadline with) in microseconds since 2000-01-01, for [`ClockReading`].
pub fn clock_query() -> &'static str {
    "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', NOW(6)) AS SIGNED) AS now_us"
}

/// One reading of mysqld's clock ([`clock_query`]) between two readings of the sidecar's
/// monotonic clock: mysqld read `mysqld_us` at some instant between `before_ms` and `after_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// The sidecar's monotonic clock just before the query was sent, in milliseconds.
    pub before_ms: u64,
    /// The sidecar's monotonic clock once the answer was read, in milliseconds.
    pub after_ms: u64,
    /// mysqld's `NOW(6)`, microseconds since 2000-01-01.
    pub mysqld_us: i64,
}

impl ClockReading {
    /// The bounds of mysqld's clock minus the monotonic clock, in milliseconds: mysqld read
    /// its clock at some monotonic instant in `[before_ms, after_ms]`.
    fn offset_bounds_ms(&self) -> (i64, i64) {
        let mysqld_ms = self.mysqld_us.div_euclid(1000);
        let before = i64::try_from(self.before_ms).unwrap_or(i64::MAX);
        let after = i64::try_from(self.after_ms.max(self.before_ms)).unwrap_or(i64::MAX);
        (mysqld_ms - after, mysqld_ms - before + 1)
    }
}

/// How mysqld's wall clock moved against the sidecar's monotonic clock between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockStep {
    /// Within [`STEP_TOLERANCE`] plus the readings' own uncertainty.
    Steady,
    /// mysqld's clock jumped ahead by at least this much.
    Forward(Duration),
    /// mysqld's clock jumped back by at least this much.
    Backward(Duration),
}

/// How far apart two readings' offsets may lie before [`clock_step`] calls it a step: the
/// clocks' rate drift (a fraction of the lease's clock-drift margin over a few seconds) plus
/// `NOW(6)`'s resolution. Steps below it move the deadline by less than [`ARM_SLACK`].
pub const STEP_TOLERANCE: Duration = ARM_SLACK;

/// Whether mysqld's clock stepped between `previous` and `latest` (taken in that order on the
/// same monotonic clock): the offset of mysqld's clock to the monotonic one is known to lie in
/// an interval at each reading (the query's round trip); a step is certain only when the two
/// intervals lie more than [`STEP_TOLERANCE`] apart, and is reported as that distance (a lower
/// bound of the step).
pub fn clock_step(previous: &ClockReading, latest: &ClockReading) -> ClockStep {
    let (previous_low, previous_high) = previous.offset_bounds_ms();
    let (latest_low, latest_high) = latest.offset_bounds_ms();
    let tolerance = i64::try_from(STEP_TOLERANCE.as_millis()).unwrap_or(i64::MAX);
    let ahead = latest_low - previous_high;
    let behind = previous_low - latest_high;
    let millis = |ms: i64| Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    if ahead > tolerance {
        ClockStep::Forward(millis(ahead))
    } else if behind > tolerance {
        ClockStep::Backward(millis(behind))
    } else {
        ClockStep::Steady
    }
}

/// What the sidecar does after an arm that saw `step`: whether the event must be created
/// again (a backward step stalls the scheduler until mysqld's clock is back where it was).
pub fn reinstall_after(step: ClockStep) -> bool {
    matches!(step, ClockStep::Backward(_))
}

/// A `SELECT` returning one integer column `remaining_ms`: how long until the deadline (negative
/// once it has passed), for tests and diagnostics.
pub fn remaining_query() -> String {
    format!(
        "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, NOW(6), writable_until) DIV 1000 AS SIGNED) \
         AS remaining_ms FROM {} WHERE id = 1",
        qualified(DEADLINE_TABLE)
    )
}

fn qualified(name: &str) -> String {
    format!("`{DEADLINE_SCHEMA}`.`{name}`")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Flavor;

    #[test]
    fn the_event_fences_with_each_flavors_own_variable() {
        let mariadb = install_statements(Flavor::MariaDb.dialect());
        let event = mariadb.last().expect("event");
        assert!(event.contains("IF @@GLOBAL.read_only = 0"), "{event}");
        assert!(
            event.contains("THEN SET GLOBAL read_only = ON; END IF"),
            "{event}"
        );
        let mysql = install_statements(Flavor::MySql.dialect());
        let event = mysql.last().expect("event");
        assert!(event.contains("IF @@GLOBAL.super_read_only = 0"), "{event}");
        assert!(
            event.contains("THEN SET GLOBAL super_read_only = ON; END IF"),
            "{event}"
        );
    }

    #[test]
    fn installing_keeps_the_switch_out_of_the_binlog_from_its_first_statement() {
        let statements = install_statements(Flavor::MariaDb.dialect());
        assert_eq!(statements[0], NO_BINLOG);
        assert_eq!(NO_BINLOG, "SET SESSION sql_log_bin = 0");
    }

    #[test]
    fn arming_writes_the_deadline_in_microseconds_from_mysqlds_now() {
        let statement = arm_statement(Duration::from_millis(1500));
        assert!(
            statement.contains("NOW(6) + INTERVAL 1500000 MICROSECOND"),
            "{statement}"
        );
    }

    #[test]
    fn the_deadline_lies_after_the_enforcers_fence_and_before_the_operators_wait_ends() {
        let ms = Duration::from_millis;
        // The default 6 s lease: lead 1.5 s. The enforcer fences at 4.5 s; the deadline is 4.9 s,
        // the switch fires by 5.9 s, before expiry.
        assert_eq!(writable_for(ms(6000), ms(1500)), ms(4900));
        // The tests' 3 s lease: lead 0.75 s. The enforcer fences at 2.25 s; the deadline is
        // 2.625 s, the switch fires by 3.625 s, inside the operator's 1 s margin.
        assert_eq!(writable_for(ms(3000), ms(750)), ms(2625));
        for (lease, lead) in [(6000, 1500), (3000, 750), (4400, 1100), (20_000, 5000)] {
            let deadline = writable_for(ms(lease), ms(lead));
            assert!(deadline > ms(lease - lead), "{lease}: {deadline:?}");
            assert!(deadline + SWITCH_PERIOD < ms(lease) + Duration::from_secs(1));
        }
        assert_eq!(writable_for(ms(500), ms(1500)), Duration::ZERO);
    }

    fn reading(before_ms: u64, after_ms: u64, mysqld_ms: i64) -> ClockReading {
        ClockReading {
            before_ms,
            after_ms,
            mysqld_us: mysqld_ms * 1000,
        }
    }

    #[test]
    fn clocks_moving_together_are_steady_whatever_their_offset_and_round_trips() {
        let base = 800_000_000_000;
        let first = reading(1_000, 1_003, base);
        assert_eq!(
            clock_step(&first, &reading(3_000, 3_040, base + 2_020)),
            ClockStep::Steady
        );
        // A slow round trip widens the interval: 300 ms of query latency is no step.
        assert_eq!(
            clock_step(&first, &reading(5_000, 5_300, base + 4_290)),
            ClockStep::Steady
        );
        // Drift within the tolerance.
        assert_eq!(
            clock_step(&first, &reading(7_000, 7_002, base + 6_080)),
            ClockStep::Steady
        );
    }

    #[test]
    fn a_step_of_mysqlds_clock_is_seen_in_its_direction_as_a_lower_bound() {
        let base = 800_000_000_000;
        let first = reading(1_000, 1_002, base);
        // +20 s between two arms 2 s apart.
        assert_eq!(
            clock_step(&first, &reading(3_000, 3_002, base + 22_000)),
            ClockStep::Forward(Duration::from_millis(19_997))
        );
        assert_eq!(
            clock_step(&first, &reading(3_000, 3_002, base - 18_000)),
            ClockStep::Backward(Duration::from_millis(19_997))
        );
        // Just past the tolerance either way.
        assert!(matches!(
            clock_step(&first, &reading(3_000, 3_000, base + 2_104)),
            ClockStep::Forward(_)
        ));
        assert!(matches!(
            clock_step(&first, &reading(3_000, 3_000, base + 1_900)),
            ClockStep::Steady
        ));
        assert!(matches!(
            clock_step(&first, &reading(3_000, 3_000, base + 1_890)),
            ClockStep::Backward(_)
        ));
    }

    #[test]
    fn only_a_backward_step_recreates_the_event() {
        assert!(reinstall_after(ClockStep::Backward(Duration::from_secs(
            20
        ))));
        assert!(!reinstall_after(ClockStep::Forward(Duration::from_secs(
            20
        ))));
        assert!(!reinstall_after(ClockStep::Steady));
    }

    #[test]
    fn the_clock_query_reads_the_clock_the_event_compares() {
        assert!(clock_query().contains("NOW(6)"));
        assert!(event_body(Flavor::MariaDb.dialect()).contains("NOW(6) <"));
    }

    #[test]
    fn a_fresh_table_starts_with_its_deadline_passed() {
        let statements = install_statements(Flavor::MariaDb.dialect());
        assert!(statements
            .iter()
            .any(|s| s.starts_with("INSERT IGNORE") && s.contains("'1970-01-02 00:00:00'")));
    }

    #[test]
    fn the_scheduler_reads_on_in_either_spelling() {
        assert!(event_scheduler_runs("ON"));
        assert!(event_scheduler_runs("1"));
        assert!(!event_scheduler_runs("OFF"));
        assert!(!event_scheduler_runs("DISABLED"));
    }
}
