//! `GET`/`POST /api/counter` and `/healthz`.

use std::sync::Arc;

use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use serde::Serialize;

use crate::app::{Counter, CounterView};

/// Path of the counter.
pub(crate) const PATH_COUNTER: &str = "/api/counter";

/// The response header naming the server-side id of the connection that answered (MySQL's
/// `CONNECTION_ID()`), absent when none is held: whether a `hold` counter still talks over the
/// socket it opened (docs/design/requirements.md R000.20) or was disconnected and reconnected
/// shows here, not in the body, which stays the `{"value","dbHost","readOnly"}` of
/// docs/design/requirements.md R001.2.
pub const HEADER_CONNECTION_ID: &str = "x-counter-connection-id";

#[derive(Debug, Serialize)]
struct ErrorBody {
    error: String,
    code: Option<u16>,
}

pub(crate) fn router(counter: Arc<Counter>) -> Router {
    Router::new()
        .route(PATH_COUNTER, get(read).post(increment))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(counter)
}

fn answer(result: crate::Result<CounterView>) -> Response {
    match result {
        Ok(view) => Json(view).into_response(),
        Err(error) => {
            let code = error.server_code();
            tracing::warn!(%error, code, "counter request failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(ErrorBody {
                    error: error.to_string(),
                    code,
                }),
            )
                .into_response()
        }
    }
}

async fn read(State(counter): State<Arc<Counter>>) -> Response {
    let result = counter.read().await;
    with_connection_id(answer(result), counter.connection_id().await)
}

async fn increment(State(counter): State<Arc<Counter>>) -> Response {
    let result = counter.increment().await;
    with_connection_id(answer(result), counter.connection_id().await)
}

/// Adds [`HEADER_CONNECTION_ID`] when a connection is held (a refused write keeps it).
fn with_connection_id(mut response: Response, connection_id: Option<u32>) -> Response {
    if let Some(id) = connection_id {
        response
            .headers_mut()
            .insert(HEADER_CONNECTION_ID, axum::http::HeaderValue::from(id));
    }
    response
}
