//! Who a request comes from: authentication (client certificate, bearer token, anonymous on
//! public paths) and impersonation.

use super::ServerState;
use crate::auth::{self, Attributes, ClientCertificate, UserInfo};
use crate::error::ApiError;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

/// The user a request acts as: its authenticated user, impersonating whom its
/// `Impersonate-*` headers ask for; without credentials `system:anonymous` on a `public`
/// path, else 401.
pub(super) fn user(st: &ServerState, parts: &Parts, public: bool) -> Result<UserInfo, ApiError> {
    let cert = st
        .client_ca
        .identify(parts.extensions.get::<crate::tls::PeerCertificates>());
    match authenticate(st, &parts.headers, &cert)? {
        Some(user_info) => impersonate(st, user_info, &parts.headers),
        None if public => Ok(UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }),
        None => Err(ApiError::unauthorized()),
    }
}

/// The request's user, as kube-apiserver's authenticators in order: a valid client
/// certificate, else a bearer token; an invalid certificate without a valid token is 401
/// (also on public paths: no fallback to anonymous after a failed credential).
fn authenticate(
    st: &ServerState,
    headers: &HeaderMap,
    cert: &ClientCertificate,
) -> Result<Option<UserInfo>, ApiError> {
    if let ClientCertificate::Valid(user) = cert {
        return Ok(Some(user.clone()));
    }
    let Some(header_value) = headers.get(header::AUTHORIZATION) else {
        if let ClientCertificate::Invalid(why) = cert {
            tracing::debug!(reason = %why, "client certificate authentication failed");
            return Err(ApiError::unauthorized());
        }
        return Ok(None);
    };
    let value = header_value
        .to_str()
        .map_err(|_| ApiError::unauthorized())?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(ApiError::unauthorized)?
        .trim();
    match st.cluster.auth.authenticate(token, &[], &st.cluster.store) {
        Ok((user_info, _)) => Ok(Some(user_info)),
        Err(why) => {
            tracing::debug!(reason = %why, "authentication failed");
            Err(ApiError::unauthorized())
        }
    }
}

fn impersonate(
    st: &ServerState,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let name = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    if name.is_none() && groups.is_empty() {
        return Ok(user);
    }
    let Some(name) = name else {
        return Err(ApiError::bad_request(
            "requested impersonation of groups without impersonating a user",
        ));
    };
    let check = |resource: &str, namespace: &str, name: &str| {
        authorize_impersonation(st, &user, resource, namespace, name)
    };
    let mut new = UserInfo {
        name: name.clone(),
        ..Default::default()
    };
    if let Some(rest) = name.strip_prefix("system:serviceaccount:") {
        let (ns, sa) = rest.split_once(':').unwrap_or(("", rest));
        check("serviceaccounts", ns, sa)?;
        if groups.is_empty() {
            new.groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
    } else {
        check("users", "", &name)?;
    }
    for g in &groups {
        check("groups", "", g)?;
        new.groups.push(g.clone());
    }
    if let Some(uid) = headers.get("impersonate-uid").and_then(|v| v.to_str().ok()) {
        new.uid = uid.into();
    }
    for (header_name, header_value) in headers {
        if let Some(key) = header_name.as_str().strip_prefix("impersonate-extra-") {
            if let Ok(value) = header_value.to_str() {
                new.extra
                    .entry(key.to_string())
                    .or_default()
                    .push(value.into());
            }
        }
    }
    if !new
        .groups
        .iter()
        .any(|group| group == "system:authenticated")
        && name != "system:anonymous"
    {
        new.groups.push("system:authenticated".into());
    }
    Ok(new)
}

/// The `impersonate` verb on `resource` (serviceaccounts, users, groups) named `name`.
fn authorize_impersonation(
    st: &ServerState,
    user: &UserInfo,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let attributes = Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    };
    if auth::authorize(&st.cluster.store, user, &attributes) {
        Ok(())
    } else {
        Err(attributes.forbidden(user))
    }
}
