//! Watch streams: newline-delimited events from a resourceVersion or after an initial list,
//! bookmarks, the too-old resourceVersion as an ERROR event (traps 2 and 3).

use super::request::{flag, include_object, output_of, Query, Target};
use super::response::{form_of, partial_metadata};
use super::ServerState;
use crate::accept::Output;
use crate::error::ApiError;
use crate::meta;
use crate::ops::set_gvk;
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{EventType, StoreEvent};
use crate::table::{self, IncludeObject};
use crate::wire::{self, Form};
use axum::body::Body;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use bytes::Bytes;
use futures::SinkExt;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

/// Default watch duration when the client gives no `timeoutSeconds`.
const WATCH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(1800);

struct WatchFilter {
    r: ResourceInfo,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl WatchFilter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
    fn event(&self, ev: &StoreEvent) -> Option<(&'static str, Value)> {
        let ty = self.classify(ev)?;
        let mut obj = (*ev.object).clone();
        set_gvk(&self.r, &mut obj);
        Some((ty, obj))
    }
    /// The event type this watcher sees for `ev`, if any.
    fn classify(&self, ev: &StoreEvent) -> Option<&'static str> {
        if ev.key != self.r.storage_key() {
            return None;
        }
        if let Some(ns) = &self.namespace {
            if &ev.namespace != ns {
                return None;
            }
        }
        let now = self.matches(&ev.object);
        let before = ev
            .old
            .as_ref()
            .map(|object| self.matches(object))
            .unwrap_or(false);
        let ty = match (ev.event_type, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some(ty)
    }
    /// The shared encoding of `ev` when this watcher sends it unchanged (same type, same
    /// apiVersion and kind, not a Table).
    fn shared_line(&self, ev: &StoreEvent, ty: &str) -> Option<Bytes> {
        if ty != ev.event_type.as_str()
            || ev.object.get("apiVersion").and_then(Value::as_str)
                != Some(self.r.api_version().as_str())
            || ev.object.get("kind").and_then(Value::as_str) != Some(self.r.kind.as_str())
        {
            return None;
        }
        Some(
            ev.encoded
                .get_or_init(|| {
                    line(
                        &json!({"type": ty, "object": &*ev.object}),
                        form_of(&self.r),
                    )
                    .unwrap_or_default()
                })
                .clone(),
        )
    }
}

/// One watch line of the event `v` (`{"type", "object"}`), encoded as `form`.
fn line(value: &Value, form: Form) -> Result<Bytes, Infallible> {
    let ty = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let object = value.get("object").unwrap_or(&Value::Null);
    Ok(Bytes::from(wire::watch_line(ty, object, form)))
}

/// What a watch request asks for besides its selectors.
struct WatchOptions {
    timeout: Duration,
    bookmarks: bool,
    send_initial: bool,
    as_table: bool,
    metadata_only: bool,
    include: IncludeObject,
}

impl WatchOptions {
    fn parse(query: &Query, headers: &HeaderMap) -> Result<Self, ApiError> {
        let timeout = match query.get("timeoutSeconds") {
            Some(text) if !text.is_empty() => {
                Duration::from_secs(text.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid timeoutSeconds {text:?}"))
                })?)
            }
            _ => WATCH_TIMEOUT_DEFAULT,
        };
        let bookmarks = flag(query, "allowWatchBookmarks");
        let send_initial = flag(query, "sendInitialEvents");
        let output = output_of(headers)?;
        if output == Output::MetadataList {
            return Err(ApiError::not_acceptable_message(
                "you requested PartialObjectMetadataList, but a watch sends one object per event: ask for PartialObjectMetadata",
            ));
        }
        if send_initial
            && query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan")
        {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        Ok(Self {
            timeout,
            bookmarks,
            send_initial,
            as_table: output == Output::Table,
            metadata_only: output == Output::Metadata,
            include: include_object(query),
        })
    }
}

/// Where a watch starts: the events it sends first, from which resourceVersion, and the
/// store's events after them (or the ERROR of a too-old resourceVersion).
struct WatchStart {
    rv: u64,
    initial: Vec<(&'static str, Value)>,
    expired: Option<Value>,
    rx: Receiver<Arc<StoreEvent>>,
}

/// The start of a watch: without a resourceVersion (or "0", or with `sendInitialEvents`)
/// the current objects as ADDED; else the store's events since that resourceVersion, or
/// Expired when it is older than the store keeps.
fn start(
    st: &ServerState,
    filter: &WatchFilter,
    query: &Query,
    send_initial: bool,
) -> Result<WatchStart, ApiError> {
    let store = &st.cluster.store;
    let rv_param = query.get("resourceVersion").cloned().unwrap_or_default();
    let mut initial: Vec<(&'static str, Value)> = Vec::new();
    if send_initial || rv_param.is_empty() || rv_param == "0" {
        let namespace = filter.namespace.as_deref();
        let (items, rv, rx) = store.list_and_subscribe(&filter.r.storage_key(), namespace);
        for mut object in items.into_iter().filter(|item| filter.matches(item)) {
            set_gvk(&filter.r, &mut object);
            initial.push(("ADDED", object));
        }
        return Ok(WatchStart {
            rv,
            initial,
            expired: None,
            rx,
        });
    }
    let rv: u64 = rv_param
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param:?}")))?;
    let (expired, rx) = match store.watch_from(rv) {
        Ok((backlog, rx)) => {
            initial.extend(backlog.iter().filter_map(|event| filter.event(event)));
            (None, rx)
        }
        Err(oldest) => {
            let error = ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                oldest.saturating_sub(1)
            ));
            let expired = json!({"type": "ERROR", "object": error.to_status()});
            (Some(expired), store.subscribe())
        }
    };
    Ok(WatchStart {
        rv,
        initial,
        expired,
        rx,
    })
}

