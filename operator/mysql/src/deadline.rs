//! The write deadline: a dead man's switch inside mysqld.
//!
//! The sidecar fences mysqld when its write lease stops counting, but a sidecar that was
//! killed and kept down, or that hangs, fences nothing; mysqld would go on acknowledging
//! writes while the majority grants the lease to another site (issue 10, case 2). So the
//! sidecar also leaves the rule in mysqld itself: a table holding the instant until which the
//! server may be writable, and an event that every [`SWITCH_PERIOD`] fences the server once
//! that instant has passed. The sidecar pushes the instant forward with every enforcement while
//! its lease counts ([`arm_statement`]) and sets it before it ever unfences; if it stops doing
//! so for any reason, mysqld fences itself.
//!
//! The instant is written relative to mysqld's own clock (`NOW(6) + INTERVAL`, computed when the statement runs), so the sidecar's
//! and mysqld's clocks never meet; a backwards step of the wall clock would delay the switch by
//! that step (a live sidecar still fences on its monotonic clock).
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
