//! Who may see the status page and act from it. The page takes the admin token, as
//! `Authorization: Bearer` or as a sign-in cookie holding a hash of it (not the token:
//! the cookie opens `/status` and nothing else, and stops working when the token
//! changes).
//!
//! The page's actions are `POST /status/…` forms, so they are guarded against
//! cross-site requests three ways: the cookie is `SameSite=Strict` (a browser does not
//! send it with another site's request), the request must come from this origin
//! (`Sec-Fetch-Site: same-origin`, or an `Origin` naming this host, when the browser
//! sends them), and the form carries a token derived from the admin token that only a
//! page rendered for a signed-in viewer holds.
//!
//! An action's result travels to the page it redirects to in a short-lived flash cookie,
//! read and cleared by that page.
//!
//! Any page signs a browser in: `?token=` on its address is checked, and a right token
//! sets the cookie and leads back to the same page without the token ([`SignIn`]). The
//! sign-in form submits to the page it was shown for. Where a sign-in leads is always
//! the requested page's own path under `/status`, never an address taken from the
//! request's data, so it cannot send anyone to another site.

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Name of the sign-in cookie.
pub const COOKIE: &str = "eg_status";
/// Name of the cookie carrying an action's result to the next page.
pub const FLASH_COOKIE: &str = "eg_status_flash";
/// The form field holding the form token.
pub const FORM_TOKEN_FIELD: &str = "form_token";

/// The query field a sign-in presents the admin token in.
pub const TOKEN_FIELD: &str = "token";
/// Where a sign-in leads when the page asked for is not a status page.
const OVERVIEW: &str = "/status";

/// A page request read for signing in: the token it presented in `?token=`, if any, and
/// the page it asked for without it, where signing in leads.
#[derive(Debug, PartialEq, Eq)]
pub struct SignIn {
    pub presented: Option<String>,
    /// The page's path: the request's own path under `/status` (else `/status`).
    pub path: String,
    /// The page's query fields other than the token, in order.
    pub kept: Vec<(String, String)>,
}

impl SignIn {
    /// Reads a request for the page at `path` with `query`.
    pub fn of(path: &str, query: Option<&str>) -> Self {
        let mut presented = None;
        let mut kept = Vec::new();
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            if name == TOKEN_FIELD {
                presented.get_or_insert_with(|| value.into_owned());
            } else {
                kept.push((name.into_owned(), value.into_owned()));
            }
        }
        let under_status = path == OVERVIEW || path.starts_with("/status/");
        Self {
            presented,
            path: if under_status { path } else { OVERVIEW }.to_owned(),
            kept,
        }
    }

    /// The page's address without the token: a path on this site, never another host.
    pub fn back_to(&self) -> String {
        if self.kept.is_empty() {
            return self.path.clone();
        }
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&self.kept)
            .finish();
        format!("{}?{query}", self.path)
    }
}

/// What a request presented.
#[derive(Debug, PartialEq, Eq)]
pub enum Access {
    Granted,
    Denied,
}

