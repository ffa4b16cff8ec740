//! Content negotiation of the `Accept` header (items 4 and 5 of
//! docs/design/history.md#issue-14), as the real server's `NegotiateOutputMediaType`: the first
//! clause this server can produce wins, in the client's order (clauses with `q=0` are skipped);
//! an `Accept` whose every clause is unsupported is 406 NotAcceptable. Only JSON is produced;
//! `as`/`g`/`v` select a conversion: `Table`, `PartialObjectMetadata(List)` on resources,
//! `APIGroupDiscoveryList` on `/api` and `/apis`.

use super::error::ApiError;

/// Which kind of endpoint is negotiating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A resource path (get, list, watch and the writes).
    Resource,
    /// `/api` or `/apis`.
    Discovery,
}

/// What the response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object itself (or the legacy discovery document).
    Object,
    /// A `meta.k8s.io` `Table`.
    Table,
    /// `PartialObjectMetadata` (of one object, or of each watch event's object).
    Metadata,
    /// `PartialObjectMetadataList`.
    MetadataList,
    /// `apidiscovery.k8s.io` `APIGroupDiscoveryList` of this version (`v2` or `v2beta1`).
    Aggregated(&'static str),
}

/// Largest number of `Accept` clauses looked at (a bound on a client's list).
const CLAUSES_MAX: usize = 32;

/// Negotiates the output for `accept` (absent or empty: the object as JSON).
pub fn negotiate(accept: Option<&str>, endpoint: Endpoint) -> Result<Output, ApiError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Output::Object);
    };
    accept
        .split(',')
        .take(CLAUSES_MAX)
        .find_map(|clause| clause_output(clause, endpoint))
        .ok_or_else(|| {
            tracing::debug!(accept, "no acceptable media type");
            ApiError::not_acceptable("application/json")
        })
}

/// The output one clause asks for, if this server can produce it.
fn clause_output(clause: &str, endpoint: Endpoint) -> Option<Output> {
    let mut parts = clause.split(';').map(str::trim);
    let media = parts.next()?.to_ascii_lowercase();
    if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
        return None;
    }
    let (mut as_kind, mut group, mut version) = (None, None, None);
    for param in parts.filter(|part| !part.is_empty()) {
        let (key, v) = param.split_once('=')?;
        let value = v.trim().trim_matches('"');
        match key.trim().to_ascii_lowercase().as_str() {
            "as" => as_kind = Some(value),
            "g" => group = Some(value),
            "v" => version = Some(value),
            "q" if value
                .parse::<f32>()
                .map(|number| number <= 0.0)
                .unwrap_or(true) =>
            {
                return None
            }
            "q" | "pretty" | "stream" | "charset" => {}
            _ => return None,
        }
    }
    conversion(as_kind, group, version, endpoint)
}

fn conversion(
    as_kind: Option<&str>,
    group: Option<&str>,
    version: Option<&str>,
    endpoint: Endpoint,
) -> Option<Output> {
    let meta_version = matches!(version, Some("v1" | "v1beta1"));
    match (endpoint, as_kind, group) {
        (_, None, None) if version.is_none() => Some(Output::Object),
        (Endpoint::Resource, Some("Table"), Some("meta.k8s.io")) if meta_version => {
            Some(Output::Table)
        }
        (Endpoint::Resource, Some("PartialObjectMetadata"), Some("meta.k8s.io"))
            if meta_version =>
        {
            Some(Output::Metadata)
        }
        (Endpoint::Resource, Some("PartialObjectMetadataList"), Some("meta.k8s.io"))
            if meta_version =>
        {
            Some(Output::MetadataList)
        }
        (Endpoint::Discovery, Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io")) => {
            match version {
                Some("v2") => Some(Output::Aggregated("v2")),
                Some("v2beta1") => Some(Output::Aggregated("v2beta1")),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;

    #[test]
    fn issue14_first_supported_clause_wins() {
        let r = Endpoint::Resource;
        assert_eq!(negotiate(None, r), Ok(Output::Object));
        assert_eq!(
            negotiate(
                Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
                r
            ),
            Ok(Output::Metadata)
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=Nope;g=meta.k8s.io;v=v1, application/json;as=Table;v=v1;g=meta.k8s.io"),
                r
            ),
            Ok(Output::Table)
        );
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf, */*"), r),
            Ok(Output::Object)
        );
        let e = negotiate(Some("application/yaml"), r).expect_err("406");
        assert_eq!((e.code, e.reason), (406, Reason::NotAcceptable));
        let error = negotiate(Some("application/json;q=0"), r).expect_err("q=0");
        assert_eq!(error.code, 406);
        let endpoint = Endpoint::Discovery;
        assert_eq!(
            negotiate(
                Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"),
                endpoint
            ),
            Ok(Output::Aggregated("v2"))
        );
        assert_eq!(
            negotiate(Some("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json"), endpoint),
            Ok(Output::Object)
        );
    }
}
