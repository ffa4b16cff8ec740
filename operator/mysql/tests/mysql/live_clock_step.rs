//! The write deadline against a real `mariadbd` whose wall clock is stepped (Debian's
//! libfaketime, preloaded into that one process, its offset in a control file): what a step
//! does to the switch, and what the sidecar's rule (`deadline::clock_step`,
//! `deadline::reinstall_after`) sees and does about it. A missing libfaketime fails these
//! tests with a message naming the package; nothing is skipped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bloodraven_mysql::{
    deadline::{clock_step, reinstall_after, ClockStep},
    live::{
        sandbox::{loopback_addresses, MariaDbServer},
        LiveMysql,
    },
};

const LIBFAKETIME: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

struct SteppedServer {
    server: MariaDbServer,
    control: PathBuf,
    origin: Instant,
}

impl Drop for SteppedServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.control);
    }
}

impl SteppedServer {
    async fn start() -> Self {
        let library = LIBFAKETIME
            .iter()
            .find(|path| Path::new(path).is_file())
            .unwrap_or_else(|| {
                panic!("libfaketime is not installed (./setup installs Debian's libfaketime)")
            });
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let control = std::env::temp_dir().join(format!(
            "bloodraven-clock-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&control, "+0\n").expect("control file");
        let address = loopback_addresses(1).expect("address")[0];
        let env = vec![
            ("LD_PRELOAD".to_owned(), (*library).to_owned()),
            (
                "FAKETIME_TIMESTAMP_FILE".to_owned(),
                control.display().to_string(),
            ),
            ("FAKETIME_CACHE_DURATION".to_owned(), "1".to_owned()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        ];
        let server = MariaDbServer::start_with_env("iad", 1, address, env)
            .await
            .unwrap_or_else(|error| panic!("mariadbd under libfaketime: {error}"));
        Self {
            server,
            control,
            origin: Instant::now(),
        }
    }

    fn client(&self) -> LiveMysql {
        self.server.admin_client()
    }

    /// Steps mysqld's clock to `seconds` from the real one; waits until mysqld's `NOW()` reads
    /// it. libfaketime re-reads its control file only once its cache (whole seconds, compared
    /// strictly) has expired, so a fixed sleep is not enough on a loaded machine: the test that
    /// slept 1.5 s saw no step in CI.
    async fn step(&self, seconds: i64) {
        std::fs::write(&self.control, format!("{seconds:+}\n")).expect("step");
        let start = Instant::now();
        loop {
            let offset = self.mysqld_offset_seconds().await;
            if (offset - seconds as f64).abs() < 1.0 {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "mysqld's clock is {offset:.1} s from the real one, 15 s after stepping it to {seconds:+} s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// mysqld's `NOW(6)` minus this process's wall clock, in seconds.
    async fn mysqld_offset_seconds(&self) -> f64 {
        let client = self.client();
        let mut conn = client.connect().await.expect("connect");
        let rows = client
            .rows(&mut conn, "SELECT UNIX_TIMESTAMP(NOW(6)) AS now")
            .await
            .expect("NOW(6)");
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let mysqld: f64 = rows
            .first()
            .and_then(|row| row.get("now"))
            .and_then(Clone::clone)
            .and_then(|value| value.parse().ok())
            .expect("UNIX_TIMESTAMP(NOW(6)) is a number");
        mysqld - real
    }

    fn monotonic_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn read_only(&self) -> bool {
        let client = self.client();
        let mut conn = client.connect().await.expect("connect");
        let rows = client
            .rows(&mut conn, "SELECT @@GLOBAL.read_only AS ro")
            .await
            .expect("read_only");
        rows.first()
            .and_then(|row| row.get("ro"))
            .and_then(Clone::clone)
            .is_some_and(|value| value == "1")
    }

    async fn set_writable(&self) {
        let client = self.client();
        let mut conn = client.connect().await.expect("connect");
        client
            .execute(&mut conn, "SET GLOBAL read_only = OFF")
            .await
            .expect("unfence");
    }

    /// Waits up to `within` for read_only = ON; returns how long it took.
    async fn wait_fenced(&self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < within {
            if self.read_only().await {
                return Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_step_of_mysqlds_clock_fires_the_switch_and_the_next_arm_sees_it() {
    let server = SteppedServer::start().await;
    let client = server.client();
    client.install_write_deadline().await.expect("install");
    let first = client
        .arm_write_deadline(|| Duration::from_secs(5), || server.monotonic_ms())
        .await
        .expect("arm");
    server.set_writable().await;
    assert!(
        server
            .wait_fenced(Duration::from_millis(2500))
            .await
            .is_none(),
        "fenced with 5 s of deadline left"
    );
    // +20 s: the 5 s deadline has passed on mysqld's clock, so the event fences at its next
    // run although no lease ran out (a sidecar's lease counts on its monotonic clock).
    server.step(20).await;
    assert!(
        server.wait_fenced(Duration::from_secs(5)).await.is_some(),
        "the switch fires on mysqld's stepped clock"
    );
    // The sidecar's next arm reads mysqld's clock, sees the step, and the deadline it writes is
    // on the new clock: writable again, it stays so.
    let second = client
        .arm_write_deadline(|| Duration::from_secs(5), || server.monotonic_ms())
        .await
        .expect("arm again");
    let step = clock_step(&first.clock, &second.clock);
    assert!(
        matches!(step, ClockStep::Forward(by) if by >= Duration::from_secs(19) && by <= Duration::from_secs(21)),
        "{step:?}"
    );
    assert!(!reinstall_after(step));
    server.set_writable().await;
    assert!(
        server
            .wait_fenced(Duration::from_millis(2500))
            .await
            .is_none(),
        "re-armed on the stepped clock: no early fence"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backward_step_stalls_the_switch_until_the_event_is_created_again() {
    let server = SteppedServer::start().await;
    let client = server.client();
    client.install_write_deadline().await.expect("install");
    let first = client
        .arm_write_deadline(|| Duration::from_secs(30), || server.monotonic_ms())
        .await
        .expect("arm");
    server.set_writable().await;
    // Back 20 s. The sidecar's next arm sees the step, and arms a deadline already passed (a
    // sidecar whose lease ran out and then died): the event should fence within a period.
    server.step(-20).await;
    let second = client
        .arm_write_deadline(|| Duration::ZERO, || server.monotonic_ms())
        .await
        .expect("arm a passed deadline");
    let step = clock_step(&first.clock, &second.clock);
    assert!(
        matches!(step, ClockStep::Backward(by) if by >= Duration::from_secs(19) && by <= Duration::from_secs(21)),
        "{step:?}"
    );
    // But the scheduler waits for the run it had planned on the old clock, 20 s ahead: the
    // switch does not fire (what the old rule left, had the sidecar died now).
    assert!(
        server.wait_fenced(Duration::from_secs(4)).await.is_none(),
        "the event scheduler runs through a backward step (this test's premise is wrong)"
    );
    // The rule re-creates the event, which schedules it from mysqld's new now: it fires.
    assert!(reinstall_after(step));
    client
        .install_write_deadline()
        .await
        .expect("install again");
    let fenced = server.wait_fenced(Duration::from_secs(5)).await;
    assert!(
        fenced.is_some(),
        "the re-created event fences a passed deadline"
    );
}