pub fn equal(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn hex_hash(purpose: &str, token: &str) -> String {
    let digest = Sha256::digest(format!("{purpose}\n{token}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cookie value for `token`: a hash, so the cookie is no admin token.
pub fn session_value(token: &str) -> String {
    hex_hash("eg status page session", token)
}

/// The token every action form carries: known only to pages rendered for a signed-in
/// viewer, and different from the cookie, so a request that merely carries the cookie
/// cannot act.
pub fn form_token(token: &str) -> String {
    hex_hash("eg status page form", token)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

pub fn access(token: &str, headers: &HeaderMap, allow_cookie: bool) -> Access {
    let by_bearer = bearer(headers).is_some_and(|presented| equal(presented, token));
    let by_cookie = allow_cookie && cookie(headers, COOKIE).is_some_and(|v| equal(v, &session_value(token)));
    if by_bearer || by_cookie {
        Access::Granted
    } else {
        Access::Denied
    }
}

/// Why an action request is refused, for the person who sent it.
#[derive(Debug, PartialEq, Eq)]
pub enum ActionRefused {
    SignedOut,
    CrossSite,
    NoFormToken,
}

impl ActionRefused {
    pub fn message(&self) -> &'static str {
        match self {
            Self::SignedOut => "You are signed out: open /status and sign in again, then repeat the action.",
            Self::CrossSite => {
                "This action came from another site or origin. Actions are taken only from this status page."
            }
            Self::NoFormToken => {
                "The form was not one this status page rendered for you (its form token is missing or wrong, \
                 for instance after the admin token changed): reload the page and repeat the action."
            }
        }
    }
}

/// Whether the request was sent from a page of this origin, as far as the browser
/// says: `Sec-Fetch-Site` when sent, else `Origin` against `Host`. A client that sends
/// neither (not a current browser) is judged by the form token alone.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin";
    }
    match (text("origin"), text("host")) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host)),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Checks an action request: signed in, sent from this origin, with the form token.
pub fn check_action(token: &str, headers: &HeaderMap, form_token_sent: Option<&str>) -> Result<(), ActionRefused> {
    if access(token, headers, true) == Access::Denied {
        return Err(ActionRefused::SignedOut);
    }
    if !same_origin(headers) {
        return Err(ActionRefused::CrossSite);
    }
    if !form_token_sent.is_some_and(|sent| equal(sent, &form_token(token))) {
        return Err(ActionRefused::NoFormToken);
    }
    Ok(())
}

/// How an action went, shown once on the page it redirects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub ok: bool,
    pub message: String,
}

impl Flash {
    pub fn ok(message: impl Into<String>) -> Self {
        Self {
            ok: true,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            ok: false,
            message: message.into(),
        }
    }

    /// The `Set-Cookie` value carrying this flash to the next page (a minute at most).
    pub fn set_cookie(&self, secure: bool) -> Option<HeaderValue> {
        let value = BASE64URL.encode(format!("{}{}", if self.ok { '+' } else { '!' }, self.message));
        HeaderValue::from_str(&format!(
            "{FLASH_COOKIE}={value}; Path=/status; HttpOnly; SameSite=Strict; Max-Age=60{}",
            secure_attribute(secure)
        ))
        .ok()
    }

    /// The flash a request carries, if any.
    pub fn read(headers: &HeaderMap) -> Option<Self> {
        let raw = BASE64URL.decode(cookie(headers, FLASH_COOKIE)?).ok()?;
        let text = String::from_utf8(raw).ok()?;
        let mut chars = text.chars();
        let ok = match chars.next()? {
            '+' => true,
            '!' => false,
            _ => return None,
        };
        Some(Self {
            ok,
            message: chars.as_str().to_owned(),
        })
    }

    /// The `Set-Cookie` value that clears a flash once shown.
    pub fn clear_cookie() -> HeaderValue {
        HeaderValue::from_static("eg_status_flash=; Path=/status; HttpOnly; SameSite=Strict; Max-Age=0")
    }
}

