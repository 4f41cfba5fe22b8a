//! OAuth 2.0 client credentials as policy (docs/oauth-delivery.md): what eg asks an
//! identity provider for a delivery token, how its answer is read, and when a cached
//! token is renewed. The sender does the HTTP; every decision is here, so it is tested
//! without a server and every tier shares it.
//!
//! A token and a client secret are secrets: the types holding them print `***`.

use crate::time::UnixMillis;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// What a token is asked for: an OAuth 2.0 `scope` (Entra ID: `<application>/.default`),
/// an `audience` (Auth0, Okta and others take one), or both.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TokenTarget {
    pub scope: Option<String>,
    pub audience: Option<String>,
}

impl TokenTarget {
    /// The scope Entra ID gives an application's token for: its application id or URI
    /// with `/.default` (every permission granted to the caller), as Event Grid asks.
    pub fn entra_application(application: &str) -> Self {
        Self {
            scope: Some(format!("{}/.default", application.trim_end_matches('/'))),
            audience: None,
        }
    }

    /// Neither a scope nor an audience.
    pub fn is_empty(&self) -> bool {
        self.scope.is_none() && self.audience.is_none()
    }

    /// What names it in logs, metrics and problems (scopes and audiences are not secret).
    pub fn label(&self) -> String {
        match (&self.scope, &self.audience) {
            (Some(s), Some(a)) => format!("{s} {a}"),
            (Some(s), None) => s.clone(),
            (None, Some(a)) => a.clone(),
            (None, None) => String::new(),
        }
    }
}

/// What the management API may know about a configured identity: never its secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdentityFacts {
    /// Whether its settings give a default scope or audience, so a subscription naming
    /// it may leave both out.
    pub has_default_target: bool,
}

/// How the client proves who it is in a token request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ClientProof<'a> {
    /// The client secret, in the body (`client_secret_post`, which Entra ID and every
    /// provider eg was tried with take).
    Secret(&'a str),
    /// A JWT signed with the client's certificate key (`private_key_jwt`, RFC 7523), made
    /// fresh for this request from [`assertion_claims`].
    Assertion(&'a str),
}

impl fmt::Debug for ClientProof<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(_) => f.write_str("Secret(***)"),
            Self::Assertion(_) => f.write_str("Assertion(***)"),
        }
    }
}

/// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The form of a client-credentials token request (RFC 6749 §4.4), the client proving
/// itself with `proof`.
pub fn token_form(client_id: &str, proof: ClientProof<'_>, target: &TokenTarget) -> Vec<(&'static str, String)> {
    let mut form = vec![
        ("grant_type", "client_credentials".to_owned()),
        ("client_id", client_id.to_owned()),
    ];
    match proof {
        ClientProof::Secret(secret) => form.push(("client_secret", secret.to_owned())),
        ClientProof::Assertion(jwt) => {
            form.push(("client_assertion_type", CLIENT_ASSERTION_TYPE.to_owned()));
            form.push(("client_assertion", jwt.to_owned()));
        }
    }
    if let Some(scope) = &target.scope {
        form.push(("scope", scope.clone()));
    }
    if let Some(audience) = &target.audience {
        form.push(("audience", audience.clone()));
    }
    form
}

/// How long a client assertion is valid: one request's worth, with room for clocks that
/// disagree a little. A leaked assertion is of no use for long.
pub const ASSERTION_LIFETIME: Duration = Duration::from_secs(300);

/// The claims of a client assertion, as Entra ID documents them for certificate
/// credentials: the token endpoint as `aud`, the client as `iss` and `sub`, a unique
/// `jti` (providers refuse one seen before), and a short life.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AssertionClaims {
    pub aud: String,
    pub iss: String,
    pub sub: String,
    pub jti: String,
    /// Seconds since the epoch.
    pub nbf: i64,
    pub iat: i64,
    pub exp: i64,
}

/// The claims of the assertion `client_id` sends to `token_url` at `now`; `jti` is the
/// caller's random draw.
pub fn assertion_claims(client_id: &str, token_url: &str, now: UnixMillis, jti: String) -> AssertionClaims {
    let seconds = now.0.div_euclid(1000);
    let lifetime = i64::try_from(ASSERTION_LIFETIME.as_secs()).unwrap_or(300);
    AssertionClaims {
        aud: token_url.to_owned(),
        iss: client_id.to_owned(),
        sub: client_id.to_owned(),
        jti,
        nbf: seconds,
        iat: seconds,
        exp: seconds.saturating_add(lifetime),
    }
}

