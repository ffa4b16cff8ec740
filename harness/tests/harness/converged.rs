//! The liveness condition after heal, as the backends' `converged()` judge it
//! (`check::converged`): one writable site, replicas healthy (or a returning old primary kept
//! fenced for errant GTIDs), DNS = active site, one acknowledged write after the heal.

use crate::support::Builder;
use bloodraven_harness::check::converged::converged;
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::Site;
use serde_json::{json, Value};

fn site(name: &str, writable: bool, healthy: bool) -> Value {
    json!({"name": name, "reachable": true, "writable": writable, "fenced": false, "healthy": healthy})
}

/// pdx active after an emergency failover from iad; iad as given.
fn status(iad: Value) -> Value {
    json!({
        "activeSite": "pdx",
        "topologyGeneration": 2,
        "authority": {"state": "Valid"},
        "sites": [iad, site("pdx", true, true), site("reader", false, true)],
        "lastFailover": {"kind": "emergency", "from": "iad", "to": "pdx", "exact": true}
    })
}

/// A heal at 40 s, then DNS and endpoints on pdx and (if `write`) a pdx write after it.
fn healed(write: bool) -> History {
    let builder = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .dns(41_000, Site::Pdx)
        .primary_endpoints(41_000, vec![Site::Pdx]);
    if write {
        builder.ok("writer-0", 1, 41_500, 41_520, Site::Pdx).build()
    } else {
        builder.build()
    }
}

#[test]
fn converged_when_every_condition_holds() {
    assert_eq!(
        converged(&status(site("iad", false, true)), &healed(true)),
        None
    );
}

// docs/design/operator.md#returning-primary: a returning primary comes back read-only, is kept
// role=fenced and its errant GTID set is reported; it rejoins only without errant transactions.
#[test]
fn a_returning_primary_kept_fenced_for_errant_gtids_is_converged() {
    let fenced = json!({"name": "iad", "role": "fenced", "reachable": true, "writable": false, "fenced": true, "healthy": false, "errantGtidSet": "0-1-98..100"});
    assert_eq!(converged(&status(fenced.clone()), &healed(true)), None);
    // Not healthy and no errant GTIDs: not converged.
    let unhealthy = json!({"name": "iad", "role": "fenced", "reachable": true, "writable": false, "fenced": true, "healthy": false});
    assert_eq!(
        converged(&status(unhealthy), &healed(true)),
        Some("iad is not healthy".to_owned())
    );
    // Errant but writable: two writable sites.
    let mut writable = fenced.clone();
    writable["writable"] = json!(true);
    assert!(converged(&status(writable), &healed(true))
        .is_some_and(|why| why.starts_with("writable sites [iad, pdx]")));
    // Errant but not fenced.
    let mut serving = fenced.clone();
    serving["fenced"] = json!(false);
    serving["role"] = json!("replica");
    assert!(converged(&status(serving), &healed(true))
        .is_some_and(|why| why.contains("not kept fenced")));
    // Errant GTIDs on a site that was not the old primary.
    let mut reader = status(site("iad", false, true));
    reader["sites"][2] = json!({"name": "reader", "role": "fenced", "reachable": true, "writable": false, "fenced": true, "healthy": false, "errantGtidSet": "0-3-5"});
    assert!(converged(&reader, &healed(true)).is_some_and(|why| why.contains("reader")));
}

// docs/design/operator.md#emergency-failover (step 6): an emergency failover whose old primary is
// readable again reaches `exact`; the harness waited for convergence on a status where iad, just
// thawed, still showed the errant GTIDs of its last reading before the freeze and `exact: false`
// (s021).
#[test]
fn a_readable_old_primary_needs_an_exact_failover_and_a_fresh_reading() {
    let fenced = json!({"name": "iad", "role": "fenced", "reachable": true, "writable": false, "fenced": true, "healthy": false, "errantGtidSet": "0-1-9..10"});
    let mut inexact = status(fenced.clone());
    inexact["lastFailover"]["exact"] = json!(false);
    assert_eq!(
        converged(&inexact, &healed(true)),
        Some(
            "the emergency failover iad -> pdx is not exact though iad is readable again"
                .to_owned()
        )
    );
    // Frozen: the sidecar answers, mysqld does not; the errant set is the last reading's.
    let mut frozen = fenced.clone();
    frozen["reachable"] = json!(false);
    let mut stale = status(frozen);
    stale["lastFailover"]["exact"] = json!(false);
    assert_eq!(
        converged(&stale, &healed(true)),
        Some("iad is unreachable (its errant GTIDs are from its last reading)".to_owned())
    );
    // A planned failover is exact by construction and needs no flag.
    let mut planned = status(site("iad", false, true));
    planned["lastFailover"] = json!({"kind": "planned", "from": "iad", "to": "pdx"});
    assert_eq!(converged(&planned, &healed(true)), None);
}

// After heal, one acknowledged write by the active site, invoked after the heal.
#[test]
fn converged_needs_an_acknowledged_write_after_the_heal() {
    let good = status(site("iad", false, true));
    assert_eq!(
        converged(&good, &healed(false)),
        Some("no write invoked since the heal was acknowledged by pdx".to_owned())
    );
    // Acknowledged, but invoked before the heal.
    let straddling = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .ok("writer-0", 1, 39_000, 41_000, Site::Pdx)
        .dns(41_000, Site::Pdx)
        .build();
    assert!(converged(&good, &straddling).is_some());
    // Acknowledged by another site.
    let elsewhere = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .dns(41_000, Site::Pdx)
        .ok("writer-0", 1, 41_500, 41_520, Site::Iad)
        .build();
    assert!(converged(&good, &elsewhere).is_some());
}

#[test]
fn converged_needs_authority_one_writable_site_dns_and_endpoints() {
    let good = status(site("iad", false, true));
    let mut invalid = good.clone();
    invalid["authority"]["state"] = json!("Invalid");
    assert_eq!(
        converged(&invalid, &healed(true)),
        Some("authority is Invalid".to_owned())
    );
    let mut none_writable = good.clone();
    none_writable["sites"][1]["writable"] = json!(false);
    assert!(converged(&none_writable, &healed(true)).is_some());
    let mut lagging = good.clone();
    lagging["sites"][2]["healthy"] = json!(false);
    assert_eq!(
        converged(&lagging, &healed(true)),
        Some("reader is not healthy".to_owned())
    );
    // DNS still answering iad after the heal.
    let stale = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .dns(39_000, Site::Pdx)
        .dns(41_000, Site::Iad)
        .ok("writer-0", 1, 41_500, 41_520, Site::Pdx)
        .build();
    assert!(converged(&good, &stale).is_some_and(|why| why.starts_with("DNS answers iad")));
    // No DNS answer since the heal.
    let unprobed = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .dns(39_000, Site::Pdx)
        .ok("writer-0", 1, 41_500, 41_520, Site::Pdx)
        .build();
    assert_eq!(
        converged(&good, &unprobed),
        Some("no DNS answer since the heal".to_owned())
    );
    // -primary still selecting the old site.
    let endpoints = Builder::default()
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .dns(41_000, Site::Pdx)
        .primary_endpoints(41_000, vec![Site::Iad, Site::Pdx])
        .ok("writer-0", 1, 41_500, 41_520, Site::Pdx)
        .build();
    assert!(converged(&good, &endpoints).is_some_and(|why| why.starts_with("-primary endpoints")));
}
