//! Helpers shared by the end-to-end tests (each file under `tests/` is its own crate).

use std::time::Duration;

/// Probes every 50 ms until `probe` returns a value or `seconds` have passed.
pub async fn eventually<T, F, Fut>(seconds: u64, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    while tokio::time::Instant::now() < deadline {
        if let Some(value) = probe().await {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}
