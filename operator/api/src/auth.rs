//! Request signatures of the sidecar API (feature `auth`; docs/design/history.md#issue-10-case-8).
//!
//! Only the operator may push authority or ask a sidecar to fence, promote, repoint or
//! create a database, and only a sidecar of the same group may ask for a write lease. Every
//! such request carries three headers:
//!
//! | header | value |
//! |---|---|
//! | [`HEADER_TIMESTAMP`] | the signer's wall clock, unix milliseconds |
//! | [`HEADER_NONCE`] | [`NONCE_BYTES`] random bytes, hex |
//! | [`HEADER_SIGNATURE`] | `<scheme> <hex>`: `ed25519` (the operator) or `hmac-sha256` (a peer) |
//!
//! The signature covers the scheme, the group and site addressed, the method, the API path,
//! the timestamp, the nonce and the SHA-256 of the body ([`canonical_message`]): a request
//! captured on its way to one site does not verify at another (a fence meant for the old
//! primary cannot be replayed at the new one). The operator signs with a
//! per-group Ed25519 key whose private half only it holds ([`OperatorKey`]); sidecars hold the
//! verifying half ([`OperatorVerifyingKey`]) and a per-group HMAC-SHA256 secret they share
//! with each other ([`PeerKey`]). A peer can therefore sign lease requests but never an
//! operator command, and nothing a sidecar holds lets it impersonate the operator.
//!
//! [`Verifier`] checks a request: headers present and well formed, the scheme the endpoint
//! demands ([`required_principal`]), the signature, a timestamp within [`SIGNATURE_SKEW_MAX`]
//! of the verifier's clock, and a nonce not seen within that window. Time is an input: nothing
//! here reads a clock or an RNG (the callers pass the wall clock and random bytes).

use std::{collections::BTreeSet, fmt, time::Duration};

use ring::{
    digest, hmac,
    signature::{self, Ed25519KeyPair, KeyPair},
};

use crate::{sidecar::PATH_LEASE, Error, Result, Timestamp};

/// Header carrying the signer's wall clock in unix milliseconds.
pub const HEADER_TIMESTAMP: &str = "x-bloodraven-timestamp";
/// Header carrying the request's nonce (hex).
pub const HEADER_NONCE: &str = "x-bloodraven-nonce";
/// Header carrying `<scheme> <hex signature>`.
pub const HEADER_SIGNATURE: &str = "x-bloodraven-signature";
/// How far a request's timestamp may lie from the verifier's wall clock, either way. Sites'
/// clocks are NTP-synchronised (the clock-drift margin of
/// docs/design/operator.md#authority-sidecars-and-fencing, `CLOCK_DRIFT_MARGIN`, is far
/// smaller); a request is sent within a poll of being signed.
pub const SIGNATURE_SKEW_MAX: Duration = Duration::from_secs(30);
/// Random bytes in a nonce.
pub const NONCE_BYTES: usize = 16;
/// Bytes of an Ed25519 seed, an Ed25519 public key, and the least a peer key may have.
pub const KEY_BYTES: usize = 32;
/// How many (timestamp, nonce) pairs a [`Verifier`] remembers at most. At the fastest poll
/// (an eighth of a 2 s interval) an operator sends about 40 requests a second to a sidecar;
/// a minute's window of that is under a sixth of this bound.
pub const REPLAY_NONCES_MAX: usize = 16_384;
/// Domain separation: the first line of every signed message.
const MESSAGE_PREFIX: &str = "bloodraven-sidecar-request-v1";

/// Who must have signed a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    /// The operator, with its Ed25519 key ([`OperatorKey`]).
    Operator,
    /// A sidecar of the same group, with the group's peer key ([`PeerKey`]).
    Peer,
}

impl Principal {
    /// The scheme named in [`HEADER_SIGNATURE`].
    pub fn scheme(self) -> &'static str {
        match self {
            Principal::Operator => "ed25519",
            Principal::Peer => "hmac-sha256",
        }
    }

    /// What signs for this principal, for error messages.
    pub fn key_name(self) -> &'static str {
        match self {
            Principal::Operator => "the operator's key",
            Principal::Peer => "the group's peer key",
        }
    }
}

/// Who must have signed `method path`, or `None` for an open endpoint.
///
/// Reads (`GET`, `HEAD`: status, healthz, metrics) are open: the kubelet probes them and the
/// operator's status read must work before it holds keys. `POST /v1/lease` takes a peer's
/// signature. Everything else, including paths this table does not know, takes the
/// operator's: a mutation added later is closed until someone decides otherwise.
pub fn required_principal(method: &str, path: &str) -> Option<Principal> {
    if method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD") {
        None
    } else if method.eq_ignore_ascii_case("POST") && path == PATH_LEASE {
        Some(Principal::Peer)
    } else {
        Some(Principal::Operator)
    }
}

