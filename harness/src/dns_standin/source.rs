//! The stand-in's inputs from the Kubernetes API: a watch of the DNSEndpoints of one namespace
//! (`externaldns.k8s.io/v1alpha1`, read as untyped objects so a malformed one is skipped, not
//! fatal to the watch) and a watch of the pause ConfigMap ([`PAUSE_CONFIGMAP`], key
//! [`PAUSE_KEY`]). Each watch turns its events into [`Input`]s ([`EndpointEvents`],
//! [`PauseEvents`], pure) and sends them to the stand-in's loop. A broken watch is retried with
//! kube's default backoff and logged; it never ends the process.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;

use super::provider::Input;
use super::records::{records_of, ARecord, ObjectKey};
use crate::error::{Error, Result};

/// The ConfigMap that pauses the stand-in ("external-dns stopped").
pub const PAUSE_CONFIGMAP: &str = "bloodraven-external-dns";
/// Its key: `"true"` pauses, `"false"` (or no key, or no ConfigMap) runs.
pub const PAUSE_KEY: &str = "paused";

/// Whether a pause ConfigMap's data pauses the stand-in. No ConfigMap or no key: not paused; a
/// value other than `"true"` or `"false"` is an error (the caller logs it and does not pause).
pub fn paused_of(data: Option<&BTreeMap<String, String>>) -> Result<bool> {
    match data
        .and_then(|data| data.get(PAUSE_KEY))
        .map(String::as_str)
    {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(Error::Cluster {
            action: format!("read ConfigMap {PAUSE_CONFIGMAP} key {PAUSE_KEY}"),
            reason: format!("{other:?} is neither \"true\" nor \"false\""),
        }),
    }
}

fn key_of(object: &DynamicObject) -> ObjectKey {
    ObjectKey::new(object.namespace().unwrap_or_default(), object.name_any())
}

fn records_or_none(key: &ObjectKey, object: &DynamicObject) -> Vec<ARecord> {
    match records_of(key, &object.data) {
        Ok(records) => records,
        Err(error) => {
            tracing::error!(dns_endpoint = %key, error = %error, "skipping a malformed DNSEndpoint");
            Vec::new()
        }
    }
}

/// Turns a DNSEndpoint watch's events into inputs; a (re-)list is buffered and sent whole.
#[derive(Debug, Default)]
pub struct EndpointEvents {
    listing: Option<BTreeMap<ObjectKey, Vec<ARecord>>>,
}

impl EndpointEvents {
    /// The input for one event, if any (none while a list is being buffered).
    pub fn on_event(&mut self, event: Event<DynamicObject>) -> Option<Input> {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                None
            }
            Event::InitApply(object) => {
                let key = key_of(&object);
                let records = records_or_none(&key, &object);
                self.listing
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, records);
                None
            }
            Event::InitDone => Some(Input::AllEndpoints(self.listing.take().unwrap_or_default())),
            Event::Apply(object) => {
                let key = key_of(&object);
                let records = records_or_none(&key, &object);
                Some(Input::Endpoint(key, records))
            }
            Event::Delete(object) => Some(Input::EndpointDeleted(key_of(&object))),
        }
    }
}

/// Turns the pause ConfigMap watch's events into inputs.
#[derive(Debug, Default)]
pub struct PauseEvents {
    listing: Option<Option<bool>>,
}

fn paused_or_not(config_map: &ConfigMap) -> bool {
    paused_of(config_map.data.as_ref()).unwrap_or_else(|error| {
        tracing::error!(error = %error, "not pausing");
        false
    })
}

impl PauseEvents {
    /// The input for one event, if any. A list without the ConfigMap means not paused.
    pub fn on_event(&mut self, event: Event<ConfigMap>) -> Option<Input> {
        match event {
            Event::Init => {
                self.listing = Some(None);
                None
            }
            Event::InitApply(config_map) => {
                self.listing = Some(Some(paused_or_not(&config_map)));
                None
            }
            Event::InitDone => {
                let paused = self.listing.take().flatten();
                if paused.is_none() {
                    tracing::info!(
                        configmap = PAUSE_CONFIGMAP,
                        "no pause ConfigMap: not paused"
                    );
                }
                Some(Input::Paused(paused.unwrap_or(false)))
            }
            Event::Apply(config_map) => Some(Input::Paused(paused_or_not(&config_map))),
            Event::Delete(_) => {
                tracing::info!(
                    configmap = PAUSE_CONFIGMAP,
                    "the pause ConfigMap was deleted: not paused"
                );
                Some(Input::Paused(false))
            }
        }
    }
}

