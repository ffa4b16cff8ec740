//! Application users never get privileges that bypass read_only
//! (docs/design/architecture.md#mysql): otherwise fencing is a lie.
//!
//! [`app_user_grant`] builds the only GRANT an application user gets: database-level
//! privileges on its own schema, nothing global. [`read_only_bypasses`] checks a
//! `SHOW GRANTS` output for anything that would let the user write through a fence or lift
//! it.

use serde::{Deserialize, Serialize};

use crate::{quote_identifier, quote_string, Error, Flavor, Result};

/// The privileges an application user gets on its own database: data access and schema
/// migrations. None of them is global, so none bypasses read_only.
pub const APP_USER_PRIVILEGES: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "REFERENCES",
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
    "EXECUTE",
    "CREATE VIEW",
    "SHOW VIEW",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "EVENT",
    "TRIGGER",
];

/// Global privileges that let a user write while the server is fenced, or lift the fence:
/// `(flavor it applies to or None for both, privilege with spaces and underscores removed,
/// reason)`.
const BYPASS_PRIVILEGES: &[(Option<Flavor>, &str, &str)] = &[
    (None, "ALL", "global ALL includes SUPER"),
    (None, "ALLPRIVILEGES", "global ALL includes SUPER"),
    (
        None,
        "SUPER",
        "SUPER writes through read_only (MariaDB 10.11) and can turn the fence off",
    ),
    (
        Some(Flavor::MariaDb),
        "READONLYADMIN",
        "READ_ONLY ADMIN writes through read_only and can turn it off",
    ),
    (
        Some(Flavor::MySql),
        "CONNECTIONADMIN",
        "CONNECTION_ADMIN writes through read_only",
    ),
    (
        Some(Flavor::MySql),
        "SYSTEMVARIABLESADMIN",
        "SYSTEM_VARIABLES_ADMIN can turn super_read_only off",
    ),
];

/// `CREATE USER IF NOT EXISTS` for an application user.
pub fn create_app_user(user: &str, host: &str, password: &str) -> Result<String> {
    Ok(format!(
        "CREATE USER IF NOT EXISTS {} IDENTIFIED BY {}",
        account(user, host)?,
        quote_string(password)
    ))
}

/// The GRANT for an application user: [`APP_USER_PRIVILEGES`] on `database`.* only (no
/// SUPER, no READ_ONLY ADMIN, no global ALL). `_` and `%` in the database name are escaped,
/// because GRANT reads them as wildcards.
pub fn app_user_grant(database: &str, user: &str, host: &str) -> Result<String> {
    if database.is_empty() || database.contains('\0') || database.contains('\\') {
        return Err(Error::InvalidStatementInput(format!(
            "database name {database:?} is empty or contains NUL or backslash"
        )));
    }
    let escaped = database.replace('_', "\\_").replace('%', "\\%");
    Ok(format!(
        "GRANT {} ON {}.* TO {}",
        APP_USER_PRIVILEGES.join(", "),
        quote_identifier(&escaped)?,
        account(user, host)?
    ))
}

fn account(user: &str, host: &str) -> Result<String> {
    if user.is_empty() || user.contains('\0') || host.is_empty() || host.contains('\0') {
        return Err(Error::InvalidStatementInput(format!(
            "account {user:?}@{host:?} has an empty part or NUL"
        )));
    }
    Ok(format!("{}@{}", quote_string(user), quote_string(host)))
}

/// One `SHOW GRANTS` line that would let the user bypass or lift the fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantFinding {
    /// The offending line.
    pub line: String,
    /// The privilege (or role) found.
    pub privilege: String,
    /// Why it defeats fencing.
    pub reason: String,
}

/// Checks the lines of `SHOW GRANTS FOR <user>` and returns every grant that would let the
/// user write while fenced or turn the fence off; an empty result means fencing holds for
/// this user. A granted role is reported too, because its privileges are not in this output:
/// pass the role's own `SHOW GRANTS` lines along to clear it.
pub fn read_only_bypasses(flavor: Flavor, show_grants: &[&str]) -> Vec<GrantFinding> {
    let mut findings = Vec::new();
    let shown_roles: Vec<String> = show_grants
        .iter()
        .filter_map(|line| grant_parts(line))
        .map(|(_, _, grantee)| normalise_account(grantee))
        .collect();
    for line in show_grants {
        let Some((privileges, target, _)) = grant_parts(line) else {
            continue;
        };
        let Some(target) = target else {
            // `GRANT role TO user`: role grant.
            for role in split_top_level(privileges) {
                if !shown_roles.contains(&normalise_account(role)) {
                    findings.push(GrantFinding {
                        line: line.to_string(),
                        privilege: role.to_string(),
                        reason: "role grant whose privileges are not shown".to_string(),
                    });
                }
            }
            continue;
        };
        if target.replace('`', "") != "*.*" {
            continue;
        }
        for privilege in split_top_level(privileges) {
            let key: String = privilege
                .chars()
                .filter(|c| !c.is_whitespace() && *c != '_')
                .collect::<String>()
                .to_ascii_uppercase();
            if let Some((_, _, reason)) = BYPASS_PRIVILEGES
                .iter()
                .find(|(applies, name, _)| *name == key && applies.is_none_or(|f| f == flavor))
            {
                findings.push(GrantFinding {
                    line: line.to_string(),
                    privilege: privilege.to_string(),
                    reason: (*reason).to_string(),
                });
            }
        }
    }
    findings
}

/// Splits `GRANT <privileges> [ON <target>] TO <grantee> ...` into its parts
/// (target `None` for a role grant). Other lines (`SET DEFAULT ROLE`, comments) give `None`.
fn grant_parts(line: &str) -> Option<(&str, Option<&str>, &str)> {
    let rest = strip_keyword(line.trim(), "GRANT ")?;
    let to = find_keyword(rest, " TO ")?;
    let (head, grantee) = (&rest[..to], rest[to + 4..].trim());
    let grantee = grantee.split_whitespace().next().unwrap_or_default();
    match find_keyword(head, " ON ") {
        Some(on) => Some((head[..on].trim(), Some(head[on + 4..].trim()), grantee)),
        None => Some((head.trim(), None, grantee)),
    }
}

fn strip_keyword<'a>(text: &'a str, keyword: &str) -> Option<&'a str> {
    let head = text.get(..keyword.len())?;
    head.eq_ignore_ascii_case(keyword)
        .then(|| &text[keyword.len()..])
}

/// Byte offset of `keyword` (case-insensitive) outside quotes and parentheses.
fn find_keyword(text: &str, keyword: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (index, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, _) if depth == 0 => {
                if text
                    .get(index..index + keyword.len())
                    .is_some_and(|candidate| candidate.eq_ignore_ascii_case(keyword))
                {
                    return Some(index);
                }
            }
            (None, _) => {}
        }
    }
    None
}

/// Splits on commas outside parentheses and quotes (column privileges carry lists).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut quote) = (0usize, 0usize, None::<char>);
    for (index, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                parts.push(text[start..index].trim());
                start = index + 1;
            }
            (None, _) => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|part| !part.is_empty());
    parts
}

/// An account or role name without quoting, lowercased, with `@'%'` for a bare role.
fn normalise_account(name: &str) -> String {
    let unquoted: String = name
        .chars()
        .filter(|c| !matches!(c, '`' | '\'' | '"'))
        .collect();
    unquoted.to_ascii_lowercase()
}