/// The parts of a request a signature covers (besides timestamp and nonce).
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The group of the sidecar addressed (a signature never verifies at another group).
    pub group: &'a str,
    /// The site of the sidecar addressed (a signature never verifies at another site).
    pub site: &'a str,
    /// The HTTP method, upper case.
    pub method: &'a str,
    /// The API path (`/v1/authority`), without scheme, host or query.
    pub path: &'a str,
    /// The body, byte for byte as sent.
    pub body: &'a [u8],
}

/// When and under which nonce a request is signed (inputs: nothing here reads a clock or
/// an RNG).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The signer's wall clock.
    pub timestamp: Timestamp,
    /// Random bytes, unique per request.
    pub nonce: [u8; NONCE_BYTES],
}

/// The three header values of a signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeaders {
    /// Value of [`HEADER_TIMESTAMP`].
    pub timestamp: String,
    /// Value of [`HEADER_NONCE`].
    pub nonce: String,
    /// Value of [`HEADER_SIGNATURE`].
    pub signature: String,
}

impl AuthHeaders {
    /// `(name, value)` of each header.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            (HEADER_TIMESTAMP, self.timestamp.as_str()),
            (HEADER_NONCE, self.nonce.as_str()),
            (HEADER_SIGNATURE, self.signature.as_str()),
        ]
    }
}

/// The bytes signed for `request` under `stamp` by `principal`: one line each for the prefix,
/// the scheme, the group, the site, the method, the path, the timestamp, the nonce (hex) and
/// the body's SHA-256 (hex).
pub fn canonical_message(
    principal: Principal,
    request: &SignedRequest<'_>,
    stamp: &Stamp,
) -> Vec<u8> {
    let body_digest = digest::digest(&digest::SHA256, request.body);
    format!(
        "{MESSAGE_PREFIX}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        principal.scheme(),
        request.group,
        request.site,
        request.method.to_ascii_uppercase(),
        request.path,
        stamp.timestamp.unix_millis(),
        to_hex(&stamp.nonce),
        to_hex(body_digest.as_ref()),
    )
    .into_bytes()
}

fn headers(principal: Principal, stamp: &Stamp, signature: &[u8]) -> AuthHeaders {
    AuthHeaders {
        timestamp: stamp.timestamp.unix_millis().to_string(),
        nonce: to_hex(&stamp.nonce),
        signature: format!("{} {}", principal.scheme(), to_hex(signature)),
    }
}

/// The operator's per-group signing key (Ed25519). Only the operator holds it.
pub struct OperatorKey {
    pair: Ed25519KeyPair,
}

impl fmt::Debug for OperatorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorKey")
            .field("verifying_key", &self.verifying_key())
            .finish_non_exhaustive()
    }
}

impl OperatorKey {
    /// The key of a [`KEY_BYTES`]-byte seed (the operator draws it from the OS RNG).
    pub fn from_seed(seed: &[u8; KEY_BYTES]) -> Result<Self> {
        Ed25519KeyPair::from_seed_unchecked(seed)
            .map(|pair| Self { pair })
            .map_err(|error| key_error("operator signing key", error.to_string()))
    }

    /// The key of a hex seed (the Secret's text; surrounding whitespace is ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        let seed = exact_bytes::<KEY_BYTES>("operator signing key", text)?;
        Self::from_seed(&seed)
    }

    /// The half sidecars verify with.
    pub fn verifying_key(&self) -> OperatorVerifyingKey {
        let mut bytes = [0u8; KEY_BYTES];
        bytes.copy_from_slice(self.pair.public_key().as_ref());
        OperatorVerifyingKey(bytes)
    }

    /// The signature of `annotation`: `ed25519:<hex>`.
    pub fn sign_annotation(&self, annotation: &SignedAnnotation<'_>) -> String {
        let signature = self.pair.sign(&annotation_message(annotation));
        format!(
            "{}:{}",
            Principal::Operator.scheme(),
            to_hex(signature.as_ref())
        )
    }

    /// The headers of `request` signed under `stamp`.
    pub fn sign(&self, request: &SignedRequest<'_>, stamp: &Stamp) -> AuthHeaders {
        let message = canonical_message(Principal::Operator, request, stamp);
        headers(
            Principal::Operator,
            stamp,
            self.pair.sign(&message).as_ref(),
        )
    }
}

/// Domain separation: the first line of every signed annotation message (never a request's
/// [`MESSAGE_PREFIX`], so neither signature can be passed off as the other).
const ANNOTATION_MESSAGE_PREFIX: &str = "bloodraven-group-annotation-v1";

