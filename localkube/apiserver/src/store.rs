//! The object store: every object as JSON, one global monotonically increasing
//! resourceVersion (trap 1), a bounded history window for watches (trap 2), a broadcast
//! fan-out, and persistence to the state dir as a snapshot plus an append log.

use super::error::{ApiError, Error, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Number of log entries after which the log is folded into the snapshot.
const LOG_ENTRIES_MAX: usize = 20_000;
/// Capacity of the broadcast channel feeding watchers and controllers.
const BROADCAST_CAPACITY: usize = 16_384;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of one object.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// Storage key (`group/plural`).
    pub key: String,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// What happened.
    pub event_type: EventType,
    /// The object after the change (for deletions: its last state with the deletion's rv).
    pub object: Arc<Value>,
    /// The object before the change, if any.
    pub old: Option<Arc<Value>>,
    /// The watch line of this event as stored (type and object), encoded once and shared by
    /// every watcher that sends it unchanged.
    pub encoded: std::sync::OnceLock<bytes::Bytes>,
}

type Objects = HashMap<String, BTreeMap<(String, String), Value>>;

struct Inner {
    rv: u64,
    objects: Objects,
    history: VecDeque<Arc<StoreEvent>>,
    log: Option<BufWriter<File>>,
    log_entries: usize,
}

/// Backlog of a watch plus its subscription.
pub type WatchStart = (Vec<Arc<StoreEvent>>, broadcast::Receiver<Arc<StoreEvent>>);

/// The in-memory store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<StoreEvent>>,
    history_max: usize,
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Store")
            .field("dir", &self.dir)
            .field("history_max", &self.history_max)
            .finish()
    }
}

