//! Basic authentication: users and their bcrypt hashes, each check on a blocking thread
//! (two at a time at most: a third is answered 429 at once), a matched password remembered
//! per user, unknown users checked against a decoy hash so that they cost as much.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;

use super::{WebConfig, WebConfigError};

/// A bcrypt cost above this is refused: at 17 a check takes seconds, past it minutes.
const MAX_BCRYPT_COST: u32 = 17;

/// What [`BasicAuth::authorize`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    Allowed,
    Denied,
    /// Two checks running already: try again.
    Busy,
}

/// The users, and the state of their password checks.
pub(super) struct BasicAuth {
    /// User → bcrypt hash.
    users: HashMap<String, String>,
    /// User → the password that last matched its hash.
    matched: Mutex<HashMap<String, String>>,
    /// A hash that no password matches in practice, checked for unknown users so that the
    /// answer takes as long as for a known one.
    decoy: String,
    /// Bounds the blocking threads checking hashes.
    checking: Arc<tokio::sync::Semaphore>,
}

impl BasicAuth {
    /// The users of `basic_auth_users`, checked (`field` makes an error naming a field).
    pub(super) fn new(
        raw_users: Option<HashMap<String, Option<String>>>,
        field: &dyn Fn(&str, String) -> WebConfigError,
    ) -> Result<BasicAuth, WebConfigError> {
        if raw_users.as_ref().is_some_and(HashMap::is_empty) {
            return Err(field(
                "basic_auth_users",
                "no users under it: name at least one, or remove the key for no authentication"
                    .into(),
            ));
        }
        let mut users = HashMap::new();
        for (user, hash) in raw_users.unwrap_or_default() {
            let name = format!("basic_auth_users.{user}");
            if user.is_empty() {
                return Err(field(
                    "basic_auth_users",
                    "a user name cannot be empty".into(),
                ));
            }
            if user.contains(':') {
                return Err(field(&name, "a user name cannot contain ':'".into()));
            }
            let Some(hash) = hash.filter(|h| !h.trim().is_empty()) else {
                return Err(field(&name, "no bcrypt hash given".into()));
            };
            let cost = hash.parse::<bcrypt::HashParts>().map(|h| h.get_cost());
            match cost {
                Ok(c) if c <= MAX_BCRYPT_COST => {}
                Ok(c) => {
                    return Err(field(
                        &name,
                        format!(
                            "bcrypt cost {c} is above {MAX_BCRYPT_COST}: each check would take minutes; hash with a cost of 10 to 12"
                        ),
                    ));
                }
                Err(_) => {
                    return Err(field(
                        &name,
                        "not a bcrypt hash (it starts with $2y$ or $2b$ and has 60 characters: make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)".into(),
                    ));
                }
            }
            users.insert(user, hash);
        }
        let decoy = if users.is_empty() {
            String::new()
        } else {
            // at the highest cost of the users' hashes: an unknown user costs no less
            let cost = users
                .values()
                .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
                .map(|h| h.get_cost())
                .max()
                .unwrap_or(bcrypt::DEFAULT_COST);
            bcrypt::hash("proofline decoy: no user has this password", cost)
                .map_err(|e| field("basic_auth_users", e.to_string()))?
        };
        Ok(BasicAuth {
            users,
            matched: Mutex::new(HashMap::new()),
            decoy,
            checking: Arc::new(tokio::sync::Semaphore::new(2)),
        })
    }

    /// Whether no user is named (no authentication).
    pub(super) fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Users named.
    pub(super) fn len(&self) -> usize {
        self.users.len()
    }

    /// Checks a request's `Authorization` header against the users.
    pub(crate) async fn authorize(&self, header: Option<&[u8]>) -> Auth {
        if self.users.is_empty() {
            return Auth::Allowed;
        }
        let Some((user, password)) = header.and_then(parse_basic) else {
            return Auth::Denied;
        };
        let known = self.users.get(&user);
        if known.is_some() {
            let matched = self.matched.lock().unwrap_or_else(|e| e.into_inner());
            if matched.get(&user).is_some_and(|p| same(p, &password)) {
                return Auth::Allowed;
            }
        }
        let hash = known.unwrap_or(&self.decoy).clone();
        // the place is held by the check itself: a client that hangs up does not free it
        let Ok(permit) = self.checking.clone().try_acquire_owned() else {
            return Auth::Busy;
        };
        let pw = password.clone();
        let ok = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            bcrypt::verify(pw, &hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        if ok && known.is_some() {
            self.matched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(user, password);
            Auth::Allowed
        } else {
            Auth::Denied
        }
    }
}

impl WebConfig {
    /// The answer to a request that may not be served (401, or 429 when two password
    /// checks are running); `None`: serve it.
    pub(crate) async fn gate(
        &self,
        headers: &hyper::HeaderMap,
        metrics: &crate::Metrics,
    ) -> Option<hyper::Response<http_body_util::Full<hyper::body::Bytes>>> {
        use hyper::header::{
            AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
        };
        let header = headers.get(AUTHORIZATION).map(|v| v.as_bytes());
        let (status, body, extra) = match self.auth.authorize(header).await {
            Auth::Allowed => return None,
            Auth::Denied => {
                metrics.refused(crate::labels::Refused::Unauthorized);
                (
                    hyper::StatusCode::UNAUTHORIZED,
                    "Unauthorized\n",
                    (
                        WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"proofline\""),
                    ),
                )
            }
            Auth::Busy => {
                metrics.refused(crate::labels::Refused::TooManyChecks);
                (
                    hyper::StatusCode::TOO_MANY_REQUESTS,
                    "Too many password checks at once; try again\n",
                    (RETRY_AFTER, HeaderValue::from_static("1")),
                )
            }
        };
        let mut r = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        r.headers_mut().insert(extra.0, extra.1);
        Some(r)
    }
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `Basic base64(user:password)` → (user, password).
fn parse_basic(header: &[u8]) -> Option<(String, String)> {
    let header = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_password_is_checked_against_its_bcrypt_hash_and_remembered() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let w = WebConfig::from_yaml(
            &format!("basic_auth_users:\n  prom: '{hash}'\n"),
            Path::new("w.yml"),
        )
        .unwrap();
        let basic = |u: &str, p: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let check =
            |h: Option<String>| rt.block_on(w.auth.authorize(h.as_deref().map(str::as_bytes)));
        assert_eq!(check(None), Auth::Denied);
        assert_eq!(check(Some(basic("prom", "wrong"))), Auth::Denied);
        assert_eq!(check(Some(basic("mallory", "s3cret"))), Auth::Denied);
        assert_eq!(check(Some("Bearer abc".into())), Auth::Denied);
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        assert_eq!(
            w.auth.matched.lock().unwrap().get("prom").unwrap(),
            "s3cret"
        );
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        assert_eq!(check(Some(basic("prom", "s3cre"))), Auth::Denied);
        // two checks running: a password to check is answered Busy at once; the one that
        // matched before is still let in
        let held = (
            w.auth.checking.clone().try_acquire_owned().unwrap(),
            w.auth.checking.clone().try_acquire_owned().unwrap(),
        );
        assert_eq!(check(Some(basic("prom", "guess"))), Auth::Busy);
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        drop(held);
        assert_eq!(check(Some(basic("prom", "guess"))), Auth::Denied);
        assert!(!format!("{w:?}").contains("$2"), "Debug shows no hash");
    }
}
