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
    answer(counter.read().await)
}

async fn increment(State(counter): State<Arc<Counter>>) -> Response {
    answer(counter.increment().await)
}
