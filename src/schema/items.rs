//! One listed item (a tool, a prompt, a resource, a resource template) held against its
//! 2026-07-28 definition after the targeted repairs: an optional field the definition does not
//! allow is dropped (the item stays usable, and one malformed field would otherwise make a
//! strict client refuse the whole list), a required one that is wrong refuses the item.

use serde_json::{Map, Value};

use super::reason::{Refusal, Repair};
use super::spec::Def;

/// Why an item is refused, with the detail for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub reason: Refusal,
    pub detail: String,
}

/// The fields of `def` an item cannot do without, and the refusal each one's fault gives.
fn required(def: Def) -> &'static [(&'static str, Refusal)] {
    match def {
        Def::Tool => &[
            ("name", Refusal::NameInvalid),
            ("inputSchema", Refusal::InputSchemaInvalid),
            ("outputSchema", Refusal::OutputSchemaInvalid),
        ],
        Def::Prompt => &[("name", Refusal::NameInvalid)],
        Def::Resource => &[("uri", Refusal::UriInvalid), ("name", Refusal::NameInvalid)],
        Def::ResourceTemplate => &[("uriTemplate", Refusal::UriInvalid), ("name", Refusal::NameInvalid)],
        Def::ElicitForm | Def::ElicitUrl | Def::CreateMessage => &[],
    }
}

// === impl Refused ===

impl Refused {
    pub(crate) fn new(reason: Refusal, detail: impl Into<String>) -> Self {
        Self { reason, detail: detail.into() }
    }
}

/// Holds `item` against `def`: drops the optional fields it breaks (one
/// [`Repair::InvalidFieldDropped`] each, pushed on `repairs`), or refuses it when a required
/// field (or the item itself) is at fault.
pub(crate) fn conform(
    def: Def,
    item: &mut Map<String, Value>,
    repairs: &mut Vec<Repair>,
) -> Result<(), Refused> {
    let value = Value::Object(std::mem::take(item));
    let violations = def.violations(&value).unwrap_or_default();
    let Value::Object(taken) = value else { return Ok(()) };
    *item = taken;
    let mut dropped: Vec<String> = Vec::new();
    for v in violations {
        let top = top_field(&v.path);
        if let Some(&(_, reason)) = required(def).iter().find(|(field, _)| *field == top) {
            return Err(Refused::new(reason, format!("{}: {}", v.path, v.message)));
        }
        if top.is_empty() {
            // The item as a whole: a required field is missing.
            let reason = missing_required(def, item).unwrap_or(Refusal::NameInvalid);
            return Err(Refused::new(reason, v.message));
        }
        if !dropped.iter().any(|d| d == top) {
            dropped.push(top.to_owned());
        }
    }
    for field in dropped {
        item.remove(&field);
        repairs.push(Repair::InvalidFieldDropped);
    }
    Ok(())
}

/// The refusal of the first required field `item` lacks.
fn missing_required(def: Def, item: &Map<String, Value>) -> Option<Refusal> {
    required(def)
        .iter()
        .find(|(field, _)| !item.contains_key(*field) && *field != "outputSchema")
        .map(|r| r.1)
}

/// `"/annotations/title"` → `"annotations"`; `""` → `""`. JSON pointer escapes (`~1`, `~0`) are
/// left as they are: no field of a definition has them.
fn top_field(path: &str) -> &str {
    path.strip_prefix('/').map_or("", |rest| rest.split('/').next().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn bad_optional_fields_are_dropped_and_bad_required_ones_refuse() {
        let mut repairs = Vec::new();
        let mut prompt = object(json!({"name": "p", "arguments": "style", "title": 3}));
        assert_eq!(conform(Def::Prompt, &mut prompt, &mut repairs), Ok(()));
        assert_eq!(prompt, object(json!({"name": "p"})));
        assert_eq!(repairs, [Repair::InvalidFieldDropped, Repair::InvalidFieldDropped]);

        let mut nameless = object(json!({"description": "no name"}));
        let refused = conform(Def::Prompt, &mut nameless, &mut repairs).unwrap_err();
        assert_eq!(refused.reason, Refusal::NameInvalid);
        let mut no_uri = object(json!({"name": "r"}));
        assert_eq!(
            conform(Def::Resource, &mut no_uri, &mut repairs).unwrap_err().reason,
            Refusal::UriInvalid
        );
        let mut bad_uri = object(json!({"name": "r", "uri": 5}));
        assert_eq!(
            conform(Def::Resource, &mut bad_uri, &mut repairs).unwrap_err().reason,
            Refusal::UriInvalid
        );
        let mut template =
            object(json!({"name": "t", "uriTemplate": "file:///{path}", "icons": [{"src": 1}]}));
        repairs.clear();
        assert_eq!(conform(Def::ResourceTemplate, &mut template, &mut repairs), Ok(()));
        assert!(!template.contains_key("icons"));
        assert_eq!(repairs, [Repair::InvalidFieldDropped]);
    }

    #[test]
    fn top_fields_are_read_from_pointers() {
        assert_eq!(top_field("/annotations/title"), "annotations");
        assert_eq!(top_field("/name"), "name");
        assert_eq!(top_field(""), "");
    }
}
