//! One command run in a container through the API server's `pods/exec` (kube-rs over the
//! websocket protocol kubectl speaks): how the harness reaches everything in a cluster that
//! is not an API object (the in-cluster workload, the fault agent), so RBAC on `pods/exec`
//! decides who may, on every backend.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use kube::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};

/// Which container an exec runs in.
#[derive(Debug, Clone, Copy)]
pub struct ExecTarget<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod.
    pub pod: &'a str,
    /// The container.
    pub container: &'a str,
}

/// What one exec printed, and its final status (`None`: the stream ended without one, so
/// the command's outcome is unknown).
#[derive(Debug)]
pub struct ExecOutput {
    /// The status frame.
    pub status: Option<Status>,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
}

fn exec_error(target: ExecTarget<'_>, what: &str, reason: impl ToString) -> Error {
    Error::Cluster {
        action: format!(
            "run `{what}` in {}/{} ({})",
            target.namespace, target.pod, target.container
        ),
        reason: reason.to_string(),
    }
}

/// Runs `argv` in `target` to its end, with `stdin` written and closed, bounded by `bound`:
/// standard output and error read to their ends, then the status.
pub async fn exec_collect(
    client: &Client,
    target: ExecTarget<'_>,
    argv: Vec<String>,
    stdin: Option<Vec<u8>>,
    bound: Duration,
) -> Result<ExecOutput> {
    let what = argv.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
    let run = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), target.namespace);
        let params = AttachParams::default()
            .container(target.container)
            .stdin(stdin.is_some())
            .stdout(true)
            .stderr(true);
        let mut attached = pods
            .exec(target.pod, argv, &params)
            .await
            .map_err(|e| exec_error(target, &what, e))?;
        if let (Some(bytes), Some(mut input)) = (stdin, attached.stdin()) {
            input
                .write_all(&bytes)
                .await
                .map_err(|e| exec_error(target, &what, format!("write its input: {e}")))?;
            input
                .shutdown()
                .await
                .map_err(|e| exec_error(target, &what, format!("close its input: {e}")))?;
        }
        let stdout = attached.stdout();
        let stderr = attached.stderr();
        let (stdout, stderr) = tokio::join!(
            async move {
                let mut bytes = Vec::new();
                if let Some(mut out) = stdout {
                    let _ = out.read_to_end(&mut bytes).await;
                }
                bytes
            },
            async move {
                let mut text = String::new();
                if let Some(mut err) = stderr {
                    let _ = err.read_to_string(&mut text).await;
                }
                text
            }
        );
        let status = match attached.take_status() {
            Some(status) => status.await,
            None => None,
        };
        let _ = attached.join().await;
        Ok(ExecOutput {
            status,
            stdout,
            stderr,
        })
    };
    tokio::time::timeout(bound, run).await.map_err(|_| {
        exec_error(
            target,
            &what,
            format!("no answer within {} s", bound.as_secs()),
        )
    })?
}
