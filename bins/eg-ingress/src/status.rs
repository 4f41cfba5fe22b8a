//! The live status page: `GET /status` (HTML), `GET /status/live` (its refreshing
//! sections, fetched by the page every 2 s) and `GET /admin/status` (the same data as
//! JSON, for `egctl status`). See docs/status-page.md.
//!
//! Access takes the admin token, as the management API does; with no token configured
//! these routes do not exist. The page accepts `Authorization: Bearer <token>`, or a
//! sign-in: `GET /status?token=…` checks the token, sets an `HttpOnly`, `SameSite=Strict`
//! cookie scoped to `/status` and redirects to `/status`, so the token leaves the
//! address bar. The cookie holds a hash of the token, not the token: it opens this page
//! and nothing else, and stops working when the token changes. `/admin/status` takes
//! the bearer token only.
//!
//! Routes here do their own authentication and answer HTML, so they are merged outside
//! the layer that turns error answers into Event Grid's JSON body.

mod hour;
mod html;
mod model;
pub(crate) mod operations;

use crate::errors::Refusal;
use crate::state::App;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use eg_runtime::startup::Process;
use eg_runtime::stats::Stats;
use hour::LastHour;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Name of the sign-in cookie.
const COOKIE: &str = "eg_status";

pub struct StatusState {
    app: Arc<App>,
    stats: Stats,
    last_hour: LastHour,
}

/// The status routes, or none when no admin token is configured.
pub fn router(app: Arc<App>, process: &Process) -> Router {
    if app.admin_token.is_none() {
        return Router::new();
    }
    let state = Arc::new(StatusState {
        app,
        stats: process.stats.clone(),
        last_hour: LastHour::default(),
    });
    Router::new()
        .route("/status", get(page))
        .route("/status/live", get(live))
        .route("/admin/status", get(admin_status))
        .with_state(state)
}

/// What a request presented.
#[derive(Debug, PartialEq, Eq)]
enum Access {
    Granted,
    Denied,
}

fn equal(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The cookie value for `token`: a hash, so the cookie is no admin token.
fn session_value(token: &str) -> String {
    let digest = Sha256::digest(format!("eg status page session\n{token}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn access(token: &str, headers: &HeaderMap, allow_cookie: bool) -> Access {
    let by_bearer = bearer(headers).is_some_and(|presented| equal(presented, token));
    let by_cookie = allow_cookie && cookie(headers, COOKIE).is_some_and(|v| equal(v, &session_value(token)));
    if by_bearer || by_cookie {
        Access::Granted
    } else {
        Access::Denied
    }
}

fn token(state: &StatusState) -> &str {
    state.app.admin_token.as_deref().unwrap_or_default()
}

/// An HTML answer that is never cached and runs only its own inline style and script.
fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(policy) = HeaderValue::from_str(&html::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

fn sign_in_page(wrong_token: bool) -> Response {
    let mut response = html(StatusCode::UNAUTHORIZED, html::sign_in(wrong_token));
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// `GET /status`: the page, a sign-in (`?token=`), or the sign-in page (`401`).
async fn page(
    State(state): State<Arc<StatusState>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let token = token(&state);
    if let Some(presented) = query.get("token") {
        if !equal(presented, token) {
            return sign_in_page(true);
        }
        let secure = if state.app.public_url.starts_with("https://") {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{COOKIE}={}; Path=/status; HttpOnly; SameSite=Strict{secure}",
            session_value(token)
        );
        let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/status")]).into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        response
            .headers_mut()
            .insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        return response;
    }
    if access(token, &headers, true) == Access::Denied {
        return sign_in_page(false);
    }
    let status = model::gather(&state.app, &state.stats, &state.last_hour).await;
    html(StatusCode::OK, html::page(&status))
}

/// `GET /status/live`: the page's sections, fresh.
async fn live(State(state): State<Arc<StatusState>>, headers: HeaderMap) -> Response {
    if access(token(&state), &headers, true) == Access::Denied {
        return html(
            StatusCode::UNAUTHORIZED,
            "<p>Signed out: open /status to sign in again.</p>".into(),
        );
    }
    let status = model::gather(&state.app, &state.stats, &state.last_hour).await;
    html(StatusCode::OK, html::live(&status))
}

/// `GET /admin/status`: the status as JSON, for the admin token (bearer) only.
pub async fn admin_status(State(state): State<Arc<StatusState>>, headers: HeaderMap) -> Response {
    if access(token(&state), &headers, false) == Access::Denied {
        return Refusal::unauthorized("missing or wrong bearer token").into_response();
    }
    let status = model::gather(&state.app, &state.stats, &state.last_hour).await;
    let mut response = Json(status).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                name,
                HeaderValue::from_str(value).unwrap_or(HeaderValue::from_static("")),
            );
        }
        map
    }

    #[test]
    fn bearer_or_cookie_grants_access() {
        let t = "tok";
        let session = session_value(t);
        assert_eq!(
            access(t, &headers(&[(header::AUTHORIZATION, "Bearer tok")]), false),
            Access::Granted
        );
        assert_eq!(
            access(t, &headers(&[(header::AUTHORIZATION, "Bearer nope")]), true),
            Access::Denied
        );
        let with_cookie = headers(&[(header::COOKIE, &format!("other=1; {COOKIE}={session}; x=y"))]);
        assert_eq!(access(t, &with_cookie, true), Access::Granted);
        // The JSON endpoint takes the bearer token only.
        assert_eq!(access(t, &with_cookie, false), Access::Denied);
        // The cookie is not the token, and the token is not a cookie.
        assert_ne!(session, t);
        let token_as_cookie = headers(&[(header::COOKIE, &format!("{COOKIE}={t}"))]);
        assert_eq!(access(t, &token_as_cookie, true), Access::Denied);
        assert_eq!(access(t, &HeaderMap::new(), true), Access::Denied);
        // A changed token ends every session.
        assert_eq!(access("new", &with_cookie, true), Access::Denied);
    }
}
