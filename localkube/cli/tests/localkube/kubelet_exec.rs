//! docs/design/history.md#issue-14-item-8: `kubectl exec -it` gets a pseudo-terminal (it was
//! piped, so `tty` printed "not a tty"), sized by the client's resize channel; `kubectl attach`
//! reaches a running container's output and, with `stdin: true`, its stdin (it was 400). Needs
//! root.

use crate::support::{ready, TestCluster};
use anyhow::{ensure, Context, Result};
use futures::SinkExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, TerminalSize};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SHELL: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: shell, namespace: default, labels: {app: shell}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
"#;

const ATTACHED: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: ticker, namespace: default, labels: {app: attach}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "i=0; while true; do echo tick $i; echo tock $i >&2; i=$((i+1)); sleep 0.2; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: upper, namespace: default, labels: {app: attach}}
spec:
  nodeName: iad
  restartPolicy: Never
  containers: [{name: main, image: busybox:1.36, command: ["tr", "a-z", "A-Z"], stdin: true, stdinOnce: true}]
"#;

/// The shell the tests run: its terminal, its size, then (after a line of input) the size
/// again. The client sends the resize and the input line on separate channels (kube-rs
/// multiplexes them in no fixed order, as a kubelet handles them apart), so the line may
/// arrive first: after it the shell waits up to 5 s for the new size before printing it.
const SCRIPT: &str = "tty; stty size; read line; i=0; \
    while [ \"$(stty size)\" != '50 132' ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
    stty size";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_with_a_tty_gets_a_sized_terminal() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(SHELL).await?;
    c.wait_pods("app=shell", Duration::from_secs(60), |p| {
        p.len() == 1 && p.iter().all(ready)
    })
    .await?;
    kube_rs(c).await.context("kube-rs")?;
    kubectl(c).await.context("kubectl")?;
    Ok(())
}

/// kube-rs `AttachParams::interactive_tty()`: a /dev/pts terminal, the size it sends
/// first, then a resize while the program runs.
async fn kube_rs(c: &TestCluster) -> Result<()> {
    let pods: Api<Pod> = Api::default_namespaced(c.client().await?);
    let mut attached = pods
        .exec(
            "shell",
            ["sh", "-c", SCRIPT],
            &AttachParams::interactive_tty(),
        )
        .await?;
    let mut sizes = attached.terminal_size().context("resize channel")?;
    sizes
        .send(TerminalSize {
            width: 101,
            height: 33,
        })
        .await?;
    let mut stdout = attached.stdout().context("stdout")?;
    let mut stdin = attached.stdin().context("stdin")?;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&out).contains("33 101") {
        ensure!(Instant::now() < deadline, "first size: {:?}", lossy(&out));
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(20), stdout.read(&mut buf)).await??;
        ensure!(n > 0, "output ended early: {:?}", lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    sizes
        .send(TerminalSize {
            width: 132,
            height: 50,
        })
        .await?;
    stdin.write_all(b"go\n").await?;
    tokio::time::timeout(Duration::from_secs(20), stdout.read_to_end(&mut out)).await??;
    let text = lossy(&out);
    ensure!(text.contains("/dev/pts/"), "tty names a terminal: {text:?}");
    ensure!(
        text.contains("50 132"),
        "the resize reached the program: {text:?}"
    );
    ensure!(
        text.contains("\r\n"),
        "a terminal's line discipline: {text:?}"
    );
    Ok(())
}

