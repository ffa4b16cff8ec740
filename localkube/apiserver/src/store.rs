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
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
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
        .and_then(|s| s.parse().ok())
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
                let v: Value = serde_json::from_str(&text)?;
                inner.rv = v.get("rv").and_then(Value::as_u64).unwrap_or(1);
                for item in v
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
                let f = File::open(&log_path).map_err(|e| Error::io(&log_path, e))?;
                for line in BufReader::new(f).lines() {
                    let line = line.map_err(|e| Error::io(&log_path, e))?;
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
                            if let Some(m) = inner.objects.get_mut(&key) {
                                m.remove(&(ns, name));
                            }
                        }
                        Some(o) => {
                            inner
                                .objects
                                .entry(key)
                                .or_default()
                                .insert((ns, name), o.clone());
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
                let mut g = store.lock();
                store.compact(&mut g)?;
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
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn compact(&self, g: &mut Inner) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let mut objects = Vec::new();
        for (k, m) in &g.objects {
            for o in m.values() {
                objects.push(json!({"k": k, "o": o}));
            }
        }
        let snap = dir.join("store.snapshot.json");
        let tmp = dir.join("store.snapshot.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(&json!({"rv": g.rv, "objects": objects}))?,
        )
        .map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &snap).map_err(|e| Error::io(&snap, e))?;
        let log_path = dir.join("store.log");
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, e))?;
        g.log = Some(BufWriter::new(f));
        g.log_entries = 0;
        Ok(())
    }

    fn append_log(&self, g: &mut Inner, key: &str, ns: &str, name: &str, obj: Option<&Value>) {
        let Some(log) = g.log.as_mut() else { return };
        let entry = json!({"rv": g.rv, "k": key, "ns": ns, "n": name, "o": obj});
        let ok = serde_json::to_writer(&mut *log, &entry).is_ok()
            && log.write_all(b"\n").is_ok()
            && log.flush().is_ok();
        if !ok {
            tracing::error!(key, ns, name, "failed to append to the store log");
        }
        g.log_entries += 1;
        if g.log_entries > LOG_ENTRIES_MAX {
            if let Err(e) = self.compact(g) {
                tracing::error!(error = %e, "failed to compact the store log");
            }
        }
    }

    fn record(&self, g: &mut Inner, ev: StoreEvent) {
        let ev = Arc::new(ev);
        g.history.push_back(ev.clone());
        while g.history.len() > self.history_max {
            g.history.pop_front();
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
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Objects of one resource (optionally in one namespace), sorted by namespace and name,
    /// with the resourceVersion the list is consistent with.
    pub fn list(&self, key: &str, ns: Option<&str>) -> (Vec<Value>, u64) {
        let g = self.lock();
        let items = match g.objects.get(key) {
            None => Vec::new(),
            Some(m) => match ns {
                None => m.values().cloned().collect(),
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
            },
        };
        (items, g.rv)
    }

    /// Every object of every resource, with its storage key.
    pub fn all_objects(&self) -> Vec<(String, Value)> {
        let g = self.lock();
        g.objects
            .iter()
            .flat_map(|(k, m)| m.values().map(move |v| (k.clone(), v.clone())))
            .collect()
    }

    /// Stores a new object, assigning the next resourceVersion.
    pub fn create(&self, key: &str, obj: Value) -> Result<Value, ApiError> {
        let (ns, name) = ns_name(&obj);
        let mut g = self.lock();
        let m = g.objects.entry(key.to_string()).or_default();
        if m.contains_key(&(ns.clone(), name.clone())) {
            let (group, plural) = names_of(key);
            return Err(ApiError::already_exists(group, plural, &name));
        }
        Ok(self.commit(&mut g, key, &ns, &name, obj, EventType::Added, None))
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
        let mut g = self.lock();
        let old = g
            .objects
            .get(key)
            .and_then(|m| m.get(&(ns.clone(), name.clone())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, plural, &name))?;
        if let Some(expected) = expected_rv {
            if rv_of(&old) != Some(expected) {
                return Err(ApiError::conflict(group, plural, &name));
            }
        }
        Ok(self.commit(&mut g, key, &ns, &name, obj, EventType::Modified, Some(old)))
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
        let mut g = self.lock();
        let k = (ns.to_string(), name.to_string());
        let old = g
            .objects
            .get(key)
            .and_then(|m| m.get(&k))
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, plural, name))?;
        if let Some(expected) = expected_rv {
            if rv_of(&old) != Some(expected) {
                return Err(ApiError::conflict(group, plural, name));
            }
        }
        let obj = old.clone();
        Ok(self.commit(&mut g, key, ns, name, obj, EventType::Deleted, Some(old)))
    }

    /// The one write path: the next global resourceVersion stamped on `obj`, the object
    /// stored (or removed, for `Deleted`: the returned object then carries the deletion's
    /// resourceVersion, trap 1), the change appended to the log and recorded for watchers.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        g: &mut Inner,
        key: &str,
        ns: &str,
        name: &str,
        mut obj: Value,
        event_type: EventType,
        old: Option<Value>,
    ) -> Value {
        g.rv += 1;
        let rv = g.rv;
        set_rv(&mut obj, rv);
        let k = (ns.to_string(), name.to_string());
        if event_type == EventType::Deleted {
            if let Some(m) = g.objects.get_mut(key) {
                m.remove(&k);
            }
            self.append_log(g, key, ns, name, None);
        } else {
            g.objects
                .entry(key.to_string())
                .or_default()
                .insert(k, obj.clone());
            self.append_log(g, key, ns, name, Some(&obj));
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
        self.record(g, ev);
        obj
    }

    /// Subscribes to every future change.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.tx.subscribe()
    }

    /// The changes after `rv` still in the history window plus a subscription to later ones,
    /// taken atomically. `Err(oldest)` when `rv` is older than the window (trap 2).
    pub fn watch_from(&self, rv: u64) -> Result<WatchStart, u64> {
        let g = self.lock();
        let oldest = g.history.front().map(|e| e.rv).unwrap_or(g.rv + 1);
        // Every change after `rv` must still be in the window: the first one kept must be at
        // most rv + 1, unless nothing happened since `rv`.
        if rv < g.rv && oldest > rv + 1 {
            return Err(oldest);
        }
        let backlog = g.history.iter().filter(|e| e.rv > rv).cloned().collect();
        Ok((backlog, self.tx.subscribe()))
    }

    /// A consistent list of one resource plus a subscription to later changes.
    pub fn list_and_subscribe(
        &self,
        key: &str,
        ns: Option<&str>,
    ) -> (Vec<Value>, u64, broadcast::Receiver<Arc<StoreEvent>>) {
        let g = self.lock();
        let items = match g.objects.get(key) {
            None => Vec::new(),
            Some(m) => m
                .iter()
                .filter(|((n, _), _)| ns.map(|ns| ns == n).unwrap_or(true))
                .map(|(_, v)| v.clone())
                .collect(),
        };
        (items, g.rv, self.tx.subscribe())
    }

    /// Writes a snapshot and truncates the log (on shutdown).
    pub fn flush(&self) -> Result<()> {
        let mut g = self.lock();
        self.compact(&mut g)
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
        let s = Store::open(None, 100).expect("store");
        let a = s.create("/configmaps", obj("a")).expect("create");
        let b = s.create("/secrets", obj("b")).expect("create");
        let d = s
            .delete("/configmaps", "default", "a", None)
            .expect("delete");
        let rv = |v: &Value| rv_of(v).expect("rv");
        assert!(
            rv(&a) < rv(&b) && rv(&b) < rv(&d),
            "deleted objects carry the deletion's rv"
        );
    }

    #[test]
    fn trap2_watch_from_too_old_rv_is_expired() {
        let s = Store::open(None, 2).expect("store");
        for i in 0..5 {
            s.create("/configmaps", obj(&format!("c{i}")))
                .expect("create");
        }
        assert!(s.watch_from(1).is_err());
        let now = s.current_rv();
        assert!(s.watch_from(now).is_ok());
        assert!(s.watch_from(now - 1).is_ok());
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
        let s = Store::open(Some(dir.path()), 10).expect("store");
        assert!(s.get("/configmaps", "default", "a").is_some());
        assert!(s.get("/configmaps", "default", "b").is_none());
        assert_eq!(s.current_rv(), 4);
    }
}
