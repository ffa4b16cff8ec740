//! Container logs: where the node agent writes them and how `pods/log` reads them.

use std::path::{Path, PathBuf};

/// The file holding a container's stdout and stderr, as the node agent writes it and
/// `GET pods/<pod>/log` reads it: `<state_dir>/logs/<namespace>_<pod>/<container>.log`, and
/// `<container>.previous.log` for the previous (restarted) instance.
pub fn log_path(
    state_dir: &Path,
    namespace: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> PathBuf {
    let file = if previous {
        format!("{container}.previous.log")
    } else {
        format!("{container}.log")
    };
    state_dir
        .join("logs")
        .join(format!("{namespace}_{pod}"))
        .join(file)
}

/// The last `tail_lines` lines of a log, then at most `limit_bytes` bytes.
pub fn select(text: &[u8], tail_lines: Option<usize>, limit_bytes: Option<usize>) -> Vec<u8> {
    let mut out: &[u8] = text;
    if let Some(n) = tail_lines {
        let mut count = 0;
        let mut start = 0;
        let body = if out.ends_with(b"\n") {
            &out[..out.len() - 1]
        } else {
            out
        };
        for (index, byte) in body.iter().enumerate().rev() {
            if *byte == b'\n' {
                count += 1;
                if count == n {
                    start = index + 1;
                    break;
                }
            }
        }
        if n == 0 {
            start = out.len();
        }
        out = &out[start..];
    }
    match limit_bytes {
        Some(length) if length < out.len() => out[..length].to_vec(),
        _ => out.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_and_limit_bytes() {
        let t = b"a\nb\nc\n";
        assert_eq!(select(t, Some(2), None), b"b\nc\n");
        assert_eq!(select(t, Some(10), None), t.to_vec());
        assert_eq!(select(t, None, Some(3)), b"a\nb");
        assert_eq!(
            log_path(Path::new("/s"), "ns", "p", "c", true),
            PathBuf::from("/s/logs/ns_p/c.previous.log")
        );
    }
}
