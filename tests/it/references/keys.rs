//! Every configuration key the gateway reads, derived from its serde structs
//! ([`mrtr_gateway::config::raw::RawConfig`]) rather than listed by hand: a deserializer that
//! answers each struct with all of its field names and records the path of every field that is
//! not itself a struct. A key added to, renamed in or removed from `src/config/raw.rs` changes
//! this list without an edit here.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use mrtr_gateway::config::raw::RawConfig;

/// What a key holds, which decides how it can be given in the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A number, string or boolean (or a value of either shape, such as `upstream.command`).
    Scalar,
    /// A list of plain values.
    List,
    /// A table of names to values (`upstream.headers.<name>`).
    Map,
    /// A list of tables (`[[auth.rules]]`): the file only.
    Tables,
}

/// Every key of the configuration file, dotted, with what it holds.
pub(crate) fn config_keys() -> BTreeMap<String, Kind> {
    let found = RefCell::new(BTreeMap::new());
    RawConfig::deserialize(Value { path: String::new(), found: &found })
        .expect("the key collector answers every shape the raw configuration asks for");
    found.into_inner()
}

/// The deserializer of one value at `path`.
struct Value<'a> {
    path: String,
    found: &'a RefCell<BTreeMap<String, Kind>>,
}

type Error = de::value::Error;

impl Value<'_> {
    fn record(&self, kind: Kind) {
        let mut found = self.found.borrow_mut();
        // A list whose element turned out to be a table stays a list of tables.
        if found.get(&self.path) != Some(&Kind::Tables) {
            found.insert(self.path.clone(), kind);
        }
    }

    fn child(&self, field: &str) -> String {
        if self.path.is_empty() {
            field.to_owned()
        } else {
            format!("{}.{field}", self.path)
        }
    }
}

/// The fields of one struct, each answered with a value at its own path.
struct Fields<'a> {
    parent: &'a Value<'a>,
    fields: std::slice::Iter<'static, &'static str>,
    current: Option<&'static str>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.next() else { return Ok(None) };
        self.current = Some(field);
        seed.deserialize(field.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let field = self.current.take().unwrap_or_default();
        seed.deserialize(Value { path: self.parent.child(field), found: self.parent.found })
    }
}

/// One element of a list, at `path`: a table makes the list a list of tables.
struct Element<'a> {
    list: &'a Value<'a>,
    given: bool,
}

impl<'de> SeqAccess<'de> for Element<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if std::mem::replace(&mut self.given, true) {
            return Ok(None);
        }
        let element = ElementValue { list: self.list };
        seed.deserialize(element).map(Some)
    }
}

/// The value of a list's element: a plain value, or a table (then the list is of tables).
struct ElementValue<'a> {
    list: &'a Value<'a>,
}

impl<'de> de::Deserializer<'de> for ElementValue<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.list.found.borrow_mut().insert(self.list.path.clone(), Kind::Tables);
        visitor.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(String, String)>()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

impl<'de> de::Deserializer<'de> for Value<'_> {
    type Error = Error;

    /// A value of either shape (an untagged enum): a string is one of them in every case here.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::Scalar);
        visitor.visit_str("x")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::Scalar);
        visitor.visit_bool(false)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::Scalar);
        visitor.visit_u64(1)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::Scalar);
        visitor.visit_f64(1.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::List);
        visitor.visit_seq(Element { list: &self, given: false })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record(Kind::Map);
        visitor.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(String, String)>()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(Fields { parent: &self, fields: fields.iter(), current: None })
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u128 f32 char str string bytes byte_buf unit unit_struct
        newtype_struct tuple tuple_struct enum identifier ignored_any
    }
}

#[test]
fn the_collector_finds_keys_of_every_shape() {
    let keys = config_keys();
    assert_eq!(keys.get("front.listen"), Some(&Kind::Scalar));
    assert_eq!(keys.get("upstream.tls.ca_file"), Some(&Kind::Scalar), "a table's keys");
    assert_eq!(keys.get("limits.principal.rate_per_sec"), Some(&Kind::Scalar));
    assert_eq!(keys.get("upstream.command"), Some(&Kind::Scalar), "a list or a line");
    assert_eq!(keys.get("upstream.env_passthrough"), Some(&Kind::List));
    assert_eq!(keys.get("upstream.headers"), Some(&Kind::Map));
    assert_eq!(keys.get("auth.rules"), Some(&Kind::Tables));
    assert!(!keys.contains_key("upstream.tls"), "a table is not a key of its own");
    assert!(!keys.keys().any(|k| k.starts_with("auth.rules.")), "a rule's fields are the file's only");
}