/// Watches the DNSEndpoints of `namespace` and sends their inputs until `inputs` closes.
pub async fn watch_endpoints(client: Client, namespace: String, inputs: mpsc::Sender<Input>) {
    let resource = ApiResource::erase::<bloodraven_api::DNSEndpoint>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &resource);
    let mut events = EndpointEvents::default();
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                if let Some(input) = events.on_event(event) {
                    if inputs.send(input).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%namespace, error = %error, "watching DNSEndpoints failed; retrying");
            }
        }
    }
}

/// Watches the pause ConfigMap of `namespace` and sends its inputs until `inputs` closes.
pub async fn watch_pause(client: Client, namespace: String, inputs: mpsc::Sender<Input>) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={PAUSE_CONFIGMAP}"));
    let mut events = PauseEvents::default();
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                if let Some(input) = events.on_event(event) {
                    if inputs.send(input).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(
                    %namespace,
                    configmap = PAUSE_CONFIGMAP,
                    error = %error,
                    "watching the pause ConfigMap failed; retrying"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn endpoint(name: &str, spec: serde_json::Value) -> DynamicObject {
        let resource = ApiResource::erase::<bloodraven_api::DNSEndpoint>(&());
        let mut object = DynamicObject::new(name, &resource).within("bloodraven-playground");
        object.data = json!({ "spec": spec });
        object
    }

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    // docs/design/harness.md#the-portable-path: "stopping external-dns" through the API is the
    // ConfigMap bloodraven-external-dns key paused: exactly "true" pauses; anything else is an
    // error that does not pause.
    #[test]
    fn the_pause_configmap_pauses_on_true_only() {
        let data = |value: &str| BTreeMap::from([(PAUSE_KEY.to_owned(), value.to_owned())]);
        assert!(paused_of(Some(&data("true"))).expect("true"));
        assert!(!paused_of(Some(&data("false"))).expect("false"));
        assert!(!paused_of(Some(&BTreeMap::new())).expect("no key"));
        assert!(!paused_of(None).expect("no data"));
        let error = paused_of(Some(&data("yes"))).expect_err("yes");
        assert_eq!(
            error.to_string(),
            "read ConfigMap bloodraven-external-dns key paused: \"yes\" is neither \"true\" nor \"false\""
        );

        let mut events = PauseEvents::default();
        assert_eq!(events.on_event(Event::Init), None);
        assert_eq!(
            events.on_event(Event::InitDone),
            Some(Input::Paused(false)),
            "no ConfigMap: not paused"
        );
        assert_eq!(events.on_event(Event::Init), None);
        assert_eq!(
            events.on_event(Event::InitApply(config_map(&[("paused", "true")]))),
            None
        );
        assert_eq!(events.on_event(Event::InitDone), Some(Input::Paused(true)));
        assert_eq!(
            events.on_event(Event::Apply(config_map(&[("paused", "maybe")]))),
            Some(Input::Paused(false))
        );
        assert_eq!(
            events.on_event(Event::Delete(config_map(&[("paused", "true")]))),
            Some(Input::Paused(false))
        );
    }

    // docs/design/harness.md#the-portable-path: a (re-)list of DNSEndpoints is sent whole, so
    // objects deleted while the watch was broken are dropped; a malformed object holds no
    // records and the watch goes on.
    #[test]
    fn a_dns_endpoint_watch_becomes_inputs() {
        let good = endpoint(
            "db",
            json!({"endpoints": [{"dnsName": "db.example.local", "recordType": "A",
                "recordTTL": 10, "targets": ["10.0.0.1"]}]}),
        );
        let bad = endpoint(
            "bad",
            json!({"endpoints": [{"dnsName": "x.example.local", "recordType": "A",
                "targets": ["not-an-ip"]}]}),
        );
        let key = |name: &str| ObjectKey::new("bloodraven-playground", name);
        let mut events = EndpointEvents::default();
        assert_eq!(events.on_event(Event::Init), None);
        assert_eq!(events.on_event(Event::InitApply(good.clone())), None);
        assert_eq!(events.on_event(Event::InitApply(bad.clone())), None);
        let Some(Input::AllEndpoints(all)) = events.on_event(Event::InitDone) else {
            panic!("the list is sent whole at InitDone");
        };
        assert_eq!(all.len(), 2);
        assert_eq!(all[&key("db")].len(), 1);
        assert_eq!(all[&key("db")][0].ttl_seconds, 10);
        assert!(all[&key("bad")].is_empty(), "malformed: no records");
        assert_eq!(
            events.on_event(Event::Apply(bad)),
            Some(Input::Endpoint(key("bad"), Vec::new()))
        );
        assert_eq!(
            events.on_event(Event::Delete(good)),
            Some(Input::EndpointDeleted(key("db")))
        );
    }
}
