//! eg-ingress: the publish API (`POST /topics/{topic}/api/events`), the management API
//! (`/admin/…`) and the ops endpoints. Fan-out happens here: each accepted event is
//! matched against its topic's subscriptions and stored with one delivery per match in
//! one atomic Redis step, before `200` is answered.

mod admin;
mod app;
mod auth;
mod errors;
mod publish;
mod status;
mod validation;

/// mimalloc instead of the system allocator: allocation was a fifth of the sender's CPU
/// under glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = eg_runtime::startup::start("eg-ingress").await?;
    // Bound first: with no `public_url` set, topic endpoints name the address bound
    // (the port the OS chose, when `listen` asks for port 0).
    let listener = eg_runtime::ops::bind(&process.settings.ingress.listen).await?;
    let app = app::App::build(&process, listener.local_addr()?).await?;
    eg_runtime::startup::spawn_clock_sync(process.store.clone(), process.clock.clone(), process.shutdown.clone());
    eg_runtime::startup::spawn_catalog_refresh(
        app.cache.clone(),
        process.settings.catalog.refresh_interval,
        process.shutdown.clone(),
    );
    let router = app.router(&process);
    eg_runtime::ops::serve_on(listener, router, process.shutdown.clone(), Default::default()).await?;
    tracing::info!("stopped");
    Ok(())
}
