//! The gateway's own credentials for the upstream: `upstream.headers` (an API key, say) and
//! `upstream.bearer_token`, each given inline or read from a file such as a mounted Kubernetes
//! Secret. They replace, never add to, what the client sent: the front drops the client's
//! `Authorization`, so the upstream only ever sees these. Files are read once, here; errors
//! name the field and the file, never the value. (The mTLS client certificate is configured
//! as files in `[upstream.tls]`.)

use std::collections::BTreeMap;

use http::header::AUTHORIZATION;
use http::{HeaderName, HeaderValue};

use super::raw::RawSecretValue;
use super::{ConfigError, Secret};

/// The validated upstream headers: `headers` then the bearer token as `Authorization`.
pub(super) fn upstream_headers(
    headers: BTreeMap<String, RawSecretValue>,
    bearer: Option<Secret>,
    bearer_file: Option<String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut out = headers
        .into_iter()
        .map(|(name, value)| {
            let field = format!("upstream.headers.{name}");
            let n = HeaderName::try_from(name.as_str())
                .map_err(|_| ConfigError::invalid(&field, "not a valid header name"))?;
            if forbidden_upstream_header(&n) {
                return Err(ConfigError::invalid(
                    &field,
                    "is managed by the gateway and cannot be configured",
                ));
            }
            Ok((n, sensitive(&field, &resolve(&field, value)?)?))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(token) = bearer_token(bearer, bearer_file)? {
        if out.iter().any(|(n, _)| n == AUTHORIZATION) {
            return Err(ConfigError::invalid(
                "upstream.bearer_token",
                "conflicts with upstream.headers.authorization; set one of them",
            ));
        }
        let value = Secret::new(format!("Bearer {}", token.expose()));
        out.push((AUTHORIZATION, sensitive("upstream.bearer_token", &value)?));
    }
    Ok(out)
}

/// `bearer_token` or `bearer_token_file`, not both.
fn bearer_token(inline: Option<Secret>, file: Option<String>) -> Result<Option<Secret>, ConfigError> {
    let token = match (inline, file) {
        (None, None) => return Ok(None),
        (Some(token), None) => token,
        (None, Some(path)) => read_secret("upstream.bearer_token_file", &path)?,
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                "upstream.bearer_token_file",
                "set one of upstream.bearer_token and upstream.bearer_token_file",
            ))
        }
    };
    if token.expose().is_empty() || token.expose().contains(char::is_whitespace) {
        return Err(ConfigError::invalid("upstream.bearer_token", "must be one non-empty word"));
    }
    Ok(Some(token))
}

fn resolve(field: &str, value: RawSecretValue) -> Result<Secret, ConfigError> {
    match value {
        RawSecretValue::Inline(secret) => Ok(secret),
        RawSecretValue::File(f) => read_secret(field, &f.file),
    }
}

/// A secret file's content without trailing whitespace (`echo` and editors add a newline).
fn read_secret(field: &str, path: &str) -> Result<Secret, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::invalid(field, format!("{path}: {e}")))?;
    let text = Secret::new(text);
    let value = text.expose().trim_end();
    if value.is_empty() {
        return Err(ConfigError::invalid(field, format!("{path} is empty")));
    }
    Ok(Secret::new(value.to_owned()))
}

fn sensitive(field: &str, value: &Secret) -> Result<HeaderValue, ConfigError> {
    let mut v = HeaderValue::from_str(value.expose())
        .map_err(|_| ConfigError::invalid(field, "value is not a valid header value"))?;
    v.set_sensitive(true);
    Ok(v)
}

fn forbidden_upstream_header(name: &HeaderName) -> bool {
    use crate::protocol::headers::{PROTOCOL_VERSION, SESSION_ID};
    [
        PROTOCOL_VERSION.as_str(),
        SESSION_ID.as_str(),
        "content-type",
        "accept",
        "content-length",
        "host",
        "last-event-id",
    ]
    .contains(&name.as_str())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn upstream(lines: &str) -> Result<Vec<(String, String)>, String> {
        let toml = format!("[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\n{lines}\n");
        let cfg = Config::from_toml(&toml).map_err(|e| e.to_string())?;
        let headers = cfg.upstream.headers.iter();
        Ok(headers.map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned())).collect())
    }

    fn path(file: &tempfile::NamedTempFile) -> String {
        file.path().display().to_string()
    }

    #[test]
    fn values_come_inline_or_from_files_and_the_bearer_becomes_authorization() {
        let key = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(key.path(), "sk-from-file\n").unwrap();
        let token = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(token.path(), "tok-123\r\n").unwrap();
        let got = upstream(&format!(
            "bearer_token_file = {:?}\n[upstream.headers]\nx-api-key = {{ file = {:?} }}\nx-team = \"blue\"",
            path(&token),
            path(&key)
        ))
        .unwrap();
        let want = [("x-api-key", "sk-from-file"), ("x-team", "blue"), ("authorization", "Bearer tok-123")];
        assert_eq!(got, want.map(|(n, v)| (n.to_owned(), v.to_owned())));
        let inline = upstream("bearer_token = \"abc\"").unwrap();
        assert_eq!(inline, vec![("authorization".to_owned(), "Bearer abc".to_owned())]);
    }

    #[test]
    fn conflicts_empty_files_and_bad_values_are_refused_without_showing_them() {
        let empty = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(empty.path(), "\n").unwrap();
        let cases = [
            (format!("bearer_token = \"a\"\nbearer_token_file = {:?}", path(&empty)), "bearer_token_file"),
            (format!("bearer_token_file = {:?}", path(&empty)), "is empty"),
            ("bearer_token = \"two words\"".to_owned(), "one non-empty word"),
            ("bearer_token = \"t\"\n[upstream.headers]\nauthorization = \"Basic x\"".to_owned(), "conflicts"),
            (
                "[upstream.headers]\nx-k = { file = \"/nonexistent/secret\" }".to_owned(),
                "upstream.headers.x-k",
            ),
            ("[upstream.headers]\nx-k = { path = \"f\" }".to_owned(), "upstream.headers"),
            ("[upstream.headers]\nx-k = \"bad\\nvalue-s3cr3t\"".to_owned(), "not a valid header value"),
        ];
        for (lines, expected) in cases {
            let err = upstream(&lines).unwrap_err();
            assert!(err.contains(expected), "{lines}: {err}");
            assert!(!err.contains("s3cr3t") && !err.contains("Basic x"), "{err}");
        }
    }

    #[test]
    fn debug_output_hides_every_credential() {
        let toml = "[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\nbearer_token = \"tok-secret\"\n\
                    [upstream.headers]\nx-api-key = \"key-secret\"\n";
        let text = format!("{:?}", Config::from_toml(toml).unwrap());
        assert!(!text.contains("tok-secret") && !text.contains("key-secret"), "{text}");
    }
}
