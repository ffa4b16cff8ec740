//! Performance figures (printed, not asserted as timings): time from start to a ready
//! API, create+get latency percentiles, and one update fanned out to 1,000 watchers. The
//! assertions are about correctness: every watcher receives the update.
//! Run with `cargo test -p localkube-apiserver --release --test apiserver bench:: -- --nocapture`.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

const CREATES: usize = 300;
const WATCHERS: usize = 1000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_startup_create_get_and_watch_fan_out() {
    crate::support::crypto();
    let dir = tempfile::tempdir().expect("tempdir");
    let t0 = Instant::now();
    let lk = localkube_apiserver::LocalKube::start(localkube_apiserver::Config::new(dir.path()))
        .await
        .expect("start");
    let client = crate::support::admin_client(&lk).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.list(&Default::default()).await.expect("first list");
    let ready = t0.elapsed();

    let mut lat = Vec::with_capacity(CREATES);
    for i in 0..CREATES {
        let t = Instant::now();
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("b{i}")}, "data": {"k": "v"}}),
        )
        .expect("cm");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
        cms.get(&format!("b{i}")).await.expect("get");
        lat.push(t.elapsed());
    }
    lat.sort();

    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "fan"}})).expect("cm"),
    )
    .await
    .expect("create");
    let rv = cms
        .get("fan")
        .await
        .expect("get")
        .metadata
        .resource_version
        .expect("rv");
    let mut streams = Vec::with_capacity(WATCHERS);
    for _ in 0..WATCHERS {
        let s = cms
            .watch(
                &WatchParams::default()
                    .fields("metadata.name=fan")
                    .timeout(60),
                &rv,
            )
            .await
            .expect("watch")
            .boxed();
        streams.push(s);
    }
    let handles: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                while let Ok(Some(ev)) = s.try_next().await {
                    if let WatchEvent::Modified(_) = ev {
                        return Some(Instant::now());
                    }
                }
                None
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    cms.patch(
        "fan",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .expect("update");
    let mut received = 0;
    let mut last = t;
    for h in handles {
        if let Ok(Some(at)) = tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .expect("in time")
        {
            received += 1;
            last = last.max(at);
        }
    }
    let fan_out = last - t;
    println!("localkube bench: start to ready API {ready:?}");
    println!(
        "localkube bench: create+get p50 {:?} p99 {:?} over {CREATES}",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
    println!(
        "localkube bench: one update fanned out to {received}/{WATCHERS} watchers in {fan_out:?}"
    );
    assert_eq!(received, WATCHERS, "every watcher receives the update");
    lk.shutdown().await.expect("stop");
}
