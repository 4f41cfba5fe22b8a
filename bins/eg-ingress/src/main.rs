//! eg-ingress: the publish API (`POST /topics/{topic}/api/events`, and Event Grid's
//! namespace data plane, `POST /topics/{topic}:publish`), the management API
//! (`/admin/…`) and the ops endpoints. Fan-out happens here: each accepted event is
//! matched against its topic's subscriptions and stored with one delivery per match in
//! one atomic Redis step, before `200` is answered.

mod admin;
mod auth;
mod capabilities;
mod changes;
mod errors;
mod namespace;
mod operations;
mod publish;
mod pull;
mod routes;
mod state;
mod status;
mod validation;

use eg_runtime::Startup;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-ingress", |s| s.ingress.listen.clone())
        .serving_own_router()
        .start()
        .await?;
    // With no `public_url` set, topic endpoints name the address bound (the port the OS
    // chose, when `listen` asks for port 0).
    let app = state::App::build(&process, process.address).await?;
    process.keep_catalog_fresh(app.cache.clone());
    let pull = pull::Pull::start_for(&process, app.cache.clone()).await?;
    let router = routes::router(&app, &pull, &process);
    process.serve(router).await
}
