//! Canonical host names: the rule behind "the reported source host canonically matches the
//! active site's internal per-site Service" (docs/design/requirements.md R000.7).
//!
//! # Rule
//!
//! 1. Trim whitespace, lowercase (DNS names are case-insensitive) and drop trailing dots
//!    (the fully-qualified spelling).
//! 2. An IP address literal (IPv6 optionally in brackets) is kept, in its standard spelling.
//! 3. A Kubernetes Service or pod name is cut before its `svc` label when that label comes
//!    after at least a name and a namespace: `name.ns.svc.cluster.local`, `name.ns.svc.` and
//!    `name.ns.svc.<any cluster domain>` all become `name.ns`;
//!    `pod.governing.ns.svc.cluster.local` becomes `pod.governing.ns`.
//! 4. Anything else is kept as it is after step 1.
//!
//! A bare single-label name (`mysql-playground-iad`) resolves through the pod's DNS search
//! path in its own namespace; [`canonical_host_in`] qualifies it with that namespace, so it
//! compares equal to `mysql-playground-iad.<ns>.svc.cluster.local`. A pod name behind the
//! headless Service (`mysql-playground-iad-0.mysql-playground-iad-hl.<ns>`) is *not* the
//! internal Service and never compares equal to it.

use std::net::IpAddr;

/// Canonical form of a host name (see the module documentation for the rule).
pub fn canonical_host(host: &str) -> String {
    let lowered = host.trim().to_ascii_lowercase();
    let name = lowered.trim_end_matches('.');
    let unbracketed = name
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(name);
    if let Ok(address) = unbracketed.parse::<IpAddr>() {
        return address.to_string();
    }
    let labels: Vec<&str> = name.split('.').collect();
    match labels.iter().skip(2).position(|label| *label == "svc") {
        Some(index) => labels[..index + 2].join("."),
        None => name.to_string(),
    }
}

/// [`canonical_host`], with a bare single-label name qualified by `namespace` (the namespace
/// whose DNS search path resolves it).
pub fn canonical_host_in(host: &str, namespace: &str) -> String {
    let canonical = canonical_host(host);
    let is_single_label =
        !canonical.is_empty() && !canonical.contains('.') && canonical.parse::<IpAddr>().is_err();
    if is_single_label && !namespace.trim().is_empty() {
        format!("{canonical}.{}", namespace.trim().to_ascii_lowercase())
    } else {
        canonical
    }
}

/// Whether two host names name the same host under the canonical rule, bare names being
/// resolved in `namespace`.
pub fn same_host(left: &str, right: &str, namespace: &str) -> bool {
    let left = canonical_host_in(left, namespace);
    !left.is_empty() && left == canonical_host_in(right, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMESPACE: &str = "bloodraven-playground";

    // docs/design/requirements.md R000.7: the reader's source host must canonically equal the
    // active site's internal Service; every spelling of that Service is the same host.
    #[test]
    fn seed_000_spellings_of_the_internal_service_are_canonically_equal() {
        let spellings = [
            "mysql-playground-iad",
            "MYSQL-playground-iad",
            "mysql-playground-iad.bloodraven-playground",
            "mysql-playground-iad.bloodraven-playground.svc",
            "mysql-playground-iad.bloodraven-playground.svc.cluster.local",
            "mysql-playground-iad.bloodraven-playground.svc.cluster.local.",
            " Mysql-Playground-Iad.Bloodraven-Playground.SVC.Cluster.Local. ",
            "mysql-playground-iad.bloodraven-playground.svc.corp.example",
        ];
        for spelling in spellings {
            assert_eq!(
                canonical_host_in(spelling, NAMESPACE),
                "mysql-playground-iad.bloodraven-playground",
                "{spelling}"
            );
            assert!(same_host(spelling, spellings[4], NAMESPACE), "{spelling}");
        }
    }

    // docs/design/requirements.md R000.7: "the source must be direct, so a replication chain
    // does not count": another site's Service, the pod's headless name, or another namespace
    // are different hosts.
    #[test]
    fn seed_000_other_sites_pods_and_namespaces_are_different_hosts() {
        let active = "mysql-playground-iad.bloodraven-playground.svc.cluster.local";
        for other in [
            "mysql-playground-pdx",
            "mysql-playground-iad-0.mysql-playground-iad-hl.bloodraven-playground.svc.cluster.local",
            "mysql-playground-iad-hl",
            "mysql-playground-iad.other-namespace.svc.cluster.local",
            "10.96.0.12",
            "",
        ] {
            assert!(!same_host(other, active, NAMESPACE), "{other}");
        }
        assert!(!same_host("", "", NAMESPACE));
    }

    #[test]
    fn pod_names_keep_their_governing_service_and_ip_literals_normalise() {
        assert_eq!(
            canonical_host("mysql-playground-iad-0.mysql-playground-iad-hl.ns.svc.cluster.local"),
            "mysql-playground-iad-0.mysql-playground-iad-hl.ns"
        );
        assert_eq!(canonical_host("[FD00::0001]"), "fd00::1");
        assert_eq!(canonical_host_in("10.0.0.7", NAMESPACE), "10.0.0.7");
        // A Service literally named `svc` is not cut.
        assert_eq!(canonical_host("svc.ns.svc.cluster.local"), "svc.ns");
    }
}

#[cfg(test)]
mod properties {
    use super::*;

    proptest::proptest! {
        // The rule is a normal form: applying it twice changes nothing, and equality under
        // it is symmetric.
        #[test]
        fn canonical_host_is_idempotent_and_same_host_symmetric(
            left in "[A-Za-z0-9.-]{0,40}",
            right in "[A-Za-z0-9.-]{0,40}",
        ) {
            let once = canonical_host_in(&left, "ns");
            proptest::prop_assert_eq!(canonical_host_in(&once, "ns"), once.clone());
            proptest::prop_assert_eq!(canonical_host(&canonical_host(&left)), canonical_host(&left));
            proptest::prop_assert_eq!(same_host(&left, &right, "ns"), same_host(&right, &left, "ns"));
        }
    }
}
