//! The live status page and the operator's actions from it. `GET /status` (HTML),
//! `GET /status/live` (its refreshing sections, fetched by the page every 2 s), a page
//! per subscription and per event's history, the actions (`POST /status/…`: pause,
//! resume, validate again, redrive), and `GET /admin/status` (the overview as JSON, for
//! `egctl status`). See docs/status-page.md.
//!
//! Access takes the admin token, as the management API does; with no token configured
//! these routes do not exist. The pages accept `Authorization: Bearer <token>`, or a
//! sign-in: `?token=…` on any page's address checks the token, sets an `HttpOnly`,
//! `SameSite=Strict` cookie scoped to `/status` and redirects to the same page without
//! it, so the token leaves the address bar ([`Viewer`]). The cookie holds a hash of the
//! token, not the token: it opens these pages and nothing else, and stops working when
//! the token changes. Actions are also guarded against cross-site requests (`session`).
//! `/admin/status` takes the bearer token only.
//!
//! Routes here do their own authentication and answer HTML, so they are merged outside
//! the layer that turns error answers into Event Grid's JSON body.

mod dead_letter;
mod gather;
mod hour;
mod html;
mod identities;
mod limits;
mod model;
mod overview;
mod pages;
mod session;
mod subscription;
mod tiers;

pub use dead_letter::{DeadLetterTarget, destination_body};
pub use model::queues_figures;

use crate::errors::Refusal;
use crate::operations;
use crate::state::App;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use eg_runtime::startup::Process;
use eg_runtime::stats::Stats;
use hour::LastHour;
use html::{counted, noun};
use session::{
    Access, ActionRefused, COOKIE, FORM_TOKEN_FIELD, Flash, SignIn, access, equal, form_token, session_value,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Most dead letters one redrive from the page sends back (the API's default chunk).
const REDRIVE_CHUNK: u64 = 1_000;

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
        .route("/status/topics/{topic}/subscriptions/{name}", get(subscription_page))
        .route(
            "/status/topics/{topic}/subscriptions/{name}/redrive",
            get(confirm_redrive).post(act_redrive),
        )
        .route("/status/topics/{topic}/subscriptions/{name}/pause", post(act_pause))
        .route("/status/topics/{topic}/subscriptions/{name}/resume", post(act_resume))
        .route(
            "/status/topics/{topic}/subscriptions/{name}/validate",
            post(act_validate),
        )
        .route("/status/topics/{topic}/subscriptions/{name}/replay", post(act_replay))
        .route(
            "/status/topics/{topic}/subscriptions/{name}/replays/{id}/cancel",
            post(act_cancel_replay),
        )
        .route("/status/topics/{topic}/events", get(find_event))
        .route("/status/topics/{topic}/events/{event_id}", get(event_page))
        .route("/admin/status", get(admin_status))
        .with_state(state)
}

fn token(state: &StatusState) -> &str {
    state.app.admin_token.as_deref().unwrap_or_default()
}

fn secure(state: &StatusState) -> bool {
    state.app.public_url.starts_with("https://")
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
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(policy) = HeaderValue::from_str(&html::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// A page that shows the flash the request carried, and clears it.
fn with_flash_shown(mut response: Response, shown: Option<&Flash>) -> Response {
    if shown.is_some() {
        response.headers_mut().append(header::SET_COOKIE, Flash::clear_cookie());
    }
    response
}

/// `303` to `to`, carrying `flash` to it.
fn redirect(to: &str, flash: &Flash, secure: bool) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_owned())]).into_response();
    if let Some(cookie) = flash.set_cookie(secure) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The sign-in page (`401`), whose form leads back to the page asked for.
