//! The counter's table and its app user, built with bloodraven-mysql's grant builder: the
//! user gets privileges on its own database only, none that bypasses read_only.

use bloodraven_mysql::{
    grants::{app_user_grant, create_app_user, read_only_bypasses, GrantFinding},
    quote_identifier, Flavor,
};

use crate::error::Result;

/// The counter's table.
pub const TABLE: &str = "counter";

/// `CREATE TABLE IF NOT EXISTS` for the counter table in `database`.
pub fn create_table(database: &str) -> Result<String> {
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {}.{} (id INT PRIMARY KEY, value BIGINT NOT NULL)",
        quote_identifier(database)?,
        quote_identifier(TABLE)?
    ))
}

/// What an administrator runs on the primary to set the app up: the database, the table, the
/// app user and its one GRANT.
pub fn bootstrap_statements(
    database: &str,
    user: &str,
    host: &str,
    password: &str,
) -> Result<Vec<String>> {
    Ok(vec![
        format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            quote_identifier(database)?
        ),
        create_table(database)?,
        create_app_user(user, host, password)?,
        app_user_grant(database, user, host)?,
    ])
}

/// Checks the app user's own `SHOW GRANTS` lines: anything returned would let it write
/// through a fence.
pub fn bypasses(flavor: Flavor, show_grants: &[String]) -> Vec<GrantFinding> {
    let lines: Vec<&str> = show_grants.iter().map(String::as_str).collect();
    read_only_bypasses(flavor, &lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_user_bootstrap_grants_nothing_that_bypasses_read_only() {
        let statements = bootstrap_statements("app", "counter", "%", "secret").unwrap_or_default();
        assert_eq!(statements.len(), 4);
        let grant = statements.last().cloned().unwrap_or_default();
        assert!(grant.starts_with("GRANT "), "{grant}");
        assert!(
            !grant.contains("SUPER")
                && !grant.contains("READ_ONLY ADMIN")
                && !grant.contains("ON *.*")
        );
        assert!(bypasses(Flavor::MariaDb, &[grant]).is_empty());
        let super_grant = "GRANT SUPER ON *.* TO `counter`@`%`".to_owned();
        assert!(!bypasses(Flavor::MariaDb, &[super_grant]).is_empty());
    }
}
