//! What every sidecar of a group is configured with.

use std::time::Duration;

use super::clock::duration_millis;

/// A configuration the lease rule cannot work with.
///
/// This is the lease module's own error: its constructor is the only fallible step, and it is
/// reported by the sidecar binary at startup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    /// The own site is not one of the group's sites.
    #[error("validate lease config: own site {site:?} is not among the group's sites")]
    OwnSiteMissing {
        /// The configured own site.
        site: String,
    },
    /// A site is named twice.
    #[error("validate lease config: site {site:?} is listed twice")]
    DuplicateSite {
        /// The repeated site.
        site: String,
    },
    /// The lease duration is too short to renew three times within it.
    #[error("validate lease config: lease duration {duration_ms}ms is shorter than 3ms")]
    DurationTooShort {
        /// The configured duration.
        duration_ms: u64,
    },
}

/// The group, this sidecar's site, all sites of the group and the lease duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    group: String,
    site: String,
    sites: Vec<String>,
    duration: Duration,
}

impl LeaseConfig {
    /// Validates and builds a configuration: `site` must be in `sites`, sites are unique and
    /// the duration is at least 3 ms (it is renewed every `duration / 3`).
    pub fn new(
        group: impl Into<String>,
        site: impl Into<String>,
        sites: impl IntoIterator<Item = impl Into<String>>,
        duration: Duration,
    ) -> Result<Self, LeaseConfigError> {
        let site = site.into();
        let mut all: Vec<String> = Vec::new();
        for candidate in sites {
            let candidate = candidate.into();
            if all.contains(&candidate) {
                return Err(LeaseConfigError::DuplicateSite { site: candidate });
            }
            all.push(candidate);
        }
        if !all.contains(&site) {
            return Err(LeaseConfigError::OwnSiteMissing { site });
        }
        let duration_ms = duration_millis(duration);
        if duration_ms < 3 {
            return Err(LeaseConfigError::DurationTooShort { duration_ms });
        }
        Ok(Self {
            group: group.into(),
            site,
            sites: all,
            duration,
        })
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This sidecar's site.
    pub fn site(&self) -> &str {
        &self.site
    }

    /// Every site of the group, this one included.
    pub fn sites(&self) -> &[String] {
        &self.sites
    }

    /// The sites other than this one: the peers asked for a lease.
    pub fn peers(&self) -> impl Iterator<Item = &str> {
        self.sites
            .iter()
            .map(String::as_str)
            .filter(move |s| *s != self.site)
    }

    /// The lease duration this sidecar grants and asks for.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The lease duration in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        duration_millis(self.duration)
    }

    /// How often the active sidecar renews: `duration / 3`.
    pub fn renew_interval_ms(&self) -> u64 {
        self.duration_ms() / 3
    }

    /// Grants needed for a lease: a strict majority of ALL sites, the requester included.
    pub fn majority(&self) -> usize {
        self.sites.len() / 2 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_majority_counts_all_sites_including_the_reader() {
        let config = LeaseConfig::new(
            "playground",
            "iad",
            ["iad", "pdx", "reader"],
            Duration::from_secs(6),
        );
        assert_eq!(config.map(|c| c.majority()), Ok(2));
        let five = LeaseConfig::new("g", "a", ["a", "b", "c", "d", "e"], Duration::from_secs(6));
        assert_eq!(five.map(|c| c.majority()), Ok(3));
    }

    #[test]
    fn lease_renews_every_third_of_the_duration() {
        let config = LeaseConfig::new("g", "iad", ["iad", "pdx"], Duration::from_secs(6));
        assert_eq!(config.map(|c| c.renew_interval_ms()), Ok(2000));
    }

    #[test]
    fn lease_config_rejects_own_site_missing_and_duplicates() {
        assert!(matches!(
            LeaseConfig::new("g", "sfo", ["iad", "pdx"], Duration::from_secs(6)),
            Err(LeaseConfigError::OwnSiteMissing { .. })
        ));
        assert!(matches!(
            LeaseConfig::new("g", "iad", ["iad", "iad"], Duration::from_secs(6)),
            Err(LeaseConfigError::DuplicateSite { .. })
        ));
        assert!(matches!(
            LeaseConfig::new("g", "iad", ["iad"], Duration::from_millis(2)),
            Err(LeaseConfigError::DurationTooShort { .. })
        ));
    }
}
