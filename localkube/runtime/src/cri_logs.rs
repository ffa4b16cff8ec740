//! Container logs in the CRI format kubelet stores (`/var/log/pods/...`): one line per
//! output line, `<RFC3339Nano time> <stdout|stderr> <F|P> <content>`, `P` marking a partial
//! line (kubelet splits lines longer than [`MAX_LINE_BYTES`]). [`read`] renders a file the
//! way `kubectl logs` prints it (`--timestamps`, `--since-time`, `--tail`, `--limit-bytes`);
//! a follower parses appended lines with [`parse_line`] and renders each with
//! [`render_line`].

use std::path::Path;

use jiff::Timestamp;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{broadcast, mpsc};

use super::error::{Error, Result};

/// Longest line stored as one record (kubelet's 16 KiB).
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Lines buffered between the pipes and the file.
const CHANNEL_LINES: usize = 1024;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// One parsed log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When it was written.
    pub time: Timestamp,
    /// Its stream.
    pub stream: Stream,
    /// Whether the line continues in the next record (`P`).
    pub partial: bool,
    /// The content, without its newline.
    pub content: String,
}

/// `kubectl logs` options the file can answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// `--timestamps`: prefix each line with its RFC3339Nano time.
    pub timestamps: bool,
    /// `--since-time` (`--since` is now minus a duration): only lines at or after it.
    pub since: Option<Timestamp>,
    /// `--tail`: only the last N lines.
    pub tail_lines: Option<usize>,
    /// `--limit-bytes`: at most this many bytes of output.
    pub limit_bytes: Option<usize>,
}

/// Formats one record.
pub fn format_line(time: Timestamp, stream: Stream, partial: bool, content: &[u8]) -> Vec<u8> {
    let mut line = format!(
        "{time:.9} {} {} ",
        match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        },
        if partial { "P" } else { "F" }
    )
    .into_bytes();
    line.extend_from_slice(content);
    line.push(b'\n');
    line
}

/// Parses one record (without its newline); `None` for anything else.
pub fn parse_line(line: &str) -> Option<LogLine> {
    let mut parts = line.splitn(4, ' ');
    let time = parts.next()?.parse().ok()?;
    let stream = match parts.next()? {
        "stdout" => Stream::Stdout,
        "stderr" => Stream::Stderr,
        _ => return None,
    };
    let partial = match parts.next()? {
        "P" => true,
        "F" => false,
        _ => return None,
    };
    Some(LogLine {
        time,
        stream,
        partial,
        content: parts.next().unwrap_or_default().to_string(),
    })
}

/// Renders one record as `kubectl logs` prints it (a partial record has no newline).
pub fn render_line(line: &LogLine, timestamps: bool) -> String {
    let mut out = String::new();
    if timestamps {
        out.push_str(&format!("{:.9}", line.time));
        out.push(' ');
    }
    out.push_str(&line.content);
    if !line.partial {
        out.push('\n');
    }
    out
}

/// Renders a whole log as `kubectl logs` prints it.
pub fn render(text: &str, options: &LogOptions) -> String {
    let mut lines: Vec<LogLine> = text
        .lines()
        .filter_map(parse_line)
        .filter(|line| options.since.is_none_or(|since| line.time >= since))
        .collect();
    if let Some(tail) = options.tail_lines {
        // Count whole lines: a partial record belongs to the complete one after it.
        let mut complete = 0;
        let mut start = lines.len();
        while start > 0 {
            if !lines[start - 1].partial {
                if complete == tail {
                    break;
                }
                complete += 1;
            }
            start -= 1;
        }
        lines.drain(..start);
    }
    let mut out: String = lines
        .iter()
        .map(|line| render_line(line, options.timestamps))
        .collect();
    if let Some(limit) = options.limit_bytes {
        let mut cut = limit.min(out.len());
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    out
}

/// Reads and renders a log file; an absent file is an empty log.
pub fn read(path: &Path, options: &LogOptions) -> Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(render(&String::from_utf8_lossy(&bytes), options)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(err) => Err(Error::io("read container log", path)(err)),
    }
}

/// Copies a container's stdout and stderr into `path` as CRI records until both close.
/// Each line written to the log also goes to `tap` as it was printed (with its newline),
/// for `pods/attach`; nobody listening is fine.
pub fn spawn_writer(
    stdout: impl AsyncRead + Unpin + Send + 'static,
    stderr: impl AsyncRead + Unpin + Send + 'static,
    path: &Path,
    tap: broadcast::Sender<(Stream, Vec<u8>)>,
) -> Result<tokio::task::JoinHandle<()>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(Error::io("open container log", path))?;
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CHANNEL_LINES);
    tokio::spawn(pump(stdout, Stream::Stdout, tx.clone(), tap.clone()));
    tokio::spawn(pump(stderr, Stream::Stderr, tx, tap));
    let path = path.to_path_buf();
    Ok(tokio::spawn(async move {
        let mut file = tokio::fs::File::from_std(file);
        while let Some(line) = rx.recv().await {
            if let Err(err) = file.write_all(&line).await {
                tracing::warn!(path = %path.display(), error = %err, "could not write container log");
                return;
            }
        }
        let _ = file.flush().await;
    }))
}

async fn pump(
    reader: impl AsyncRead + Unpin,
    stream: Stream,
    tx: mpsc::Sender<Vec<u8>>,
    tap: broadcast::Sender<(Stream, Vec<u8>)>,
) {
    let mut reader = BufReader::new(reader);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut buffer)
            .await;
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let complete = buffer.last() == Some(&b'\n');
        let content = if complete {
            &buffer[..n - 1]
        } else {
            &buffer[..]
        };
        if tap.receiver_count() > 0 {
            let _ = tap.send((stream, buffer[..n].to_vec()));
        }
        // A line cut at MAX_LINE_BYTES continues in the next record; so does a last line
        // without newline, which then simply ends partial.
        if tx
            .send(format_line(Timestamp::now(), stream, !complete, content))
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: u32) -> Timestamp {
        format!("2026-11-30T04:00:{second:02}.000000001Z")
            .parse()
            .unwrap()
    }

    fn log() -> String {
        [
            format_line(at(1), Stream::Stdout, false, b"one"),
            format_line(at(2), Stream::Stderr, true, b"two-a "),
            format_line(at(2), Stream::Stderr, false, b"two-b"),
            format_line(at(3), Stream::Stdout, false, b"three"),
        ]
        .concat()
        .into_iter()
        .map(char::from)
        .collect()
    }

    // docs/design/localkube.md#node-agent: stdout/stderr are kept for `kubectl logs` (CRI
    // format as kubelet).
    #[test]
    fn renders_as_kubectl_logs() {
        assert_eq!(
            render(&log(), &LogOptions::default()),
            "one\ntwo-a two-b\nthree\n"
        );
        let tail = LogOptions {
            tail_lines: Some(2),
            ..LogOptions::default()
        };
        assert_eq!(render(&log(), &tail), "two-a two-b\nthree\n");
        let since = LogOptions {
            since: Some(at(3)),
            ..LogOptions::default()
        };
        assert_eq!(render(&log(), &since), "three\n");
        let stamped = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..LogOptions::default()
        };
        assert_eq!(
            render(&log(), &stamped),
            "2026-11-30T04:00:03.000000001Z three\n"
        );
        let limited = LogOptions {
            limit_bytes: Some(5),
            ..LogOptions::default()
        };
        assert_eq!(render(&log(), &limited), "one\nt");
        assert_eq!(parse_line("garbage"), None);
    }
}
