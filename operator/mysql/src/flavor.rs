//! The MySQL flavor of a failover group.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The server flavor: decides GTID syntax, statements and status column names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// MariaDB 10.11 (Debian's `mariadb-server`, image `mariadb:10.11`): the default.
    #[default]
    MariaDb,
    /// MySQL 8.4: GTID sets `uuid:interval`, `super_read_only`, `SHOW REPLICA STATUS`.
    MySql,
}

impl Flavor {
    /// The lowercase name used in the CRD (`mariadb` | `mysql`).
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::MariaDb => "mariadb",
            Flavor::MySql => "mysql",
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Flavor {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "mariadb" => Ok(Flavor::MariaDb),
            "mysql" => Ok(Flavor::MySql),
            _ => Err(Error::UnknownFlavor(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/operator.md#mysqlfailovergroup: spec.flavor is `mariadb | mysql`, default
    // mariadb.
    #[test]
    fn flavor_names_round_trip_through_serde_display_and_from_str() {
        for (flavor, name) in [(Flavor::MariaDb, "mariadb"), (Flavor::MySql, "mysql")] {
            assert_eq!(flavor.to_string(), name);
            assert_eq!(name.parse::<Flavor>(), Ok(flavor));
            assert_eq!(
                serde_json::to_string(&flavor).ok(),
                Some(format!("\"{name}\""))
            );
            assert_eq!(
                serde_json::from_str::<Flavor>(&format!("\"{name}\"")).ok(),
                Some(flavor)
            );
        }
        assert_eq!("MariaDB".parse::<Flavor>(), Ok(Flavor::MariaDb));
        assert_eq!(
            "postgres".parse::<Flavor>(),
            Err(Error::UnknownFlavor("postgres".to_string()))
        );
        assert!(serde_json::from_str::<Flavor>("\"MySQL8\"").is_err());
        assert_eq!(Flavor::default(), Flavor::MariaDb);
    }
}