pub fn secure_attribute(secure: bool) -> &'static str {
    if secure { "; Secure" } else { "" }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn bearer_or_cookie_grants_access() {
        let t = "tok";
        let session = session_value(t);
        assert_eq!(
            access(t, &headers(&[("authorization", "Bearer tok")]), false),
            Access::Granted
        );
        assert_eq!(
            access(t, &headers(&[("authorization", "Bearer nope")]), true),
            Access::Denied
        );
        let with_cookie = headers(&[("cookie", &format!("other=1; {COOKIE}={session}; x=y"))]);
        assert_eq!(access(t, &with_cookie, true), Access::Granted);
        // The JSON endpoint takes the bearer token only.
        assert_eq!(access(t, &with_cookie, false), Access::Denied);
        // The cookie is not the token, and the token is not a cookie.
        assert_ne!(session, t);
        let token_as_cookie = headers(&[("cookie", &format!("{COOKIE}={t}"))]);
        assert_eq!(access(t, &token_as_cookie, true), Access::Denied);
        assert_eq!(access(t, &HeaderMap::new(), true), Access::Denied);
        // A changed token ends every session.
        assert_eq!(access("new", &with_cookie, true), Access::Denied);
    }

    #[test]
    fn an_action_needs_the_cookie_this_origin_and_the_form_token() {
        let t = "tok";
        let cookie = format!("{COOKIE}={}", session_value(t));
        let form = form_token(t);
        assert_ne!(form, session_value(t), "the cookie alone must not be the form token");
        let ok = |pairs: &[(&str, &str)], sent: Option<&str>| check_action(t, &headers(pairs), sent);
        assert_eq!(
            ok(&[("cookie", &cookie), ("sec-fetch-site", "same-origin")], Some(&form)),
            Ok(())
        );
        assert_eq!(
            ok(
                &[
                    ("cookie", &cookie),
                    ("origin", "http://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080")
                ],
                Some(&form)
            ),
            Ok(())
        );
        // A client that says nothing about where it was sent from: the form token decides.
        assert_eq!(ok(&[("cookie", &cookie)], Some(&form)), Ok(()));
        assert_eq!(ok(&[("cookie", &cookie)], None), Err(ActionRefused::NoFormToken));
        assert_eq!(
            ok(&[("cookie", &cookie)], Some(&session_value(t))),
            Err(ActionRefused::NoFormToken)
        );
        for site in ["cross-site", "same-site", "none"] {
            assert_eq!(
                ok(&[("cookie", &cookie), ("sec-fetch-site", site)], Some(&form)),
                Err(ActionRefused::CrossSite),
                "{site}"
            );
        }
        assert_eq!(
            ok(
                &[
                    ("cookie", &cookie),
                    ("origin", "https://evil.example"),
                    ("host", "127.0.0.1:8080")
                ],
                Some(&form)
            ),
            Err(ActionRefused::CrossSite)
        );
        assert_eq!(
            ok(&[("sec-fetch-site", "same-origin")], Some(&form)),
            Err(ActionRefused::SignedOut)
        );
        // A changed admin token ends the forms too.
        assert_eq!(
            check_action("new", &headers(&[("authorization", "Bearer new")]), Some(&form)),
            Err(ActionRefused::NoFormToken)
        );
    }

    #[test]
    fn a_sign_in_leads_back_to_the_page_asked_for_without_the_token() {
        let sign_in = SignIn::of("/status/topics/orders/subscriptions/audit", Some("token=t%26k"));
        assert_eq!(sign_in.presented.as_deref(), Some("t&k"));
        assert_eq!(sign_in.back_to(), "/status/topics/orders/subscriptions/audit");

        // Other fields stay, the token goes (every copy of it); the first one counts.
        let sign_in = SignIn::of(
            "/status/topics/orders/events/e%201",
            Some("subscription=a+b&token=x&token=y"),
        );
        assert_eq!(sign_in.presented.as_deref(), Some("x"));
        assert_eq!(sign_in.back_to(), "/status/topics/orders/events/e%201?subscription=a+b");

        let plain = SignIn::of("/status", None);
        assert_eq!(
            (plain.presented.as_deref(), plain.back_to().as_str()),
            (None, "/status")
        );

        // Never anywhere but a status page of this site, whatever the request holds.
        for (path, query) in [
            ("//evil.example/status", Some("token=x")),
            ("/admin/status", Some("token=x")),
            ("/statusx", None),
            ("https://evil.example/status", None),
        ] {
            assert_eq!(SignIn::of(path, query).back_to(), "/status", "{path}");
        }
        let next = SignIn::of("/status", Some("token=x&next=https://evil.example/"));
        assert_eq!(next.back_to(), "/status?next=https%3A%2F%2Fevil.example%2F");
    }

    #[test]
    fn a_flash_survives_its_cookie() {
        for flash in [
            Flash::ok("Paused orders / audit; a message with ; and = and ünïcode"),
            Flash::failed("no"),
        ] {
            let set = flash.set_cookie(false).unwrap();
            let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
            assert_eq!(Flash::read(&headers(&[("cookie", &pair)])), Some(flash));
        }
        assert_eq!(
            Flash::read(&headers(&[("cookie", &format!("{FLASH_COOKIE}=%%%"))])),
            None
        );
    }
}
