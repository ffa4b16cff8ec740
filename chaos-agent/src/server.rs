//! `serve`: the agent behind `DIR/control.sock` (a unix socket: the agent opens no network
//! port). One request per connection, one response line back. SIGTERM and SIGINT undo every
//! fault before the agent exits.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{signal, SignalKind};

use crate::agent::{Agent, AgentConfig};
use crate::error::{Error, Result};
use crate::pod::Locator;
use crate::protocol::{Request, Response};

/// The socket's name in the state directory.
pub const SOCKET_FILE: &str = "control.sock";
/// The longest request accepted.
pub const REQUEST_BYTES_MAX: u64 = 1 << 20;

/// The socket of the agent whose state directory is `state_dir`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_FILE)
}

/// Refuses to start next to a live agent (it would undo that agent's faults), and removes
/// the socket a dead one left.
async fn claim_socket(path: &Path) -> Result<()> {
    if UnixStream::connect(path).await.is_ok() {
        return Err(Error::Io {
            action: format!("claim {}", path.display()),
            source: std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another agent is serving on it; stop it first",
            ),
        });
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::Io {
            action: format!("remove the stale socket {}", path.display()),
            source: error,
        }),
    }
}

/// Runs the agent until SIGTERM or SIGINT, then undoes every fault. An error when it could
/// not start, or when some fault could not be undone at the end.
pub async fn serve<L: Locator>(config: AgentConfig, locator: L) -> Result<()> {
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::io("watch SIGTERM"))?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::io("watch SIGINT"))?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        }
    };
    serve_until(config, locator, shutdown).await
}

/// Runs the agent until `shutdown` completes (with the reason, for the log), then undoes
/// every fault and removes the socket.
pub async fn serve_until<L: Locator>(
    config: AgentConfig,
    locator: L,
    shutdown: impl std::future::Future<Output = &'static str>,
) -> Result<()> {
    let path = socket_path(&config.state_dir);
    std::fs::create_dir_all(&config.state_dir).map_err(Error::io(format!(
        "create the state directory {}",
        config.state_dir.display()
    )))?;
    claim_socket(&path).await?;
    let agent = Agent::start(config, locator).await?;
    let listener =
        UnixListener::bind(&path).map_err(Error::io(format!("listen on {}", path.display())))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(Error::io(format!("restrict {} to root", path.display())))?;
    tracing::info!(socket = %path.display(), namespaces = ?agent.config().namespaces, node = ?agent.config().node, "serving");
    tokio::pin!(shutdown);
    let reason = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let agent = agent.clone();
                    tokio::spawn(async move { answer(&agent, stream).await });
                }
                Err(error) => tracing::warn!(%error, "could not accept a connection"),
            },
            reason = &mut shutdown => break reason,
        }
    };
    tracing::info!(reason, "shutting down: undoing every fault");
    drop(listener);
    let _ = std::fs::remove_file(&path);
    let cleaned = agent.cleanup().await;
    match &cleaned {
        Ok(done) => tracing::info!(undone = done.ended.len(), "every fault undone"),
        Err(error) => tracing::error!(%error, "some faults could not be undone"),
    }
    cleaned.map(|_| ())
}

async fn answer<L: Locator>(agent: &Arc<Agent<L>>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let response = match BufReader::new(read.take(REQUEST_BYTES_MAX))
        .read_line(&mut line)
        .await
    {
        Err(error) => Response::from(Error::Request(format!("read the request: {error}"))),
        Ok(_) => match Request::parse(line.trim()) {
            Err(error) => Response::from(error),
            Ok(request) => {
                tracing::info!(request = request.kind(), body = %line.trim(), "request");
                agent.handle(request).await
            }
        },
    };
    let mut text = response.to_line();
    text.push('\n');
    if let Err(error) = write.write_all(text.as_bytes()).await {
        tracing::warn!(%error, "could not send the response (the fault, if any, stands)");
    }
}