/// An annotation value the operator signs: which object, which annotation, and the text.
/// The signature binds all three, so a value signed for one group (or one annotation) does
/// not verify on another.
#[derive(Debug, Clone, Copy)]
pub struct SignedAnnotation<'a> {
    /// The group's namespace.
    pub namespace: &'a str,
    /// The group's name.
    pub group: &'a str,
    /// The annotation's key (`bloodraven.shipstream.io/last-failover`).
    pub key: &'a str,
    /// The annotation's text as signed (without the signature).
    pub text: &'a str,
}

/// The bytes signed for `annotation`: one line each for the prefix, the namespace, the group,
/// the annotation key and the text.
pub fn annotation_message(annotation: &SignedAnnotation<'_>) -> Vec<u8> {
    format!(
        "{ANNOTATION_MESSAGE_PREFIX}\n{}\n{}\n{}\n{}",
        annotation.namespace, annotation.group, annotation.key, annotation.text
    )
    .into_bytes()
}

/// Why a signed annotation's signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationSignatureError {
    /// Not `ed25519:<hex>`.
    #[error("signature {presented:?} is not \"ed25519:<hex>\"")]
    Malformed {
        /// The text presented.
        presented: String,
    },
    /// Well formed, but made with another key or over other text, group or annotation.
    #[error("signature does not verify against the group's operator key (written by someone else, or the text was changed after signing)")]
    BadSignature,
}

/// The verifying half of [`OperatorKey`] (public: it may be shown and logged).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OperatorVerifyingKey([u8; KEY_BYTES]);

impl fmt::Debug for OperatorVerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperatorVerifyingKey({})", self.to_hex())
    }
}

impl OperatorVerifyingKey {
    /// The key of its hex text (the mounted file; surrounding whitespace is ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        exact_bytes::<KEY_BYTES>("operator verifying key", text).map(Self)
    }

    /// Its hex text.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    /// Accepts `signature` (`ed25519:<hex>`, as [`OperatorKey::sign_annotation`] wrote it)
    /// over `annotation`, or says why not.
    pub fn verify_annotation(
        &self,
        annotation: &SignedAnnotation<'_>,
        signature: &str,
    ) -> std::result::Result<(), AnnotationSignatureError> {
        let malformed = || AnnotationSignatureError::Malformed {
            presented: signature.to_owned(),
        };
        let hex = signature
            .trim()
            .strip_prefix(Principal::Operator.scheme())
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(malformed)?;
        let bytes = from_hex("signature", hex).map_err(|_| malformed())?;
        if self.verify(&annotation_message(annotation), &bytes) {
            Ok(())
        } else {
            Err(AnnotationSignatureError::BadSignature)
        }
    }

    fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        signature::UnparsedPublicKey::new(&signature::ED25519, self.0)
            .verify(message, signature)
            .is_ok()
    }
}

/// The group's peer key: an HMAC-SHA256 secret every sidecar of the group holds, for lease
/// requests between them. It cannot sign an operator command (those take Ed25519).
#[derive(Clone)]
pub struct PeerKey {
    /// Shared: ring's key holds both padded HMAC states (hundreds of bytes).
    key: std::sync::Arc<hmac::Key>,
}

impl fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PeerKey(<redacted>)")
    }
}

impl PeerKey {
    /// The key of `secret`, at least [`KEY_BYTES`] bytes.
    pub fn from_bytes(secret: &[u8]) -> Result<Self> {
        if secret.len() < KEY_BYTES {
            return Err(key_error(
                "peer key",
                format!("{} bytes, at least {KEY_BYTES} needed", secret.len()),
            ));
        }
        Ok(Self {
            key: std::sync::Arc::new(hmac::Key::new(hmac::HMAC_SHA256, secret)),
        })
    }

    /// The key of its hex text (the mounted file; surrounding whitespace is ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        Self::from_bytes(&from_hex("peer key", text)?)
    }

    /// The headers of `request` signed under `stamp`.
    pub fn sign(&self, request: &SignedRequest<'_>, stamp: &Stamp) -> AuthHeaders {
        let message = canonical_message(Principal::Peer, request, stamp);
        headers(
            Principal::Peer,
            stamp,
            hmac::sign(&self.key, &message).as_ref(),
        )
    }

    fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        // Constant time.
        hmac::verify(&self.key, message, signature).is_ok()
    }
}

/// The header values a request presented (`None`: absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct PresentedHeaders<'a> {
    /// [`HEADER_TIMESTAMP`].
    pub timestamp: Option<&'a str>,
    /// [`HEADER_NONCE`].
    pub nonce: Option<&'a str>,
    /// [`HEADER_SIGNATURE`].
    pub signature: Option<&'a str>,
}

