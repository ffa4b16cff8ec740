//! One-shot helpers for what the harness otherwise reaches on the cluster's network:
//! `bloodraven-workload dns` asks the pod's resolver (the cluster DNS) for a name's A answers;
//! `bloodraven-workload http` sends one HTTP request (metrics scrapes, the counter app, the
//! operator's deploy API over TLS with its escrow CA) and prints what came back.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::live::workload;

fn oneshot_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Workload {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// Parses a DNS server: `IP` (port 53) or `IP:PORT` / `[IPv6]:PORT`.
pub fn parse_server(text: &str) -> Result<SocketAddr, String> {
    if let Ok(ip) = text.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, 53));
    }
    text.parse::<SocketAddr>()
        .map_err(|_| format!("DNS server {text:?} is neither IP nor IP:PORT"))
}

/// The sorted A answers for `name` from `server`, or from the first nameserver of
/// `resolv_conf` (empty on NXDOMAIN or an error, as the workload's probe records them).
pub async fn dns(
    name: &str,
    server: Option<SocketAddr>,
    resolv_conf: &Path,
) -> Result<Vec<String>> {
    let server = match server {
        Some(server) => server,
        None => super::resolv::nameserver(resolv_conf)?,
    };
    let resolver = workload::resolver(server).ok_or_else(|| {
        oneshot_error(
            format!("look up {name}"),
            format!("build a resolver for {server}"),
        )
    })?;
    Ok(workload::lookup(&resolver, name).await)
}

/// An HTTP method `http` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[clap(rename_all = "UPPER")]
pub enum HttpMethod {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

/// Where a bearer token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bearer {
    /// A file (`-`: standard input, so the token is not on the command line).
    File(PathBuf),
    /// An environment variable.
    Env(String),
}

/// Where the body comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A file (`-`: standard input).
    File(PathBuf),
    /// The argument itself.
    Text(String),
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method.
    pub method: HttpMethod,
    /// The URL.
    pub url: String,
    /// A PEM file of CA certificates to trust (besides the system's).
    pub ca_file: Option<PathBuf>,
    /// PEM CA certificates given inline (public: the harness passes the escrow CA so).
    pub ca_pem: Option<String>,
    /// The bearer token.
    pub bearer: Option<Bearer>,
    /// Extra headers (`Name: value`).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<Body>,
    /// Host names resolved to a given address (`host:port:ip`, as curl's `--resolve`): the
    /// deploy API is reached at one operator pod under its Service's name, which its
    /// certificate carries.
    pub resolve: Vec<(String, SocketAddr)>,
    /// The bound on the whole request.
    pub timeout: Duration,
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The response headers, lowercase names (repeated ones joined with `, `).
    pub headers: BTreeMap<String, String>,
    /// The body (lossy UTF-8).
    pub body: String,
}

/// Parses `Name: value` (or `Name:value`).
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("header {text:?} is not `Name: value`"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("header {text:?} has no name"));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// Parses `host:port:ip` (curl's `--resolve`; an IPv6 address in brackets).
pub fn parse_resolve(text: &str) -> Result<(String, SocketAddr), String> {
    let bad = || format!("resolve {text:?} is not `host:port:ip`");
    let (host, rest) = text.split_once(':').ok_or_else(bad)?;
    let (port, ip) = rest.split_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let ip: std::net::IpAddr = ip
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_owned(), SocketAddr::new(ip, port)))
}

fn read_source(path: &Path, what: &str) -> Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .map_err(|e| oneshot_error(format!("read the {what} from standard input"), e))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Sends the request; any status is an answer, only a request that got none is an error.
pub async fn http(request: &HttpRequest) -> Result<HttpAnswer> {
    let stdin = Path::new("-");
    let from_stdin = [
        matches!(&request.bearer, Some(Bearer::File(path)) if path == stdin),
        matches!(&request.body, Some(Body::File(path)) if path == stdin),
        request.ca_file.as_deref() == Some(stdin),
    ];
    if from_stdin.iter().filter(|yes| **yes).count() > 1 {
        return Err(oneshot_error(
            "read the request",
            "only one of the token, the body and the CA can come from standard input (`-`)",
        ));
    }
    let action = format!("call {}", request.url);
    let mut builder = reqwest::Client::builder().timeout(request.timeout);
    for (host, address) in &request.resolve {
        builder = builder.resolve(host, *address);
    }
    let mut cas: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(ca) = &request.ca_file {
        cas.push((ca.display().to_string(), read_source(ca, "CA")?));
    }
    if let Some(pem) = &request.ca_pem {
        cas.push(("given with --ca-pem".to_owned(), pem.as_bytes().to_vec()));
    }
    for (source, pem) in cas {
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| oneshot_error(format!("read the CA {source}"), e))?;
        if certificates.is_empty() {
            return Err(oneshot_error(
                format!("read the CA {source}"),
                "it holds no PEM certificate",
            ));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    let client = builder
        .build()
        .map_err(|e| oneshot_error("build an HTTP client", e))?;
    let method = match request.method {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Post => reqwest::Method::POST,
        HttpMethod::Put => reqwest::Method::PUT,
        HttpMethod::Delete => reqwest::Method::DELETE,
    };
    let mut call = client.request(method, &request.url);
    match &request.bearer {
        Some(Bearer::File(path)) => {
            let token = read_source(path, "token")?;
            call = call.bearer_auth(String::from_utf8_lossy(&token).trim());
        }
        Some(Bearer::Env(name)) => {
            let token = std::env::var(name)
                .map_err(|e| oneshot_error(format!("read the token from ${name}"), e))?;
            call = call.bearer_auth(token.trim());
        }
        None => {}
    }
    for (name, value) in &request.headers {
        call = call.header(name, value);
    }
    match &request.body {
        Some(Body::File(path)) => call = call.body(read_source(path, "body")?),
        Some(Body::Text(text)) => call = call.body(text.clone()),
        None => {}
    }
    let response = call
        .send()
        .await
        .map_err(|e| oneshot_error(&action, error_chain(&e)))?;
    let status = response.status().as_u16();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert(value);
    }
    let body = response.bytes().await.map_err(|e| {
        oneshot_error(
            format!("read the answer of {}", request.url),
            error_chain(&e),
        )
    })?;
    Ok(HttpAnswer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// An error with its causes (reqwest's own message is only the outermost).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_arguments_parse_or_say_why() {
        assert_eq!(
            parse_header("Content-Type: application/json"),
            Ok(("Content-Type".to_owned(), "application/json".to_owned()))
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header(": x").is_err());
        assert_eq!(
            parse_resolve("bloodraven.bloodraven-system.svc:8443:10.244.0.7"),
            Ok((
                "bloodraven.bloodraven-system.svc".to_owned(),
                SocketAddr::from(([10, 244, 0, 7], 8443))
            ))
        );
        assert!(parse_resolve("host:http:10.0.0.1").is_err());
        assert_eq!(
            parse_server("10.96.0.10"),
            Ok(SocketAddr::from(([10, 96, 0, 10], 53)))
        );
        assert_eq!(
            parse_server("127.0.0.1:5353"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 5353)))
        );
        assert!(parse_server("dns.local").is_err());
    }
}