/// An access token: sent as `Authorization: Bearer …`, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    /// The token itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A token an identity provider issued, and for how long it said it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token: AccessToken,
    pub lifetime: Duration,
}

/// Why no token came: said to operators (the status page, history), so only the
/// provider's `error` and `error_description` are kept, cut short; never the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenRefusal(pub String);

/// Longest refusal text kept.
const REFUSAL_CHARS: usize = 200;

/// The lifetime assumed when a provider leaves out `expires_in` (RFC 6749 makes it
/// optional): short, so a token is not held past what the provider meant.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// Reads a token endpoint's answer: `access_token` and `expires_in` from a 200 with a
/// `Bearer` (or absent) `token_type`; anything else is a [`TokenRefusal`] saying what.
pub fn parse_token_response(status: u16, body: &[u8]) -> Result<IssuedToken, TokenRefusal> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if status != 200 {
        let said = json.as_ref().map(provider_error).unwrap_or_default();
        return Err(TokenRefusal(cut(&if said.is_empty() {
            format!("the token endpoint answered {status}")
        } else {
            format!("the token endpoint answered {status}: {said}")
        })));
    }
    let Some(json) = json else {
        return Err(TokenRefusal(
            "the token endpoint answered 200 without a JSON body".into(),
        ));
    };
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| TokenRefusal("the token endpoint's answer has no access_token".into()))?;
    match json.get("token_type").and_then(Value::as_str) {
        None => {}
        Some(kind) if kind.eq_ignore_ascii_case("bearer") => {}
        Some(kind) => {
            return Err(TokenRefusal(cut(&format!(
                "the token endpoint issued a {kind:?} token; eg sends bearer tokens only"
            ))));
        }
    }
    // Entra ID's v1 endpoint writes `expires_in` as a string.
    let lifetime = match json.get("expires_in") {
        Some(Value::Number(n)) => n.as_u64().map(Duration::from_secs),
        Some(Value::String(s)) => s.parse().ok().map(Duration::from_secs),
        _ => None,
    }
    .unwrap_or(DEFAULT_LIFETIME);
    Ok(IssuedToken {
        token: AccessToken(token.to_owned()),
        lifetime,
    })
}

/// `error: error_description` of an RFC 6749 §5.2 error answer, when it has them.
fn provider_error(json: &Value) -> String {
    let field = |name| json.get(name).and_then(Value::as_str).unwrap_or_default().trim();
    match (field("error"), field("error_description")) {
        ("", "") => String::new(),
        (error, "") => error.to_owned(),
        ("", description) => description.to_owned(),
        (error, description) => format!("{error}: {description}"),
    }
}

fn cut(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(REFUSAL_CHARS)
        .collect()
}

/// When a token issued at `issued` for `lifetime` is renewed: `before` its end, but never
/// before half its life is gone (a provider issuing 2-minute tokens with a 5-minute
/// `before` would otherwise be asked on every delivery).
pub fn refresh_at(issued: UnixMillis, lifetime: Duration, before: Duration) -> UnixMillis {
    issued.plus(lifetime.saturating_sub(before).max(lifetime / 2))
}