/// A watch of `t`'s objects matching the selectors: a stream of events from the start the
/// query asks for, until `timeoutSeconds` or shutdown.
pub(super) async fn watch(
    st: &ServerState,
    target: &Target,
    labels: LabelSelector,
    fields: FieldSelector,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let options = WatchOptions::parse(query, headers)?;
    let filter = WatchFilter {
        r: target.r.clone(),
        namespace: target.namespace.clone(),
        labels,
        fields,
    };
    let start = start(st, &filter, query, options.send_initial)?;
    let (tx, body_rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let stream = WatchStream {
        tx,
        form: form_of(&target.r),
        filter,
        options,
        sent_columns: false,
    };
    let (interval, shutdown) = (st.bookmark_interval, st.shutdown.clone());
    tokio::spawn(stream.run(start, interval, shutdown));
    Ok(Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(body_rx))
        .unwrap_or_default())
}

/// One watch's stream of lines to its client.
struct WatchStream {
    tx: futures::channel::mpsc::Sender<Result<Bytes, Infallible>>,
    form: Form,
    filter: WatchFilter,
    options: WatchOptions,
    /// A Table watch sends its column definitions with the first event only.
    sent_columns: bool,
}

/// Whether the client still reads the stream.
type Open = bool;

impl WatchStream {
    /// An event of `ty` for `obj` in the watch's output (Table, metadata or the object).
    fn render(&mut self, ty: &str, obj: Value) -> Value {
        let options = &self.options;
        if options.as_table && ty != "ERROR" {
            let rv = meta::str_at(&obj, "/metadata/resourceVersion").to_string();
            let resource = &self.filter.r;
            let t = table::table(
                resource,
                &[obj],
                &rv,
                None,
                options.include,
                !self.sent_columns,
            );
            self.sent_columns = true;
            json!({"type": ty, "object": t})
        } else if options.metadata_only && ty != "ERROR" {
            json!({"type": ty, "object": partial_metadata(&obj)})
        } else {
            json!({"type": ty, "object": obj})
        }
    }

    /// A BOOKMARK at `rv`; `end` marks the end of the initial events.
    fn bookmark(&self, rv: u64, end: bool) -> Value {
        let resource = &self.filter.r;
        let mut map = json!({"resourceVersion": rv.to_string()});
        if end {
            map["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object =
            json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": map});
        let object = if self.options.metadata_only {
            partial_metadata(&object)
        } else {
            object
        };
        json!({"type": "BOOKMARK", "object": object})
    }

    async fn send(&mut self, line: Result<Bytes, Infallible>) -> Open {
        self.tx.send(line).await.is_ok()
    }

    async fn send_event(&mut self, event: &Value) -> Open {
        let line = line(event, self.form);
        self.send(line).await
    }

    async fn run(
        mut self,
        start: WatchStart,
        interval: Duration,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        if let Some(e) = start.expired {
            let _ = self.send_event(&e).await;
            return;
        }
        let Some(last_rv) = self.send_initial(start.rv, start.initial).await else {
            return;
        };
        self.follow(start.rx, last_rv, interval, shutdown).await;
    }

    /// Sends the initial events (then the initial-events-end BOOKMARK when asked); returns
    /// the last resourceVersion sent, `None` when the client left.
    async fn send_initial(
        &mut self,
        start_rv: u64,
        initial: Vec<(&'static str, Value)>,
    ) -> Option<u64> {
        let mut last_rv = start_rv;
        for (ty, obj) in initial {
            if let Some(rv) = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|text| text.parse::<u64>().ok())
            {
                last_rv = last_rv.max(rv);
            }
            let event = self.render(ty, obj);
            if !self.send_event(&event).await {
                return None;
            }
        }
        let end = self.bookmark(start_rv, true);
        if self.options.send_initial && !self.send_event(&end).await {
            return None;
        }
        Some(last_rv)
    }

    /// Sends the store's events as they come, and bookmarks, until the timeout, shutdown,
    /// the client leaving or falling behind.
    async fn follow(
        &mut self,
        mut rx: Receiver<Arc<StoreEvent>>,
        mut last_rv: u64,
        interval: Duration,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut bookmarked = last_rv;
        let deadline = tokio::time::sleep(self.options.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        let bookmarks = self.options.bookmarks && !self.options.as_table;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        last_rv = ev.rv;
                        if let Some(ty) = self.filter.classify(&ev) {
                            if !self.send_store_event(&ev, ty).await {
                                return;
                            }
                            bookmarked = last_rv;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let error = ApiError::expired(format!("too old resource version: {last_rv}: the watcher fell behind"));
                        let _ = self.send_event(&json!({"type": "ERROR", "object": error.to_status()})).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    if last_rv > bookmarked {
                        let bookmark = self.bookmark(last_rv, false);
                        if !self.send_event(&bookmark).await {
                            return;
                        }
                        bookmarked = last_rv;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Sends a store event this watcher sees as `ty`: its shared encoding when the watcher
    /// sends it unchanged, else rendered for this watcher.
    async fn send_store_event(&mut self, ev: &StoreEvent, ty: &'static str) -> Open {
        let options = &self.options;
        let plain = !options.as_table && !options.metadata_only;
        let out = match self.filter.shared_line(ev, ty).filter(|_| plain) {
            Some(bytes) => Ok(bytes),
            None => {
                let mut obj = (*ev.object).clone();
                set_gvk(&self.filter.r, &mut obj);
                let event = self.render(ty, obj);
                line(&event, self.form)
            }
        };
        self.send(out).await
    }
}