/// Real kubectl on a terminal (a pseudo-terminal this test holds): `exec -it` sends its
/// terminal's size and, on SIGWINCH, the new one.
async fn kubectl(c: &TestCluster) -> Result<()> {
    let (master, slave) = open_pty()?;
    set_size(&master, 33, 101)?;
    let stdio = |fd: &OwnedFd| -> Result<std::process::Stdio> { Ok(fd.try_clone()?.into()) };
    let mut child = tokio::process::Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(c.dir().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(c.dir().join("kubectl-cache"))
        .args(["exec", "-it", "shell", "--", "sh", "-c", SCRIPT])
        .stdin(stdio(&slave)?)
        .stdout(stdio(&slave)?)
        .stderr(stdio(&slave)?)
        .kill_on_drop(true)
        .spawn()?;
    drop(slave);
    let out = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let out = out.clone();
        let mut file = std::fs::File::from(master.try_clone()?);
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut buf = [0u8; 1024];
            // Ends with EIO once kubectl, the last holder of the slave, has exited.
            while let Ok(n) = file.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let seen = |needle: &str| lossy(&out.lock().unwrap()).contains(needle);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen("33 101") {
        ensure!(
            Instant::now() < deadline,
            "first size: {:?}",
            lossy(&out.lock().unwrap())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    set_size(&master, 50, 132)?;
    let pid = nix::unistd::Pid::from_raw(child.id().context("kubectl pid")? as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGWINCH)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // kubectl put its terminal in raw mode: a carriage return is the Enter key.
    let mut input = std::fs::File::from(master.try_clone()?);
    std::io::Write::write_all(&mut input, b"go\r")?;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await??;
    tokio::time::timeout(Duration::from_secs(5), reader).await??;
    let text = lossy(&out.lock().unwrap());
    ensure!(status.success(), "kubectl exec -it: {status:?}: {text:?}");
    ensure!(text.contains("/dev/pts/"), "tty names a terminal: {text:?}");
    ensure!(
        !text.contains("not a tty") && !text.contains("Unable to use a TTY"),
        "{text:?}"
    );
    ensure!(text.contains("50 132"), "SIGWINCH's new size: {text:?}");
    Ok(())
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn open_pty() -> Result<(OwnedFd, OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok((master, slave))
}

fn set_size(master: &OwnedFd, rows: u16, cols: u16) -> Result<()> {
    rustix::termios::tcsetwinsize(
        master,
        rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_streams_output_and_stdin() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = attach_scenario(&c).await;
    c.stop().await?;
    result
}

fn kubectl_command(c: &TestCluster, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("/usr/bin/kubectl");
    cmd.arg("--kubeconfig")
        .arg(c.dir().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(c.dir().join("kubectl-cache"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn attach_scenario(c: &TestCluster) -> Result<()> {
    c.apply(ATTACHED).await?;
    c.wait_pods("app=attach", Duration::from_secs(60), |p| {
        p.len() == 2 && p.iter().all(ready)
    })
    .await?;
    // Output: what the running container prints from now on, stdout and stderr apart.
    let mut ticker = kubectl_command(c, &["attach", "ticker"]).spawn()?;
    let mut stdout = ticker.stdout.take().context("stdout")?;
    let mut stderr = ticker.stderr.take().context("stderr")?;
    let errors = tokio::spawn(async move {
        let mut err = Vec::new();
        let mut buf = [0u8; 1024];
        // Until kubectl is gone: a reader that stops early would SIGPIPE it.
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => err.extend_from_slice(&buf[..n]),
            }
        }
        err
    });
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while lossy(&out).matches("tick").count() < 3 {
        ensure!(
            Instant::now() < deadline,
            "attach output: {:?}",
            lossy(&out)
        );
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(20), stdout.read(&mut buf)).await??;
        if n == 0 {
            let status = ticker.wait().await?;
            let err = tokio::time::timeout(Duration::from_secs(5), errors).await??;
            anyhow::bail!(
                "attach ended early ({status}): {:?} {:?}",
                lossy(&out),
                lossy(&err)
            );
        }
        out.extend_from_slice(&buf[..n]);
    }
    ticker.kill().await?;
    let err = tokio::time::timeout(Duration::from_secs(20), errors).await??;
    let text = lossy(&out);
    ensure!(!text.contains("tock"), "stderr is not on stdout: {text:?}");
    ensure!(lossy(&err).contains("tock"), "stderr: {:?}", lossy(&err));
    // stdin: the container's stdin pipe; stdinOnce closes it when kubectl's stdin ends, the
    // container exits, and the session ends with it (exit 0).
    let mut upper = kubectl_command(c, &["attach", "-i", "upper"])
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    let mut input = upper.stdin.take().context("stdin")?;
    input.write_all(b"hello attach\n").await?;
    drop(input);
    let done = tokio::time::timeout(Duration::from_secs(30), upper.wait_with_output()).await??;
    ensure!(
        done.status.success() && lossy(&done.stdout).contains("HELLO ATTACH"),
        "attach -i: {done:?}"
    );
    Ok(())
}