/// Why a request was not authenticated (answered 401, except [`AuthError::ReplayCacheFull`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A header is absent.
    #[error("missing header {header}")]
    MissingHeader {
        /// Its name.
        header: &'static str,
    },
    /// A header does not parse.
    #[error("malformed header {header}: {reason}")]
    MalformedHeader {
        /// Its name.
        header: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The signature uses another scheme than the endpoint takes (a peer's HMAC on an
    /// operator command, for example).
    #[error("header {HEADER_SIGNATURE} uses scheme {presented:?}, but this endpoint takes only {:?}, signed by {}", .expected.scheme(), .expected.key_name())]
    WrongScheme {
        /// Who must sign this endpoint.
        expected: Principal,
        /// The scheme presented.
        presented: String,
    },
    /// The signature does not verify.
    #[error("bad signature: it does not verify against {} (wrong key, or the group, site, method, path, timestamp, nonce or body differ from what was signed)", .principal.key_name())]
    BadSignature {
        /// Whose key it was checked against.
        principal: Principal,
    },
    /// The timestamp is older than the window.
    #[error("stale timestamp: signed {age_ms}ms ago, more than the {max_ms}ms allowed")]
    StaleTimestamp {
        /// How old.
        age_ms: i64,
        /// The bound ([`SIGNATURE_SKEW_MAX`]).
        max_ms: i64,
    },
    /// The timestamp is further in the future than the window.
    #[error("timestamp in the future: {ahead_ms}ms ahead of this sidecar's clock, more than the {max_ms}ms allowed")]
    FutureTimestamp {
        /// How far ahead.
        ahead_ms: i64,
        /// The bound ([`SIGNATURE_SKEW_MAX`]).
        max_ms: i64,
    },
    /// The same timestamp and nonce were accepted before: a replayed request.
    #[error("replayed request: nonce {nonce} was already used at timestamp {timestamp_ms}")]
    Replayed {
        /// The nonce (hex).
        nonce: String,
        /// The timestamp.
        timestamp_ms: i64,
    },
    /// More than [`REPLAY_NONCES_MAX`] signed requests arrived within the window: refused
    /// rather than forgetting a nonce that could then be replayed.
    #[error("remember the nonce: {max} signed requests already arrived within the replay window")]
    ReplayCacheFull {
        /// The bound.
        max: usize,
    },
}

impl AuthError {
    /// A short label for metrics (`reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::MissingHeader { .. } => "missing_header",
            AuthError::MalformedHeader { .. } => "malformed_header",
            AuthError::WrongScheme { .. } => "wrong_scheme",
            AuthError::BadSignature { .. } => "bad_signature",
            AuthError::StaleTimestamp { .. } => "stale_timestamp",
            AuthError::FutureTimestamp { .. } => "future_timestamp",
            AuthError::Replayed { .. } => "replayed",
            AuthError::ReplayCacheFull { .. } => "replay_cache_full",
        }
    }
}

/// Checks signed requests for one sidecar: its group's keys and the nonces seen within the
/// window.
#[derive(Debug)]
pub struct Verifier {
    operator: OperatorVerifyingKey,
    peer: PeerKey,
    skew_max_ms: i64,
    /// `(timestamp ms, nonce)` of every request accepted within the window.
    seen: BTreeSet<(i64, [u8; NONCE_BYTES])>,
}

impl Verifier {
    /// A verifier with the group's keys and the [`SIGNATURE_SKEW_MAX`] window.
    pub fn new(operator: OperatorVerifyingKey, peer: PeerKey) -> Self {
        Self {
            operator,
            peer,
            skew_max_ms: i64::try_from(SIGNATURE_SKEW_MAX.as_millis()).unwrap_or(i64::MAX),
            seen: BTreeSet::new(),
        }
    }

    /// How many nonces are remembered now.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }

