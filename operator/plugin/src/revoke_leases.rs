//! `kubectl bloodraven revoke-leases GROUP`: revokes every deployment lease of the group by
//! writing the revoke annotation; the operator revokes them (`OperatorRevoked`) and removes it.

use bloodraven_api::{names, Timestamp};
use serde_json::{json, Value};

use crate::cluster::Groups;
use crate::Result;

/// The merge patch `revoke-leases` writes: the revoke annotation, valued with the request
/// time (any value revokes; the operator removes it once done).
pub fn revoke_patch(now: Timestamp) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES: now.to_string()}}})
}

/// Runs `revoke-leases`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str) -> Result<String> {
    let namespace = groups.namespace();
    groups.get(group).await?;
    let now = Timestamp::from_unix_millis(jiff::Timestamp::now().as_millisecond());
    groups.annotate(group, revoke_patch(now)).await?;
    Ok(format!(
        "every deployment lease of {namespace}/{group} will be revoked by the operator (OperatorRevoked)\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/design/requirements.md R003.24: revoking by hand is the revoke-deployment-leases
    /// annotation.
    #[test]
    fn seed_003_revoke_leases_writes_the_revoke_annotation() {
        let patch = revoke_patch(Timestamp::from_unix_millis(0));
        let annotations = patch["metadata"]["annotations"]
            .as_object()
            .expect("annotations");
        assert_eq!(annotations.len(), 1);
        assert_eq!(
            annotations["bloodraven.shipstream.io/revoke-deployment-leases"],
            "1970-01-01T00:00:00.000Z"
        );
    }
}