fn names_of(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn rv_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|text| text.parse().ok())
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// Opens the store, loading what `dir` holds (`None`: memory only). `history_max` bounds
    /// the watch history window.
    pub fn open(dir: Option<&Path>, history_max: usize) -> Result<Store> {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        let mut inner = Inner {
            rv: 1,
            objects: HashMap::new(),
            history: VecDeque::new(),
            log: None,
            log_entries: 0,
        };
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            let snap = dir.join("store.snapshot.json");
            if snap.exists() {
                let text = std::fs::read_to_string(&snap).map_err(|e| Error::io(&snap, e))?;
                let value: Value = serde_json::from_str(&text)?;
                inner.rv = value.get("rv").and_then(Value::as_u64).unwrap_or(1);
                for item in value
                    .get("objects")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let key = item
                        .get("k")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let obj = item.get("o").cloned().unwrap_or(Value::Null);
                    let (ns, name) = ns_name(&obj);
                    inner
                        .objects
                        .entry(key)
                        .or_default()
                        .insert((ns, name), obj);
                }
            }
            let log_path = dir.join("store.log");
            if log_path.exists() {
                let file = File::open(&log_path).map_err(|e| Error::io(&log_path, e))?;
                for line in BufReader::new(file).lines() {
                    let line = line.map_err(|error| Error::io(&log_path, error))?;
                    // A torn last line after a crash is skipped.
                    let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let rv = entry.get("rv").and_then(Value::as_u64).unwrap_or(0);
                    let key = entry
                        .get("k")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let ns = entry
                        .get("ns")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let name = entry
                        .get("n")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    inner.rv = inner.rv.max(rv);
                    match entry.get("o") {
                        Some(Value::Null) | None => {
                            if let Some(by_name) = inner.objects.get_mut(&key) {
                                by_name.remove(&(ns, name));
                            }
                        }
                        Some(object) => {
                            inner
                                .objects
                                .entry(key)
                                .or_default()
                                .insert((ns, name), object.clone());
                        }
                    }
                }
            }
            let store = Store {
                inner: Mutex::new(inner),
                tx,
                history_max,
                dir: Some(dir.to_path_buf()),
            };
            {
                let mut state = store.lock();
                store.compact(&mut state)?;
            }
            return Ok(store);
        }
        Ok(Store {
            inner: Mutex::new(inner),
            tx,
            history_max,
            dir: None,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn compact(&self, inner: &mut Inner) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let mut objects = Vec::new();
        for (key, by_name) in &inner.objects {
            for object in by_name.values() {
                objects.push(json!({"k": key, "o": object}));
            }
        }
        let snap = dir.join("store.snapshot.json");
        let tmp = dir.join("store.snapshot.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(&json!({"rv": inner.rv, "objects": objects}))?,
        )
        .map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &snap).map_err(|e| Error::io(&snap, e))?;
        let log_path = dir.join("store.log");
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&log_path)
            .map_err(|error| Error::io(&log_path, error))?;
        inner.log = Some(BufWriter::new(file));
        inner.log_entries = 0;
        Ok(())
    }

    fn append_log(&self, inner: &mut Inner, key: &str, ns: &str, name: &str, obj: Option<&Value>) {
        let Some(log) = inner.log.as_mut() else {
            return;
        };
        let entry = json!({"rv": inner.rv, "k": key, "ns": ns, "n": name, "o": obj});
        let ok = serde_json::to_writer(&mut *log, &entry).is_ok()
            && log.write_all(b"\n").is_ok()
            && log.flush().is_ok();
        if !ok {
            tracing::error!(key, ns, name, "failed to append to the store log");
        }
        inner.log_entries += 1;
        if inner.log_entries > LOG_ENTRIES_MAX {
            if let Err(e) = self.compact(inner) {
                tracing::error!(error = %e, "failed to compact the store log");
            }
        }
    }

    fn record(&self, inner: &mut Inner, ev: StoreEvent) {
        let ev = Arc::new(ev);
        inner.history.push_back(ev.clone());
        while inner.history.len() > self.history_max {
            inner.history.pop_front();
        }
        let _ = self.tx.send(ev);
    }

    /// The current (latest) resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(key)
            .and_then(|by_name| by_name.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Objects of one resource (optionally in one namespace), sorted by namespace and name,
    /// with the resourceVersion the list is consistent with.
    pub fn list(&self, key: &str, ns: Option<&str>) -> (Vec<Value>, u64) {
        let state = self.lock();
        let items = match state.objects.get(key) {
            None => Vec::new(),
            Some(by_name) => match ns {
                None => by_name.values().cloned().collect(),
                Some(ns) => by_name
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((name, _), _)| name == ns)
                    .map(|(_, value)| value.clone())
                    .collect(),
            },
        };
        (items, state.rv)
    }

    /// Every object of every resource, with its storage key.
    pub fn all_objects(&self) -> Vec<(String, Value)> {
        let state = self.lock();
        state
            .objects
            .iter()
            .flat_map(|(key, by_name)| {
                by_name
                    .values()
                    .map(move |value| (key.clone(), value.clone()))
            })
            .collect()
    }

    /// Stores a new object, assigning the next resourceVersion.
    pub fn create(&self, key: &str, obj: Value) -> Result<Value, ApiError> {
        let (ns, name) = ns_name(&obj);
        let mut state = self.lock();
        let by_name = state.objects.entry(key.to_string()).or_default();
        if by_name.contains_key(&(ns.clone(), name.clone())) {
            let (group, plural) = names_of(key);
            return Err(ApiError::already_exists(group, plural, &name));
        }
        Ok(self.commit(&mut state, key, &ns, &name, obj, EventType::Added, None))
    }

    /// Replaces an object; with `expected_rv`, fails with Conflict when it moved on.
    pub fn update(
        &self,
        key: &str,
        obj: Value,
        expected_rv: Option<u64>,
    ) -> Result<Value, ApiError> {
        let (ns, name) = ns_name(&obj);
        let (group, plural) = names_of(key);
        let mut state = self.lock();
        let old = state
            .objects
            .get(key)
            .and_then(|by_name| by_name.get(&(ns.clone(), name.clone())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, plural, &name))?;
        if let Some(expected) = expected_rv {
            if rv_of(&old) != Some(expected) {
                return Err(ApiError::conflict(group, plural, &name));
            }
        }
        Ok(self.commit(
            &mut state,
            key,
            &ns,
            &name,
            obj,
            EventType::Modified,
            Some(old),
        ))
    }

    /// Removes an object; the returned object carries the deletion's resourceVersion.
    pub fn delete(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        expected_rv: Option<u64>,
    ) -> Result<Value, ApiError> {
        let (group, plural) = names_of(key);
        let mut state = self.lock();
        let k = (ns.to_string(), name.to_string());
        let old = state
            .objects
            .get(key)
            .and_then(|by_name| by_name.get(&k))
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, plural, name))?;
        if let Some(expected) = expected_rv {
            if rv_of(&old) != Some(expected) {
                return Err(ApiError::conflict(group, plural, name));
            }
        }
        let obj = old.clone();
        Ok(self.commit(
            &mut state,
            key,
            ns,
            name,
            obj,
            EventType::Deleted,
            Some(old),
        ))
    }

    /// The one write path: the next global resourceVersion stamped on `obj`, the object
    /// stored (or removed, for `Deleted`: the returned object then carries the deletion's
    /// resourceVersion, trap 1), the change appended to the log and recorded for watchers.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        inner: &mut Inner,
        key: &str,
        ns: &str,
        name: &str,
        mut obj: Value,
        event_type: EventType,
        old: Option<Value>,
    ) -> Value {
        inner.rv += 1;
        let rv = inner.rv;
        set_rv(&mut obj, rv);
        let k = (ns.to_string(), name.to_string());
        if event_type == EventType::Deleted {
            if let Some(by_name) = inner.objects.get_mut(key) {
                by_name.remove(&k);
            }
            self.append_log(inner, key, ns, name, None);
        } else {
            inner
                .objects
                .entry(key.to_string())
                .or_default()
                .insert(k, obj.clone());
            self.append_log(inner, key, ns, name, Some(&obj));
        }
        let ev = StoreEvent {
            rv,
            key: key.into(),
            namespace: ns.into(),
            name: name.into(),
            event_type,
            object: Arc::new(obj.clone()),
            old: old.map(Arc::new),
            encoded: std::sync::OnceLock::new(),
        };
        self.record(inner, ev);
        obj
    }

    /// Subscribes to every future change.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.tx.subscribe()
    }

    /// The changes after `rv` still in the history window plus a subscription to later ones,
    /// taken atomically. `Err(oldest)` when `rv` is older than the window (trap 2).
    pub fn watch_from(&self, rv: u64) -> Result<WatchStart, u64> {
        let state = self.lock();
        let oldest = state
            .history
            .front()
            .map(|event| event.rv)
            .unwrap_or(state.rv + 1);
        // Every change after `rv` must still be in the window: the first one kept must be at
        // most rv + 1, unless nothing happened since `rv`.
        if rv < state.rv && oldest > rv + 1 {
            return Err(oldest);
        }
        let backlog = state
            .history
            .iter()
            .filter(|e| e.rv > rv)
            .cloned()
            .collect();
        Ok((backlog, self.tx.subscribe()))
    }

    /// A consistent list of one resource plus a subscription to later changes.
    pub fn list_and_subscribe(
        &self,
        key: &str,
        ns: Option<&str>,
    ) -> (Vec<Value>, u64, broadcast::Receiver<Arc<StoreEvent>>) {
        let state = self.lock();
        let items = match state.objects.get(key) {
            None => Vec::new(),
            Some(by_name) => by_name
                .iter()
                .filter(|((name, _), _)| ns.map(|ns| ns == name).unwrap_or(true))
                .map(|(_, value)| value.clone())
                .collect(),
        };
        (items, state.rv, self.tx.subscribe())
    }

    /// Writes a snapshot and truncates the log (on shutdown).
    pub fn flush(&self) -> Result<()> {
        let mut state = self.lock();
        self.compact(&mut state)
    }
}

