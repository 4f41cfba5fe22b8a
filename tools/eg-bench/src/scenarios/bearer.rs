//! `bearer`: what a bearer token on webhook delivery costs (docs/oauth-delivery.md).
//! End-to-end deliveries/s to a webhook without a token, then to the same webhook with
//! `deliveryIdentity` and `tokenAudience`, the token got from a real OAuth 2.0 provider
//! (`eg_testkit::OAuthServer`, oauth2-mock-server) and cached: after the first delivery
//! a token is one header and a cache look-up, so the target is near-equal (≥ 95 %).

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::{Target, thousands};
use eg_testkit::OAuthServer;
use eg_testkit::oauth_server::{CLIENT_ID, CLIENT_SECRET};
use serde_json::json;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "bearer",
    summary: "webhook deliveries/s with a cached bearer token against without one",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench bearer: end-to-end deliveries/s to a webhook without a token, then with a bearer
token from an OAuth 2.0 provider (oauth2-mock-server from target/test-tools, see
deploy/local/ensure-test-tools.sh), cached for the whole window.

usage: eg-bench bearer [options]

  --duration D           each measured window (default 15s; quick 4s)
  --rounds N             rounds of the two setups, alternating (default 3; quick 1)

";

async fn measure_with(ctx: &Ctx, idp: Option<&OAuthServer>, duration: Duration) -> anyhow::Result<Measured> {
    let mut setup = Setup::new(Fsync::EverySec);
    if let Some(idp) = idp {
        setup.env.push(("EG__IDENTITIES__BENCH__TOKEN_URL", idp.token_url()));
        setup
            .env
            .push(("EG__IDENTITIES__BENCH__CLIENT_ID", CLIENT_ID.to_owned()));
        setup
            .env
            .push(("EG__IDENTITIES__BENCH__CLIENT_SECRET", CLIENT_SECRET.to_owned()));
        setup.webhook_properties = Some(json!({
            "deliveryIdentity": "bench",
            "tokenAudience": "https://receiver.bench",
        }));
    }
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let load = Load::end_to_end(ctx, 4, 2_000, duration);
    let m = measure::steady(&d, &load).await?;
    d.finish(ctx.keep);
    Ok(m)
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let load = Load::end_to_end(ctx, 4, 2_000, duration);
        // Tokens live an hour: one request for the whole window.
        let idp = OAuthServer::start(Duration::from_secs(3600));
        let ctx = &*ctx;
        let runs = compare::alternating(rounds, &["without a token", "with a bearer token"], |i| {
            measure_with(ctx, (i == 1).then_some(&idp), duration)
        })
        .await?;
        let open = compare::summarise(&runs[0])?;
        let with_token = compare::summarise(&runs[1])?;
        let share = with_token.rate / open.rate.max(1.0);
        let mut row = measure::row(
            "bearer cost",
            format!("deliveryIdentity (client secret, token cached), 1 sender, median of {rounds}"),
            with_token.typical,
            &load,
            "deliveries/s",
        );
        row.rate = Some((with_token.rate, "deliveries/s"));
        row.figures.push((
            "without a token".into(),
            format!("{} deliveries/s (median; runs {})", thousands(open.rate), open.each),
        ));
        row.figures
            .push(("with a token, runs".into(), format!("{} deliveries/s", with_token.each)));
        row.figures.push((
            "sender CPU per delivery".into(),
            format!(
                "{:.0} µs with a token, {:.0} µs without (medians)",
                with_token.sender_micros, open.sender_micros
            ),
        ));
        row.targets
            .push(Target::at_least("share of without a token", share * 100.0, 95.0, "%"));
        eprintln!("bearer: {:.1} % of without a token", share * 100.0);
        Ok(vec![row])
    })
}