    /// Accepts `request` signed by `principal` with `presented` headers at `now` (the
    /// verifier's wall clock), or says why not. Only a request whose signature verifies is
    /// remembered, so unsigned traffic cannot fill the replay memory.
    pub fn verify(
        &mut self,
        principal: Principal,
        request: &SignedRequest<'_>,
        presented: &PresentedHeaders<'_>,
        now: Timestamp,
    ) -> Result<(), AuthError> {
        let timestamp_text = presented.timestamp.ok_or(AuthError::MissingHeader {
            header: HEADER_TIMESTAMP,
        })?;
        let nonce_text = presented.nonce.ok_or(AuthError::MissingHeader {
            header: HEADER_NONCE,
        })?;
        let signature_text = presented.signature.ok_or(AuthError::MissingHeader {
            header: HEADER_SIGNATURE,
        })?;
        let timestamp_ms: i64 =
            timestamp_text
                .trim()
                .parse()
                .map_err(|_| AuthError::MalformedHeader {
                    header: HEADER_TIMESTAMP,
                    reason: "not an integer of unix milliseconds".to_owned(),
                })?;
        let nonce = exact_bytes::<NONCE_BYTES>("nonce", nonce_text).map_err(|error| {
            AuthError::MalformedHeader {
                header: HEADER_NONCE,
                reason: error.to_string(),
            }
        })?;
        let (scheme, signature_hex) =
            signature_text
                .trim()
                .split_once(' ')
                .ok_or_else(|| AuthError::MalformedHeader {
                    header: HEADER_SIGNATURE,
                    reason: "expected \"<scheme> <hex>\"".to_owned(),
                })?;
        if scheme != principal.scheme() {
            return Err(AuthError::WrongScheme {
                expected: principal,
                presented: scheme.to_owned(),
            });
        }
        let signature =
            from_hex("signature", signature_hex).map_err(|error| AuthError::MalformedHeader {
                header: HEADER_SIGNATURE,
                reason: error.to_string(),
            })?;
        let stamp = Stamp {
            timestamp: Timestamp::from_unix_millis(timestamp_ms),
            nonce,
        };
        let message = canonical_message(principal, request, &stamp);
        let verified = match principal {
            Principal::Operator => self.operator.verify(&message, &signature),
            Principal::Peer => self.peer.verify(&message, &signature),
        };
        if !verified {
            return Err(AuthError::BadSignature { principal });
        }
        let now_ms = now.unix_millis();
        let age_ms = now_ms.saturating_sub(timestamp_ms);
        if age_ms > self.skew_max_ms {
            return Err(AuthError::StaleTimestamp {
                age_ms,
                max_ms: self.skew_max_ms,
            });
        }
        if -age_ms > self.skew_max_ms {
            return Err(AuthError::FutureTimestamp {
                ahead_ms: -age_ms,
                max_ms: self.skew_max_ms,
            });
        }
        // Forget what the window no longer admits: such a request is refused as stale anyway.
        let oldest = now_ms.saturating_sub(self.skew_max_ms);
        self.seen = self.seen.split_off(&(oldest, [0u8; NONCE_BYTES]));
        if self.seen.contains(&(timestamp_ms, nonce)) {
            return Err(AuthError::Replayed {
                nonce: to_hex(&nonce),
                timestamp_ms,
            });
        }
        if self.seen.len() >= REPLAY_NONCES_MAX {
            return Err(AuthError::ReplayCacheFull {
                max: REPLAY_NONCES_MAX,
            });
        }
        self.seen.insert((timestamp_ms, nonce));
        assert!(
            self.seen.len() <= REPLAY_NONCES_MAX,
            "replay memory is bounded"
        );
        Ok(())
    }
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

fn key_error(what: &str, reason: String) -> Error {
    Error::Key {
        what: what.to_owned(),
        reason,
    }
}

/// The bytes of hex `text` (surrounding whitespace ignored), naming `what` on error.
fn from_hex(what: &str, text: &str) -> Result<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return Err(key_error(
            what,
            format!("odd number of hex digits ({})", text.len()),
        ));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(high), Some(low)) => Ok(high << 4 | low),
            _ => Err(key_error(what, "not hex".to_owned())),
        })
        .collect()
}