/// How long, after `failures` token requests in a row failed, the next is waited for:
/// 1 s doubling to 60 s, so a provider that is down is not asked on every delivery
/// (each delivery meanwhile is `TokenUnavailable` and retried on its schedule).
pub fn failure_backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 1).min(6)).min(Duration::from_secs(60)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_asks_for_client_credentials_with_the_target() {
        let form = token_form(
            "app",
            ClientProof::Secret("s3cret"),
            &TokenTarget::entra_application("api://orders/"),
        );
        assert_eq!(
            form,
            vec![
                ("grant_type", "client_credentials".to_owned()),
                ("client_id", "app".to_owned()),
                ("client_secret", "s3cret".to_owned()),
                ("scope", "api://orders/.default".to_owned()),
            ]
        );
        let target = TokenTarget {
            scope: None,
            audience: Some("https://partner".into()),
        };
        assert_eq!(
            token_form("a", ClientProof::Secret("b"), &target)[3],
            ("audience", "https://partner".to_owned())
        );
    }

    #[test]
    fn a_certificate_credential_sends_a_jwt_assertion_instead_of_a_secret() {
        let form = token_form("app", ClientProof::Assertion("a.b.c"), &TokenTarget::default());
        assert_eq!(
            form,
            vec![
                ("grant_type", "client_credentials".to_owned()),
                ("client_id", "app".to_owned()),
                ("client_assertion_type", CLIENT_ASSERTION_TYPE.to_owned()),
                ("client_assertion", "a.b.c".to_owned()),
            ]
        );
        assert_eq!(format!("{:?}", ClientProof::Assertion("a.b.c")), "Assertion(***)");
    }

    #[test]
    fn an_assertion_names_the_token_url_and_the_client_and_lives_briefly() {
        let claims = assertion_claims(
            "app",
            "https://login.example/t/oauth2/v2.0/token",
            UnixMillis(1_700_000_000_999),
            "j1".into(),
        );
        assert_eq!(claims.aud, "https://login.example/t/oauth2/v2.0/token");
        assert_eq!((claims.iss.as_str(), claims.sub.as_str()), ("app", "app"));
        assert_eq!(claims.jti, "j1");
        assert_eq!((claims.nbf, claims.iat), (1_700_000_000, 1_700_000_000));
        assert_eq!(claims.exp, 1_700_000_300);
    }

    #[test]
    fn a_token_answer_is_read_and_its_token_never_printed() {
        let issued = parse_token_response(
            200,
            br#"{"access_token":"eyJ.secret","token_type":"Bearer","expires_in":3599}"#,
        )
        .unwrap();
        assert_eq!(issued.token.expose(), "eyJ.secret");
        assert_eq!(issued.lifetime, Duration::from_secs(3599));
        assert!(!format!("{issued:?}").contains("eyJ"), "{issued:?}");
        let v1 = parse_token_response(200, br#"{"access_token":"t","expires_in":"60"}"#).unwrap();
        assert_eq!(v1.lifetime, Duration::from_secs(60), "Entra v1 writes a string");
        let bare = parse_token_response(200, br#"{"access_token":"t"}"#).unwrap();
        assert_eq!(bare.lifetime, DEFAULT_LIFETIME);
    }

    #[test]
    fn refusals_say_what_the_provider_said_and_no_more() {
        let e = parse_token_response(
            401,
            br#"{"error":"invalid_client","error_description":"bad secret","access_token":"leak"}"#,
        )
        .unwrap_err();
        assert_eq!(e.0, "the token endpoint answered 401: invalid_client: bad secret");
        let e = parse_token_response(502, b"<html>proxy</html>").unwrap_err();
        assert_eq!(e.0, "the token endpoint answered 502");
        let long = format!(r#"{{"error":"x","error_description":"{}"}}"#, "a".repeat(500));
        assert_eq!(
            parse_token_response(400, long.as_bytes()).unwrap_err().0.len(),
            REFUSAL_CHARS
        );
        assert!(
            parse_token_response(200, b"{}")
                .unwrap_err()
                .0
                .contains("no access_token")
        );
        assert!(parse_token_response(200, b"nope").is_err());
        let mac = parse_token_response(200, br#"{"access_token":"t","token_type":"mac"}"#);
        assert!(mac.unwrap_err().0.contains("bearer tokens only"));
    }

    #[test]
    fn tokens_are_renewed_before_their_end_but_not_in_their_first_half() {
        let issued = UnixMillis(1_000_000);
        let hour = Duration::from_secs(3600);
        let five = Duration::from_secs(300);
        assert_eq!(refresh_at(issued, hour, five), issued.plus(Duration::from_secs(3300)));
        let short = Duration::from_secs(120);
        assert_eq!(refresh_at(issued, short, five), issued.plus(Duration::from_secs(60)));
        assert_eq!(refresh_at(issued, Duration::ZERO, five), issued);
    }

    #[test]
    fn a_failing_provider_is_asked_less_and_less_often() {
        let secs = |s| Duration::from_secs(s);
        let waits: Vec<Duration> = (0..9).map(failure_backoff).collect();
        assert_eq!(
            waits,
            [0, 1, 2, 4, 8, 16, 32, 60, 60].map(secs).to_vec(),
            "doubling from 1 s, at most a minute"
        );
        assert_eq!(failure_backoff(u32::MAX), secs(60));
    }
}
