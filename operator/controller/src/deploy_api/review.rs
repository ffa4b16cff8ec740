//! Authentication of deploy clients: a projected ServiceAccount token whose audience is
//! `bloodraven-deploy`, checked with a TokenReview (docs/design/requirements.md R003.4).

use bloodraven_api::names;
use bloodraven_core::deploy::Caller;
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::error::{Error, Result};

/// Why a token was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The API server did not authenticate the token (bad, expired, wrong audience).
    NotAuthenticated(String),
    /// The token is valid but not a ServiceAccount's (`system:serviceaccount:<ns>:<name>`).
    NotServiceAccount(String),
}

/// Checks bearer tokens. The real one asks the API server; tests may supply their own.
pub trait TokenReviewer: Send + Sync {
    /// The ServiceAccount behind `token`, or why it is not accepted; `Err` when the review
    /// itself could not be made.
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Result<Caller, Rejection>>>;
}

/// The caller of a TokenReview answer (pure): authenticated, audience `bloodraven-deploy`
/// among the accepted audiences, and a ServiceAccount user name.
pub fn caller_from_review(status: Option<&TokenReviewStatus>) -> Result<Caller, Rejection> {
    let Some(status) = status else {
        return Err(Rejection::NotAuthenticated(
            "empty token review status".into(),
        ));
    };
    if status.authenticated != Some(true) {
        return Err(Rejection::NotAuthenticated(
            status
                .error
                .clone()
                .unwrap_or_else(|| "token not authenticated".into()),
        ));
    }
    let audience_ok = status.audiences.as_ref().is_some_and(|audiences| {
        audiences
            .iter()
            .any(|audience| audience == names::DEPLOY_AUDIENCE)
    });
    if !audience_ok {
        return Err(Rejection::NotAuthenticated(format!(
            "token audience is not {}",
            names::DEPLOY_AUDIENCE
        )));
    }
    let username = status
        .user
        .as_ref()
        .and_then(|user| user.username.clone())
        .unwrap_or_default();
    caller_from_username(&username).ok_or(Rejection::NotServiceAccount(username))
}

/// `system:serviceaccount:<namespace>:<name>` -> the ServiceAccount (pure).
pub fn caller_from_username(username: &str) -> Option<Caller> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, service_account) = rest.split_once(':')?;
    if namespace.is_empty() || service_account.is_empty() || service_account.contains(':') {
        return None;
    }
    Some(Caller {
        namespace: namespace.to_string(),
        service_account: service_account.to_string(),
    })
}

/// The TokenReview body for `token` with audience `bloodraven-deploy` (pure).
pub fn token_review(token: &str) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: Some(vec![names::DEPLOY_AUDIENCE.to_string()]),
        },
        ..TokenReview::default()
    }
}

/// The real reviewer: `POST /apis/authentication.k8s.io/v1/tokenreviews`.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: Client,
}

impl KubeTokenReviewer {
    /// A reviewer using `client` (the operator's ServiceAccount needs `create tokenreviews`).
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl TokenReviewer for KubeTokenReviewer {
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Result<Caller, Rejection>>> {
        Box::pin(async move {
            let api: Api<TokenReview> = Api::all(self.client.clone());
            let answer = api
                .create(&PostParams::default(), &token_review(token))
                .await
                .map_err(|error| Error::kube("create tokenreview", error))?;
            Ok(caller_from_review(answer.status.as_ref()))
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authentication::v1::UserInfo;

    use super::*;

    fn status(authenticated: bool, audiences: &[&str], username: &str) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(authenticated),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
            user: Some(UserInfo {
                username: Some(username.into()),
                ..UserInfo::default()
            }),
            error: None,
        }
    }

    /// docs/design/requirements.md R003.4: the review asks for audience bloodraven-deploy; the
    /// default API audience is not accepted.
    #[test]
    fn seed_003_review_requires_the_bloodraven_deploy_audience() {
        assert_eq!(
            token_review("t").spec.audiences,
            Some(vec!["bloodraven-deploy".to_string()])
        );
        let ok = status(
            true,
            &["bloodraven-deploy"],
            "system:serviceaccount:ci:deployer",
        );
        assert_eq!(
            caller_from_review(Some(&ok)),
            Ok(Caller {
                namespace: "ci".into(),
                service_account: "deployer".into()
            })
        );
        let api_audience = status(
            true,
            &["https://kubernetes.default.svc"],
            "system:serviceaccount:ci:deployer",
        );
        assert!(matches!(
            caller_from_review(Some(&api_audience)),
            Err(Rejection::NotAuthenticated(_))
        ));
        let refused = status(false, &["bloodraven-deploy"], "");
        assert!(matches!(
            caller_from_review(Some(&refused)),
            Err(Rejection::NotAuthenticated(_))
        ));
        assert!(matches!(
            caller_from_review(None),
            Err(Rejection::NotAuthenticated(_))
        ));
        let user = status(true, &["bloodraven-deploy"], "alice");
        assert_eq!(
            caller_from_review(Some(&user)),
            Err(Rejection::NotServiceAccount("alice".into()))
        );
    }

    #[test]
    fn service_account_usernames_parse_strictly() {
        assert_eq!(
            caller_from_username("system:serviceaccount:ns:sa").map(|c| c.service_account),
            Some("sa".into())
        );
        assert_eq!(caller_from_username("system:serviceaccount:ns"), None);
        assert_eq!(caller_from_username("system:serviceaccount::sa"), None);
        assert_eq!(caller_from_username("system:serviceaccount:ns:a:b"), None);
        assert_eq!(caller_from_username("system:node:iad"), None);
    }
}