/// The namespace and name of an object.
pub fn ns_name(obj: &Value) -> (String, String) {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    (ns, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn trap1_resource_versions_are_global_and_monotonic() {
        let store = Store::open(None, 100).expect("store");
        let a = store.create("/configmaps", obj("a")).expect("create");
        let secrets = store.create("/secrets", obj("b")).expect("create");
        let configmaps = store
            .delete("/configmaps", "default", "a", None)
            .expect("delete");
        let rv = |value: &Value| rv_of(value).expect("rv");
        assert!(
            rv(&a) < rv(&secrets) && rv(&secrets) < rv(&configmaps),
            "deleted objects carry the deletion's rv"
        );
    }

    #[test]
    fn trap2_watch_from_too_old_rv_is_expired() {
        let store = Store::open(None, 2).expect("store");
        for index in 0..5 {
            store
                .create("/configmaps", obj(&format!("c{index}")))
                .expect("create");
        }
        assert!(store.watch_from(1).is_err());
        let now = store.current_rv();
        assert!(store.watch_from(now).is_ok());
        assert!(store.watch_from(now - 1).is_ok());
    }

    #[test]
    fn store_persists_across_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = Store::open(Some(dir.path()), 10).expect("store");
            s.create("/configmaps", obj("a")).expect("create");
            s.create("/configmaps", obj("b")).expect("create");
            s.delete("/configmaps", "default", "b", None)
                .expect("delete");
        }
        let store = Store::open(Some(dir.path()), 10).expect("store");
        assert!(store.get("/configmaps", "default", "a").is_some());
        assert!(store.get("/configmaps", "default", "b").is_none());
        assert_eq!(store.current_rv(), 4);
    }
}