fn exact_bytes<const N: usize>(what: &str, text: &str) -> Result<[u8; N]> {
    let bytes = from_hex(what, text)?;
    <[u8; N]>::try_from(bytes.as_slice())
        .map_err(|_| key_error(what, format!("{} bytes, expected {N}", bytes.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::{
        PATH_AUTHORITY, PATH_DATABASES, PATH_FENCE, PATH_HEALTHZ, PATH_METRICS, PATH_PROMOTE,
        PATH_REPOINT, PATH_STATUS,
    };

    const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);

    fn operator_key(seed: u8) -> OperatorKey {
        OperatorKey::from_seed(&[seed; KEY_BYTES]).expect("key")
    }

    fn peer_key(byte: u8) -> PeerKey {
        PeerKey::from_bytes(&[byte; KEY_BYTES]).expect("key")
    }

    fn request(body: &[u8]) -> SignedRequest<'_> {
        SignedRequest {
            group: "playground",
            site: "pdx",
            method: "PUT",
            path: PATH_AUTHORITY,
            body,
        }
    }

    fn note(group: &'static str, text: &'static str) -> SignedAnnotation<'static> {
        SignedAnnotation {
            namespace: "default",
            group,
            key: crate::names::ANNOTATION_LAST_FAILOVER,
            text,
        }
    }

    const NOTE: &str = "emergency iad->pdx 2026-12-05T07:00:00Z generation 3";

    #[test]
    fn an_annotation_signed_with_the_operator_key_verifies_and_nothing_else_does() {
        let key = operator_key(1);
        let verifying = key.verifying_key();
        let signature = key.sign_annotation(&note("playground", NOTE));
        assert!(signature.starts_with("ed25519:"), "{signature}");
        assert_eq!(
            verifying.verify_annotation(&note("playground", NOTE), &signature),
            Ok(())
        );
        // Another text (a site or generation changed after signing), group, annotation key
        // or signer: refused.
        let bad = Err(AnnotationSignatureError::BadSignature);
        let edited = "emergency iad->pdx 2026-12-05T07:00:00Z generation 9";
        assert_eq!(
            verifying.verify_annotation(&note("playground", edited), &signature),
            bad
        );
        assert_eq!(
            verifying.verify_annotation(&note("other", NOTE), &signature),
            bad
        );
        let other_key = SignedAnnotation {
            key: crate::names::ANNOTATION_COOLDOWN_UNTIL,
            ..note("playground", NOTE)
        };
        assert_eq!(verifying.verify_annotation(&other_key, &signature), bad);
        let forged = operator_key(2).sign_annotation(&note("playground", NOTE));
        assert_eq!(
            verifying.verify_annotation(&note("playground", NOTE), &forged),
            bad
        );
        // A request signature over the same bytes is not an annotation signature.
        let request_message = canonical_message(
            Principal::Operator,
            &request(NOTE.as_bytes()),
            &stamp(NOW, 1),
        );
        assert_ne!(
            request_message,
            annotation_message(&note("playground", NOTE))
        );
    }

    #[test]
    fn a_malformed_annotation_signature_names_what_it_got() {
        let verifying = operator_key(1).verifying_key();
        for presented in ["", "ed25519", "ed25519:zz", "hmac-sha256:00ff", "00ff"] {
            let error = verifying
                .verify_annotation(&note("playground", NOTE), presented)
                .expect_err(presented);
            assert_eq!(
                error,
                AnnotationSignatureError::Malformed {
                    presented: presented.to_owned()
                }
            );
            assert!(error.to_string().contains("ed25519:<hex>"), "{error}");
        }
    }

    fn stamp(at: Timestamp, nonce: u8) -> Stamp {
        Stamp {
            timestamp: at,
            nonce: [nonce; NONCE_BYTES],
        }
    }

    fn presented(headers: &AuthHeaders) -> PresentedHeaders<'_> {
        PresentedHeaders {
            timestamp: Some(&headers.timestamp),
            nonce: Some(&headers.nonce),
            signature: Some(&headers.signature),
        }
    }

    fn verifier() -> Verifier {
        Verifier::new(operator_key(1).verifying_key(), peer_key(2))
    }

    const BODY: &[u8] = br#"{"group":"playground","activeSite":"pdx","topologyGeneration":9}"#;

    /// docs/design/history.md#issue-10-case-8: a request signed by the operator's key verifies;
    /// the same with another key, a changed body, path or group does not.
    #[test]
    fn case_8_only_the_operator_key_over_the_exact_request_verifies() {
        let mut verifier = verifier();
        let signed = operator_key(1).sign(&request(BODY), &stamp(NOW, 1));
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(BODY),
                &presented(&signed),
                NOW
            ),
            Ok(())
        );
        let bad_signature = Err(AuthError::BadSignature {
            principal: Principal::Operator,
        });
        let wrong_key = operator_key(7).sign(&request(BODY), &stamp(NOW, 2));
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(BODY),
                &presented(&wrong_key),
                NOW
            ),
            bad_signature
        );
        let signed = operator_key(1).sign(&request(BODY), &stamp(NOW, 3));
        let tampered = br#"{"group":"playground","activeSite":"iad","topologyGeneration":9}"#;
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(tampered),
                &presented(&signed),
                NOW
            ),
            bad_signature,
            "a tampered body"
        );
        let other_path = SignedRequest {
            path: PATH_FENCE,
            method: "POST",
            ..request(BODY)
        };
        assert_eq!(
            verifier.verify(Principal::Operator, &other_path, &presented(&signed), NOW),
            bad_signature,
            "a signature moved to another endpoint"
        );
        let other_group = SignedRequest {
            group: "other",
            ..request(BODY)
        };
        assert_eq!(
            verifier.verify(Principal::Operator, &other_group, &presented(&signed), NOW),
            bad_signature,
            "a signature moved to another group"
        );
        let other_site = SignedRequest {
            site: "iad",
            ..request(BODY)
        };
        assert_eq!(
            verifier.verify(Principal::Operator, &other_site, &presented(&signed), NOW),
            bad_signature,
            "a signature replayed at another site of the group"
        );
        let mut flipped = signed.clone();
        flipped.timestamp = (NOW.unix_millis() + 1).to_string();
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(BODY),
                &presented(&flipped),
                NOW
            ),
            bad_signature,
            "a re-stamped signature"
        );
        let error = bad_signature
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.starts_with("bad signature"), "{error}");
    }

    /// docs/design/history.md#issue-10-case-8: the peer key cannot sign an operator command,
    /// neither as HMAC (wrong scheme) nor by claiming the operator's scheme (bad signature).
    #[test]
    fn case_8_peer_key_cannot_sign_operator_commands() {
        let mut verifier = verifier();
        let peer_signed = peer_key(2).sign(&request(BODY), &stamp(NOW, 1));
        let error = verifier
            .verify(
                Principal::Operator,
                &request(BODY),
                &presented(&peer_signed),
                NOW,
            )
            .expect_err("a peer's signature on an operator command");
        assert_eq!(error.reason(), "wrong_scheme");
        assert!(error.to_string().contains("\"hmac-sha256\""), "{error}");
        assert!(error.to_string().contains("the operator's key"), "{error}");
        let mut claimed = peer_signed.clone();
        claimed.signature = claimed.signature.replacen("hmac-sha256", "ed25519", 1);
        let error = verifier
            .verify(
                Principal::Operator,
                &request(BODY),
                &presented(&claimed),
                NOW,
            )
            .expect_err("an HMAC claiming to be Ed25519");
        assert!(
            matches!(
                error,
                AuthError::BadSignature { .. } | AuthError::MalformedHeader { .. }
            ),
            "{error:?}"
        );
        // The peer key signs lease requests; another group's peer key does not.
        let lease = SignedRequest {
            method: "POST",
            path: PATH_LEASE,
            ..request(BODY)
        };
        let signed = peer_key(2).sign(&lease, &stamp(NOW, 2));
        assert_eq!(
            verifier.verify(Principal::Peer, &lease, &presented(&signed), NOW),
            Ok(())
        );
        let foreign = peer_key(3).sign(&lease, &stamp(NOW, 3));
        assert_eq!(
            verifier.verify(Principal::Peer, &lease, &presented(&foreign), NOW),
            Err(AuthError::BadSignature {
                principal: Principal::Peer
            })
        );
    }

    /// docs/design/history.md#issue-10-case-8: a timestamp outside the window either way is
    /// refused, and the same timestamp and nonce are accepted once only.
    #[test]
    fn case_8_stale_timestamps_and_replays_are_refused() {
        let mut verifier = verifier();
        let window = SIGNATURE_SKEW_MAX;
        let old = NOW.saturating_sub(window + Duration::from_millis(1));
        let signed = operator_key(1).sign(&request(BODY), &stamp(old, 1));
        let error = verifier
            .verify(
                Principal::Operator,
                &request(BODY),
                &presented(&signed),
                NOW,
            )
            .expect_err("stale");
        assert_eq!(
            error,
            AuthError::StaleTimestamp {
                age_ms: 30_001,
                max_ms: 30_000
            }
        );
        assert!(error.to_string().starts_with("stale timestamp"), "{error}");
        let ahead = NOW + window + Duration::from_millis(1);
        let signed = operator_key(1).sign(&request(BODY), &stamp(ahead, 2));
        assert_eq!(
            verifier
                .verify(
                    Principal::Operator,
                    &request(BODY),
                    &presented(&signed),
                    NOW
                )
                .map_err(|e| e.reason()),
            Err("future_timestamp")
        );
        // At the edge of the window: accepted once, then a replay.
        let edge = NOW.saturating_sub(window);
        let signed = operator_key(1).sign(&request(BODY), &stamp(edge, 3));
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(BODY),
                &presented(&signed),
                NOW
            ),
            Ok(())
        );
        assert_eq!(
            verifier
                .verify(
                    Principal::Operator,
                    &request(BODY),
                    &presented(&signed),
                    NOW
                )
                .map_err(|e| e.reason()),
            Err("replayed")
        );
        // Same nonce, another timestamp: another request.
        let later = operator_key(1).sign(&request(BODY), &stamp(NOW, 3));
        assert_eq!(
            verifier.verify(Principal::Operator, &request(BODY), &presented(&later), NOW),
            Ok(())
        );
        // Once the window has passed the edge entry is forgotten (it would be refused as stale).
        let much_later = NOW + window;
        let fresh = operator_key(1).sign(&request(BODY), &stamp(much_later, 9));
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request(BODY),
                &presented(&fresh),
                much_later
            ),
            Ok(())
        );
        assert_eq!(verifier.remembered(), 2, "the edge entry was forgotten");
    }

    /// docs/design/history.md#issue-10-case-8: every missing or malformed header is named.
    #[test]
    fn case_8_missing_and_malformed_headers_are_named() {
        let mut verifier = verifier();
        let signed = operator_key(1).sign(&request(BODY), &stamp(NOW, 1));
        for (header, mut headers) in [
            (
                HEADER_TIMESTAMP,
                PresentedHeaders {
                    timestamp: None,
                    ..presented(&signed)
                },
            ),
            (
                HEADER_NONCE,
                PresentedHeaders {
                    nonce: None,
                    ..presented(&signed)
                },
            ),
            (
                HEADER_SIGNATURE,
                PresentedHeaders {
                    signature: None,
                    ..presented(&signed)
                },
            ),
        ] {
            let error = verifier
                .verify(Principal::Operator, &request(BODY), &headers, NOW)
                .expect_err("missing");
            assert_eq!(error, AuthError::MissingHeader { header });
            assert_eq!(error.to_string(), format!("missing header {header}"));
            headers = PresentedHeaders::default();
            assert!(verifier
                .verify(Principal::Operator, &request(BODY), &headers, NOW)
                .is_err());
        }
        for (header, headers) in [
            (
                HEADER_TIMESTAMP,
                PresentedHeaders {
                    timestamp: Some("yesterday"),
                    ..presented(&signed)
                },
            ),
            (
                HEADER_NONCE,
                PresentedHeaders {
                    nonce: Some("abc"),
                    ..presented(&signed)
                },
            ),
            (
                HEADER_SIGNATURE,
                PresentedHeaders {
                    signature: Some("ed25519"),
                    ..presented(&signed)
                },
            ),
            (
                HEADER_SIGNATURE,
                PresentedHeaders {
                    signature: Some("ed25519 zz"),
                    ..presented(&signed)
                },
            ),
        ] {
            let error = verifier
                .verify(Principal::Operator, &request(BODY), &headers, NOW)
                .expect_err("malformed");
            assert!(
                matches!(&error, AuthError::MalformedHeader { header: named, .. } if *named == header),
                "{error:?}"
            );
        }
        assert_eq!(verifier.remembered(), 0, "nothing unverified is remembered");
    }

    /// docs/design/history.md#issue-10-case-8: reads stay open (probes), the lease takes a
    /// peer, every other request (the mutations, and any path added later) takes the operator.
    #[test]
    fn case_8_endpoint_principals() {
        for path in [PATH_STATUS, PATH_HEALTHZ, PATH_METRICS] {
            assert_eq!(required_principal("GET", path), None, "{path}");
        }
        assert_eq!(
            required_principal("POST", PATH_LEASE),
            Some(Principal::Peer)
        );
        assert_eq!(
            required_principal("PUT", PATH_AUTHORITY),
            Some(Principal::Operator)
        );
        for path in [
            PATH_FENCE,
            PATH_PROMOTE,
            PATH_REPOINT,
            PATH_DATABASES,
            "/v1/new",
        ] {
            assert_eq!(
                required_principal("POST", path),
                Some(Principal::Operator),
                "{path}"
            );
        }
        assert_eq!(
            required_principal("PUT", PATH_LEASE),
            Some(Principal::Operator)
        );
    }

    #[test]
    fn keys_parse_from_hex_and_name_what_is_wrong() {
        let key = operator_key(5);
        let text = to_hex(&[5; KEY_BYTES]);
        let parsed = OperatorKey::from_hex(&format!("{text}\n")).expect("seed hex");
        assert_eq!(parsed.verifying_key(), key.verifying_key());
        let public = key.verifying_key().to_hex();
        assert_eq!(
            OperatorVerifyingKey::from_hex(&public).ok(),
            Some(key.verifying_key())
        );
        let short = OperatorVerifyingKey::from_hex("abcd").expect_err("short");
        assert!(
            short.to_string().contains("operator verifying key"),
            "{short}"
        );
        assert!(short.to_string().contains("expected 32"), "{short}");
        let weak = PeerKey::from_hex(&to_hex(&[1; 16])).expect_err("short peer key");
        assert!(weak.to_string().contains("at least 32"), "{weak}");
        assert!(PeerKey::from_hex("xyz!").is_err());
        assert!(!format!("{:?}", peer_key(1)).contains("01"), "redacted");
        assert!(
            !format!("{key:?}").contains(&text),
            "the seed is never printed"
        );
    }
}
