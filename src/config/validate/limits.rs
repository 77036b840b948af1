//! Validation of `[limits]` (rates and bursts), of `state.redis_url` (a URL the Redis client
//! crate accepts) and of `state.single_use` (which needs one). Kept apart from the other
//! sections so each stays short.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use super::super::raw::{RawLimits, RawRate};
use super::super::{ConfigError, LimitsConfig, Rate, Secret, SingleUseConfig};
use crate::defaults as d;

/// `max_rounds` (`mrtr.max_rounds`) sizes the default bursts: see [`d::limit_burst`].
pub(super) fn limits(raw: RawLimits, max_rounds: u32) -> Result<LimitsConfig, ConfigError> {
    let principal = raw.principal.map(|r| rate("limits.principal", &r, max_rounds)).transpose()?;
    let tools = raw.tools.unwrap_or_default();
    Ok(LimitsConfig { principal, tools: tool_rates(tools, max_rounds)? })
}

fn tool_rates(table: BTreeMap<String, RawRate>, max_rounds: u32) -> Result<Vec<(String, Rate)>, ConfigError> {
    table
        .into_iter()
        .map(|(name, r)| {
            if name.is_empty() {
                return Err(ConfigError::invalid("limits.tools", "a tool name must not be empty"));
            }
            let rate = rate(&format!("limits.tools.{name}"), &r, max_rounds)?;
            Ok((name, rate))
        })
        .collect()
}

fn rate(field: &str, raw: &RawRate, max_rounds: u32) -> Result<Rate, ConfigError> {
    let per_sec = raw.rate_per_sec;
    if !per_sec.is_finite() || per_sec <= 0.0 || per_sec > d::MAX_RATE_PER_SEC {
        return Err(ConfigError::invalid(
            format!("{field}.rate_per_sec"),
            format!("must be above 0 and at most {}", d::MAX_RATE_PER_SEC),
        ));
    }
    let burst = raw.burst.unwrap_or_else(|| d::limit_burst(per_sec, max_rounds));
    let burst = NonZeroU32::new(burst)
        .ok_or_else(|| ConfigError::invalid(format!("{field}.burst"), "must be positive"))?;
    Ok(Rate { period: Duration::from_secs_f64(1.0 / per_sec), burst })
}

/// `state.redis_url`, parsed once here so a bad URL fails at load time, whatever uses it; the
/// message never repeats the URL, which may hold a password.
pub(super) fn redis_url(url: Option<Secret>) -> Result<Option<Secret>, ConfigError> {
    if let Some(url) = &url {
        redis::Client::open(url.expose())
            .map_err(|_| ConfigError::invalid("state.redis_url", "not a redis:// or redis+unix:// URL"))?;
    }
    Ok(url)
}

/// `state.single_use` over the checked `state.redis_url`.
pub(super) fn single_use(
    on: Option<bool>,
    url: Option<Secret>,
) -> Result<Option<SingleUseConfig>, ConfigError> {
    if !on.unwrap_or(d::SINGLE_USE) {
        return Ok(None);
    }
    let Some(redis_url) = url else {
        return Err(ConfigError::invalid("state.redis_url", "state.single_use needs a redis_url"));
    };
    Ok(Some(SingleUseConfig { redis_url }))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, LimitsConfig};

    fn err(toml: &str) -> String {
        Config::from_toml(toml).unwrap_err().to_string()
    }

    #[test]
    fn everything_is_off_by_default() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.limits, LimitsConfig::default());
        assert!(c.state.single_use.is_none());
        let c = Config::from_toml("[state]\nredis_url = \"redis://127.0.0.1:1\"").unwrap();
        assert!(c.state.single_use.is_none(), "a URL alone does not turn single use on");
        assert!(c.state.redis_url.is_some(), "but it is kept, for finished tasks");
        let e = err("[state]\nredis_url = \"http://user:hunter2@x\"");
        assert!(
            e.starts_with("state.redis_url:") && !e.contains("hunter2"),
            "checked without single use: {e}"
        );
    }

    #[test]
    fn rates_and_bursts() {
        let c = Config::from_toml(
            "[limits]\nprincipal = { rate_per_sec = 2.5 }\n[limits.tools.search]\nrate_per_sec = 0.5\nburst = 3\n",
        )
        .unwrap();
        let p = c.limits.principal.unwrap();
        assert_eq!(p.period.as_millis(), 400);
        assert_eq!(p.burst.get(), 9, "the default burst holds a chain: a first call and 8 retries");
        let (name, t) = &c.limits.tools[0];
        assert_eq!(name, "search");
        assert_eq!((t.period.as_secs(), t.burst.get()), (2, 3));
        let c = Config::from_toml("[mrtr]\nmax_rounds = 2\n[limits]\nprincipal = { rate_per_sec = 2.5 }")
            .unwrap();
        assert_eq!(c.limits.principal.unwrap().burst.get(), 3, "a chain of 2 rounds is 3 requests");
        let c = Config::from_toml("[limits]\nprincipal = { rate_per_sec = 30.5 }").unwrap();
        assert_eq!(c.limits.principal.unwrap().burst.get(), 31, "or the rate rounded up, if more");
    }

    #[test]
    fn bad_rates_name_the_field() {
        let e = err("[limits]\nprincipal = { rate_per_sec = 0 }");
        assert!(e.starts_with("limits.principal.rate_per_sec:"), "{e}");
        let e = err("[limits.tools.x]\nrate_per_sec = 1\nburst = 0");
        assert!(e.starts_with("limits.tools.x.burst:"), "{e}");
        let e = err("[limits.tools.x]\nrate_per_sec = -1");
        assert!(e.starts_with("limits.tools.x.rate_per_sec:"), "{e}");
        let e = err("[limits]\nprincipal = { rate_per_sec = 1, brust = 2 }");
        assert!(e.contains("brust"), "{e}");
    }

    /// The shipped example, with its commented `[limits]` and single-use lines switched on.
    #[test]
    fn the_example_configs_limits_and_single_use_lines_are_valid() {
        let example = include_str!("../../../config/gateway.example.toml");
        Config::from_toml(example).unwrap();
        let on = example
            .replace("single_use = false", "single_use = true")
            .replace("# redis_url = ", "redis_url = ")
            .replace("# principal = ", "principal = ")
            .replace("# [limits.tools]", "[limits.tools]")
            .replace("# search = ", "search = ");
        let c = Config::from_toml(&on).unwrap();
        assert!(c.state.single_use.is_some());
        assert_eq!(c.limits.principal.unwrap().burst.get(), 20);
        assert_eq!(c.limits.tools[0].0, "search");
    }

    #[test]
    fn single_use_needs_a_valid_url_and_never_shows_it() {
        let e = err("[state]\nsingle_use = true");
        assert!(e.starts_with("state.redis_url:"), "{e}");
        let e = err("[state]\nsingle_use = true\nredis_url = \"http://user:hunter2@x\"");
        assert!(e.starts_with("state.redis_url:") && !e.contains("hunter2"), "{e}");
        let c = Config::from_toml("[state]\nsingle_use = true\nredis_url = \"redis://:pw@127.0.0.1:6379/0\"")
            .unwrap();
        let su = c.state.single_use.unwrap();
        assert!(!format!("{su:?}").contains("pw@"));
    }
}
