//! Validation of `[subscriptions]`: every bound positive, and a principal's bound within the
//! total.

use super::super::raw::RawSubscriptions;
use super::super::{ConfigError, SubscriptionsConfig};
use super::positive;
use crate::defaults as d;

pub(super) fn subscriptions(raw: RawSubscriptions) -> Result<SubscriptionsConfig, ConfigError> {
    let max_listeners =
        positive("subscriptions.max_listeners", raw.max_listeners.unwrap_or(d::SUBSCRIPTIONS_MAX_LISTENERS))?;
    let max_per_principal = positive(
        "subscriptions.max_per_principal",
        raw.max_per_principal.unwrap_or(d::SUBSCRIPTIONS_MAX_PER_PRINCIPAL.min(max_listeners)),
    )?;
    if max_per_principal > max_listeners {
        return Err(ConfigError::invalid(
            "subscriptions.max_per_principal",
            format!("must be at most subscriptions.max_listeners ({max_listeners})"),
        ));
    }
    Ok(SubscriptionsConfig {
        enabled: raw.enabled.unwrap_or(d::SUBSCRIPTIONS_ENABLED),
        max_listeners,
        max_per_principal,
        max_uris: positive("subscriptions.max_uris", raw.max_uris.unwrap_or(d::SUBSCRIPTIONS_MAX_URIS))?,
        share_with_calls: raw.share_with_calls.unwrap_or(d::SUBSCRIPTIONS_SHARE_WITH_CALLS),
        max_sessions: positive(
            "subscriptions.max_sessions",
            raw.max_sessions.unwrap_or(d::SUBSCRIPTIONS_MAX_SESSIONS).min(max_listeners),
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_positive_and_nested() {
        let ok = subscriptions(RawSubscriptions::default()).unwrap();
        assert_eq!(ok, SubscriptionsConfig::default());
        let zero = RawSubscriptions { max_uris: Some(0), ..RawSubscriptions::default() };
        assert!(subscriptions(zero).unwrap_err().to_string().contains("subscriptions.max_uris"));
        let over =
            RawSubscriptions { max_listeners: Some(4), max_per_principal: Some(5), ..Default::default() };
        assert!(subscriptions(over).unwrap_err().to_string().contains("at most subscriptions.max_listeners"));
        let small = RawSubscriptions { max_listeners: Some(4), ..Default::default() };
        let small = subscriptions(small).unwrap();
        assert_eq!((small.max_per_principal, small.max_sessions), (4, 4), "each capped by the listeners");
        let none = RawSubscriptions { max_sessions: Some(0), ..Default::default() };
        assert!(subscriptions(none).unwrap_err().to_string().contains("subscriptions.max_sessions"));
    }
}