fn sign_in_page(sign_in: &SignIn, wrong_token: bool) -> Response {
    let mut response = html(StatusCode::UNAUTHORIZED, overview::sign_in(sign_in, wrong_token));
    let headers = response.headers_mut();
    headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    // Its address may hold a (wrong) token: send it nowhere.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// A right token presented: `303` to the page asked for, without the token, setting the
/// session cookie.
fn signed_in(state: &StatusState, sign_in: &SignIn) -> Response {
    let cookie = format!(
        "{COOKIE}={}; Path=/status; HttpOnly; SameSite=Strict{}",
        session_value(token(state)),
        session::secure_attribute(secure(state))
    );
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, sign_in.back_to())]).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// Someone allowed to see a status page: signed in by the bearer token or the session
/// cookie. Taking it answers for the handler when the request is no viewer's: a sign-in
/// (`?token=`) is redirected to the same page without the token, with the cookie set, or
/// shown the sign-in page when the token is wrong; a request without access gets the
/// sign-in page, whose form leads back to the page asked for.
struct Viewer;

impl FromRequestParts<Arc<StatusState>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<StatusState>) -> Result<Self, Response> {
        let sign_in = SignIn::of(parts.uri.path(), parts.uri.query());
        let token = token(state);
        match &sign_in.presented {
            Some(presented) if equal(presented, token) => Err(signed_in(state, &sign_in)),
            Some(_) => Err(sign_in_page(&sign_in, true)),
            None if access(token, &parts.headers, true) == Access::Denied => Err(sign_in_page(&sign_in, false)),
            None => Ok(Viewer),
        }
    }
}

/// What a refusal tells its client, read from the answer it makes (Event Grid's error
/// body), so the page says exactly what the management API would.
async fn told(refusal: Refusal) -> (StatusCode, String) {
    let response = refusal.into_response();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| status.to_string());
    (status, message)
}

/// The page for a refusal (not found, unavailable, bad input), with its status.
async fn refusal_page(refusal: Refusal, back: Option<&str>) -> Response {
    let (status, message) = told(refusal).await;
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::BAD_REQUEST => "Not understood",
        _ => "Cannot show this now",
    };
    html(status, pages::problem(title, &message, back))
}

/// `GET /status`: the overview.
async fn page(_: Viewer, State(state): State<Arc<StatusState>>, headers: HeaderMap) -> Response {
    let status = gather::gather(&state.app, &state.stats, &state.last_hour).await;
    let shown = Flash::read(&headers);
    with_flash_shown(
        html(StatusCode::OK, overview::page(&status, shown.as_ref())),
        shown.as_ref(),
    )
}

/// `GET /status/live`: the page's sections, fresh.
async fn live(State(state): State<Arc<StatusState>>, headers: HeaderMap) -> Response {
    if access(token(&state), &headers, true) == Access::Denied {
        return html(StatusCode::UNAUTHORIZED, overview::signed_out());
    }
    let status = gather::gather(&state.app, &state.stats, &state.last_hour).await;
    html(StatusCode::OK, overview::live(&status))
}

/// `GET /status/topics/{topic}/subscriptions/{name}`
async fn subscription_page(
    _: Viewer,
    State(state): State<Arc<StatusState>>,
    Path((topic, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match subscription::gather(&state.app, &state.stats, &state.last_hour, &topic, &name).await {
        Ok(page) => {
            let shown = Flash::read(&headers);
            let body = pages::subscription(&page, &form_token(token(&state)), shown.as_ref());
            with_flash_shown(html(StatusCode::OK, body), shown.as_ref())
        }
        Err(refusal) => refusal_page(refusal, None).await,
    }
}

/// `GET …/subscriptions/{name}/redrive`: what a redrive would do, and the button.
async fn confirm_redrive(
    _: Viewer,
    State(state): State<Arc<StatusState>>,
    Path((topic, name)): Path<(String, String)>,
) -> Response {
    match subscription::gather(&state.app, &state.stats, &state.last_hour, &topic, &name).await {
        Ok(page) if page.status.dead_letters_not_redriven == 0 => redirect(
            &html::subscription_path(&page.topic, &page.status.name),
            &Flash::ok("No dead letters are waiting to be redriven."),
            secure(&state),
        ),
        Ok(page) => {
            let body = pages::confirm_redrive(&page.topic, &page, &form_token(token(&state)), REDRIVE_CHUNK);
            html(StatusCode::OK, body)
        }
        Err(refusal) => refusal_page(refusal, None).await,
    }
}

/// `GET /status/topics/{topic}/events?id=…[&subscription=…]`: the event lookup form.
async fn find_event(_: Viewer, Path(topic): Path<String>, Query(query): Query<HashMap<String, String>>) -> Response {
    let id = query.get("id").map(|id| id.trim()).unwrap_or_default();
    if id.is_empty() {
        return refusal_page(Refusal::bad_request("id: give the id of the event to look up"), None).await;
    }
    let subscription = query.get("subscription").map(String::as_str).filter(|s| !s.is_empty());
    let to = pages::event_path(&topic, id, subscription);
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

/// `GET /status/topics/{topic}/events/{id}[?subscription=…]`: an event's history.
async fn event_page(
    _: Viewer,
    State(state): State<Arc<StatusState>>,
    Path((topic, event_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let subscription = query.get("subscription").map(String::as_str);
    match subscription::event(&state.app, &topic, &event_id, subscription).await {
        Ok(page) => html(StatusCode::OK, pages::event(&page)),
        Err(refusal) => refusal_page(refusal, None).await,
    }
}

/// An action request that passed the checks, with where it leads back to.
struct Action {
    topic: String,
    name: String,
    back: String,
}

/// Checks an action request (`session::check_action`); the refusal page otherwise.
fn checked(
    state: &StatusState,
    headers: &HeaderMap,
    body: &Bytes,
    topic: String,
    name: String,
) -> Result<Action, Box<Response>> {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body).into_owned().collect();
    let back = html::subscription_path(&topic, &name);
    match session::check_action(token(state), headers, form.get(FORM_TOKEN_FIELD).map(String::as_str)) {
        Ok(()) => Ok(Action { topic, name, back }),
        Err(refused) => {
            let status = match refused {
                ActionRefused::SignedOut => StatusCode::UNAUTHORIZED,
                ActionRefused::CrossSite | ActionRefused::NoFormToken => StatusCode::FORBIDDEN,
            };
            Err(Box::new(html(
                status,
                pages::problem("Not done", refused.message(), Some(&back)),
            )))
        }
    }
}

fn who(a: &Action) -> String {
    format!("{} / {}", a.topic, a.name)
}

/// Runs an action that passed the checks and leads back to the subscription's page with
/// its result shown once; a request that did not pass gets the refusal page.
async fn act<Run, Done>(
    state: Arc<StatusState>,
    headers: &HeaderMap,
    body: &Bytes,
    (topic, name): (String, String),
    run: Run,
) -> Response
where
    Run: FnOnce(Arc<StatusState>, Action) -> Done,
    Done: Future<Output = Flash>,
{
    let action = match checked(&state, headers, body, topic, name) {
        Ok(action) => action,
        Err(refused) => return *refused,
    };
    let back = action.back.clone();
    let flash = run(state.clone(), action).await;
    redirect(&back, &flash, secure(&state))
}

/// `POST …/subscriptions/{name}/pause`
async fn act_pause(
    State(state): State<Arc<StatusState>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(state, &headers, &body, path, |state, a| async move {
        match operations::pause(&state.app, &a.topic, &a.name).await {
            Ok(_) => Flash::ok(format!(
                "Paused {}: its events wait, and are delivered when you resume it.",
                who(&a)
            )),
            Err(refusal) => Flash::failed(format!("Not paused: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// `POST …/subscriptions/{name}/resume`
async fn act_resume(
    State(state): State<Arc<StatusState>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(state, &headers, &body, path, |state, a| async move {
        match operations::resume(&state.app, &a.topic, &a.name).await {
            Ok((_, moved)) => Flash::ok(format!(
                "Resumed {}: {} handed back to the senders.",
                who(&a),
                counted(moved, "waiting delivery", "waiting deliveries")
            )),
            Err(refusal) => Flash::failed(format!("Not resumed: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// `POST …/subscriptions/{name}/validate`
async fn act_validate(
    State(state): State<Arc<StatusState>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(state, &headers, &body, path, |state, a| async move {
        let now = state.app.clock.now();
        match operations::revalidate(&state.app, &a.topic, &a.name).await {
            Ok(sub) => match sub.provisioning.message(now) {
                None => Flash::ok(format!(
                    "{} is Succeeded: its endpoint consented, and events published from now on are delivered to it.",
                    who(&a)
                )),
                Some(why) => Flash::failed(format!(
                    "{} is still {}: {why}",
                    who(&a),
                    sub.provisioning.state_at(now).as_str()
                )),
            },
            Err(refusal) => Flash::failed(format!("Validation failed: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// `POST …/subscriptions/{name}/redrive`: the confirmed redrive.
async fn act_redrive(
    State(state): State<Arc<StatusState>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(state, &headers, &body, path, |state, a| async move {
        let redriven = async {
            let sub = crate::changes::find_subscription(&state.app, &a.topic, &a.name).await?;
            operations::redrive(&state.app, &sub, &operations::everything(), REDRIVE_CHUNK).await
        };
        match redriven.await {
            Ok(progress) if progress.remaining > 0 => Flash::ok(format!(
                "Redrove {} of {}; {} still waiting: redrive again for the next ones.",
                counted(progress.done, "dead letter", "dead letters"),
                who(&a),
                counted(progress.remaining, "is", "are")
            )),
            Ok(progress) => Flash::ok(format!(
                "Redrove {} of {}: {} back in delivery with fresh attempts.",
                counted(progress.done, "dead letter", "dead letters"),
                who(&a),
                noun(progress.done, "it is", "they are")
            )),
            Err(refusal) => Flash::failed(format!("Not redriven: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// `POST …/subscriptions/{name}/replay`: starts a replay from the page's form (`from`,
/// `to`, `eventType`, `maxEventsPerSecond`; empty ones left out).
async fn act_replay(
    State(state): State<Arc<StatusState>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    act(state, &headers, &body, path, |state, a| async move {
        let request = match replay_request(&form) {
            Ok(request) => request,
            Err(problem) => return Flash::failed(format!("Not started: {problem}")),
        };
        match operations::start_replay(&state.app, &a.topic, &a.name, &request).await {
            Ok(job) => Flash::ok(format!(
                "Replay {} of {} started: {} to {}. Its progress shows below; reload to follow it.",
                job.id,
                who(&a),
                job.spec.from.to_rfc3339(),
                job.spec.to.to_rfc3339()
            )),
            Err(refusal) => Flash::failed(format!("Not started: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// The replay request of the page's form, as the management API takes it.
fn replay_request(form: &HashMap<String, String>) -> Result<serde_json::Value, String> {
    let field = |name: &str| form.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut request = serde_json::json!({});
    for name in ["from", "to"] {
        if let Some(at) = field(name) {
            request[name] = serde_json::json!(at);
        }
    }
    if let Some(event_type) = field("eventType") {
        request["filter"] = serde_json::json!({"includedEventTypes": [event_type]});
    }
    if let Some(rate) = field("maxEventsPerSecond") {
        let rate: u64 = rate
            .parse()
            .map_err(|_| format!("events/s: {rate:?} is not a whole number"))?;
        request["maxEventsPerSecond"] = serde_json::json!(rate);
    }
    Ok(request)
}

/// `POST …/subscriptions/{name}/replays/{id}/cancel`
async fn act_cancel_replay(
    State(state): State<Arc<StatusState>>,
    Path((topic, name, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(state, &headers, &body, (topic, name), |state, a| async move {
        match operations::cancel_replay(&state.app, &a.topic, &a.name, &id).await {
            Ok(job) => Flash::ok(format!(
                "Replay {id} of {} is {} after {}; what it enqueued stays enqueued.",
                who(&a),
                job.state.as_str(),
                counted(job.replayed, "event replayed", "events replayed")
            )),
            Err(refusal) => Flash::failed(format!("Not cancelled: {}", told(refusal).await.1)),
        }
    })
    .await
}

/// `GET /admin/status`: the status as JSON, for the admin token (bearer) only.
pub async fn admin_status(State(state): State<Arc<StatusState>>, headers: HeaderMap) -> Response {
    if access(token(&state), &headers, false) == Access::Denied {
        return Refusal::unauthorized("missing or wrong bearer token").into_response();
    }
    let status = gather::gather(&state.app, &state.stats, &state.last_hour).await;
    let mut response = Json(status).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
