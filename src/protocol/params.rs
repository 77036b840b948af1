//! A 2026-07-28 request's params as the client sent them: the JSON text of the object, its
//! members (and those of its `_meta`) indexed, never built into a tree on the way through.
//!
//! Why: the front reads a few members of every request (the tool's name, `_meta`'s envelope,
//! `requestState`) and sends the rest upstream as it came. Parsed into a `serde_json::Value`,
//! a plain call's params cost a dozen allocations and a walk to build, and a second walk to
//! write upstream; indexed, they cost a string and a vector, filled in the one pass that
//! parses the message ([`Read`]), and what goes upstream is copied from that text
//! ([`Params::write`], giving [`JsonText`]): `arguments` above all, whatever its size. A reader
//! that wants the whole tree (a list method's relay, a subscription's filter, the tasks bridge)
//! asks for it with [`Params::tree`], built once from the members.
//!
//! A member named twice is refused, at the top of the params and of `_meta`: the gateway would
//! read one occurrence while the server, which receives the text, might read the other. Where
//! the gateway reads deeper (the arguments a header mirrors, those a state binds),
//! [`tree_without_repeats`] refuses them at any depth.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::protocol::quote::quoted;

/// The `_meta` member, indexed along with the params.
pub const META: &str = "_meta";

/// Why params cannot be indexed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ParamsError {
    #[error("params must be an object")]
    NotObject,
    /// JSON that is valid yet no tree can hold: nested past serde's depth limit, or a number
    /// out of range. Only a reader that builds the tree meets it; the text goes upstream as is.
    #[error("params cannot be read: {0}")]
    Unreadable(String),
    /// The member's path (`params."name"`, `params._meta."k"`, or the key alone deeper down).
    #[error("{0} appears more than once")]
    Repeated(String),
}

/// A text of the params: a slice of the client's JSON, or one the gateway wrote.
#[derive(Debug, Clone)]
enum Text {
    At(Range<usize>),
    Owned(Box<str>),
}

/// One member of an object: its key (unescaped) and its value's JSON text.
#[derive(Debug, Clone)]
struct Member {
    key: Text,
    value: Text,
}

/// A request's params object, indexed (see the module doc). Read from a message, it is built
/// in the one pass that parses the message: the members' text is copied into `raw` as they are
/// read, and indexed there.
pub struct Params {
    /// The object's text: its members as they came, one comma between each two.
    raw: String,
    members: Vec<Member>,
    /// `_meta`'s members, when it is an object.
    meta: Option<Vec<Member>>,
    tree: OnceLock<Result<Value, ParamsError>>,
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Params").field(&self.raw).finish()
    }
}

// === impl Params ===

impl Params {
    /// Indexes the params object `raw`; a value of another type, or a member (of the params or
    /// of `_meta`) named twice, is refused.
    pub fn index(raw: &RawValue) -> Result<Self, ParamsError> {
        serde_json::from_str::<Read>(raw.get()).map_err(|_| ParamsError::NotObject)?.0
    }

    /// Refuses a member named twice, in the params or in `_meta`.
    fn checked(self) -> Result<Self, ParamsError> {
        refuse_repeats(&self.raw, &self.members, "params.")?;
        if let Some(meta) = &self.meta {
            refuse_repeats(&self.raw, meta, "params._meta.")?;
        }
        Ok(self)
    }

    /// Indexes params given as a tree, for tests.
    #[cfg(test)]
    pub fn of_value(value: &Value) -> Result<Self, ParamsError> {
        let raw = serde_json::value::to_raw_value(value).map_err(|_| ParamsError::NotObject)?;
        Self::index(&raw)
    }

    /// The JSON text of member `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(&self.members, key)
    }

    /// The JSON text of `_meta`'s member `key`.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.find(self.meta.as_deref()?, key)
    }

    /// True when `_meta` is present and an object.
    pub fn meta_is_object(&self) -> bool {
        self.meta.is_some()
    }

    /// Member `key` when it is a string; [`NotAString`] when it is present and of another type
    /// (`null` included).
    pub fn str(&self, key: &str) -> Result<Option<Cow<'_, str>>, NotAString> {
        self.get(key).map(string).transpose()
    }

    /// Member `key` read as `T`; `None` when absent, `Err` when it does not read as one.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self, key: &str) -> Option<serde_json::Result<T>> {
        self.get(key).map(serde_json::from_str)
    }

    /// Removes member `key`; returns whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.members.len();
        let raw = self.raw.as_str();
        self.members.retain(|m| !is_key(raw, &m.key, key));
        self.tree = OnceLock::new();
        self.members.len() != before
    }

    /// Sets member `key` to the string `value` (in place when present, else appended).
    pub fn set_str(&mut self, key: &str, value: &str) {
        let json = Text::Owned(Value::from(value).to_string().into_boxed_str());
        let raw = self.raw.as_str();
        match self.members.iter_mut().find(|m| is_key(raw, &m.key, key)) {
            Some(m) => m.value = json,
            None => self.members.push(Member { key: Text::Owned(key.into()), value: json }),
        }
        self.tree = OnceLock::new();
    }

    /// The params as a tree, built once from the members (with what was removed or set).
    /// [`ParamsError::Unreadable`] when a member's JSON is more than a tree can hold.
    pub fn tree(&self) -> Result<&Value, ParamsError> {
        let built = self.tree.get_or_init(|| {
            let raw = self.raw.as_str();
            let members = self.members.iter().map(|m| {
                let value = serde_json::from_str(text(raw, &m.value))
                    .map_err(|e| ParamsError::Unreadable(format!("{}: {e}", quoted(text(raw, &m.key)))))?;
                Ok((text(raw, &m.key).to_owned(), value))
            });
            members.collect::<Result<Map<String, Value>, ParamsError>>().map(Value::Object)
        });
        built.as_ref().map_err(Clone::clone)
    }

    /// Writes the params as a JSON object: the members `keep` keeps, in the client's order,
    /// and `_meta` with only the members `keep_meta` keeps (left out when none is kept).
    /// Each value is copied as it came.
    pub fn write(&self, keep: impl Fn(&str) -> bool, keep_meta: impl Fn(&str) -> bool) -> JsonText {
        let raw = self.raw.as_str();
        let mut out = String::with_capacity(raw.len());
        out.push('{');
        for m in &self.members {
            let key = text(raw, &m.key);
            if !keep(key) {
                continue;
            }
            if key == META {
                if let Some(meta) = &self.meta {
                    let mut kept = meta.iter().filter(|m| keep_meta(text(raw, &m.key))).peekable();
                    if kept.peek().is_some() {
                        push_member(&mut out, raw, &m.key, None);
                        out.push('{');
                        for member in kept {
                            push_member(&mut out, raw, &member.key, Some(&member.value));
                        }
                        out.push('}');
                    }
                    continue;
                }
            }
            push_member(&mut out, raw, &m.key, Some(&m.value));
        }
        out.push('}');
        // Each member was read as JSON and is copied whole, and the keys are JSON strings.
        JsonText(out)
    }

    fn find<'a>(&'a self, members: &'a [Member], key: &str) -> Option<&'a str> {
        let raw = self.raw.as_str();
        members.iter().find(|m| is_key(raw, &m.key, key)).map(|m| text(raw, &m.value))
    }
}

/// JSON text known to be valid: read as JSON, or written from pieces that were. It is sent as
/// it is, never parsed again to be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> Self {
        Self(Box::<str>::from(raw).into_string())
    }
}

impl serde::Serialize for JsonText {
    /// As the JSON it is (checked once more here: only the cluster link writes it this way).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw = RawValue::from_string(self.0.clone()).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Self::from)
    }
}

/// `json` as a tree, refused when an object in it, at any depth, names a member twice.
pub fn tree_without_repeats(json: &str) -> Result<Value, ParamsError> {
    let mut de = serde_json::Deserializer::from_str(json);
    let tree = de::DeserializeSeed::deserialize(Strict, &mut de).map_err(|e| {
        let text = e.to_string();
        match text.strip_prefix(REPEATED) {
            Some(rest) => {
                let key = rest.split(" at line").next().unwrap_or(rest);
                ParamsError::Repeated(format!("member {key}"))
            }
            None => ParamsError::NotObject,
        }
    })?;
    de.end().map_err(|_| ParamsError::NotObject)?;
    Ok(tree)
}

const REPEATED: &str = "repeated member ";

/// Builds a tree as `serde_json::Value` does, failing on a repeated member.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> de::DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
            if out.contains_key(&key) {
                let key = quoted(&key);
                return Err(de::Error::custom(format_args!("{REPEATED}{key}")));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A member present but not a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAString;

/// `json` (one JSON value's text) as a string, borrowed when it has no escapes.
pub fn string(json: &str) -> Result<Cow<'_, str>, NotAString> {
    if !json.starts_with('"') {
        return Err(NotAString);
    }
    // A valid JSON string without a backslash is its text between the quotes.
    if !json.contains('\\') {
        return json.get(1..json.len() - 1).map(Cow::Borrowed).ok_or(NotAString);
    }
    let mut de = serde_json::Deserializer::from_str(json);
    de.deserialize_str(CowStr).map_err(|_| NotAString)
}

/// Appends `"key":value` (or `"key":` when `value` is `None`), with a comma before it unless
/// it is the object's first member.
fn push_member(out: &mut String, raw: &str, key: &Text, value: Option<&Text>) {
    if !out.ends_with('{') {
        out.push(',');
    }
    match key {
        // A key read without a copy has no escapes: its text is its JSON string's content.
        Text::At(range) => {
            out.push('"');
            out.push_str(&raw[range.clone()]);
            out.push('"');
        }
        Text::Owned(key) => out.push_str(&Value::from(&**key).to_string()),
    }
    out.push(':');
    if let Some(value) = value {
        out.push_str(text(raw, value));
    }
}

/// Whether `t` is the key `key`: lengths first, then bytes (every lookup of every request
/// comes here, most of them for a key of another length).
fn is_key(raw: &str, t: &Text, key: &str) -> bool {
    match t {
        Text::At(range) => {
            range.len() == key.len() && raw.as_bytes().get(range.clone()) == Some(key.as_bytes())
        }
        Text::Owned(k) => **k == *key,
    }
}

fn text<'a>(raw: &'a str, t: &'a Text) -> &'a str {
    match t {
        Text::At(range) => &raw[range.clone()],
        Text::Owned(s) => s,
    }
}

/// Appends `key` to `raw` as a JSON string and a colon; where it lies (or, escaped, the key).
fn push_key(raw: &mut String, key: Cow<'_, str>) -> Text {
    let key = match key {
        // Without escapes, a key's text is its JSON string's content.
        Cow::Borrowed(k) => {
            raw.push('"');
            let start = raw.len();
            raw.push_str(k);
            raw.push('"');
            Text::At(start..raw.len() - 1)
        }
        Cow::Owned(k) => {
            raw.push_str(&Value::from(k.as_str()).to_string());
            Text::Owned(k.into_boxed_str())
        }
    };
    raw.push(':');
    key
}

/// Appends the object `map` is reading to `raw`, member by member, and indexes its members
/// there: each key is written by [`push_key`], then `value` appends the member's value (it is
/// given the key, as written).
fn read_object<'de, A: MapAccess<'de>>(
    map: &mut A,
    raw: &mut String,
    mut value: impl FnMut(&mut A, &mut String, &Text) -> Result<(), A::Error>,
) -> Result<Vec<Member>, A::Error> {
    raw.push('{');
    let mut members = Vec::with_capacity(4);
    while let Some(key) = map.next_key_seed(CowStr)? {
        if !members.is_empty() {
            raw.push(',');
        }
        let key = push_key(raw, key);
        let start = raw.len();
        value(map, raw, &key)?;
        members.push(Member { key, value: Text::At(start..raw.len()) });
    }
    raw.push('}');
    Ok(members)
}

/// Reads `_meta` into the params' text in the same pass, indexing its members there. A
/// `_meta` that is not an object is written as `null`: it is refused either way.
struct MetaInto<'r>(&'r mut String);

impl<'de> de::DeserializeSeed<'de> for MetaInto<'_> {
    type Value = Option<Vec<Member>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaInto<'_> {
    type Value = Option<Vec<Member>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("_meta")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let members = read_object(&mut map, self.0, |map, raw, _| {
            raw.push_str(map.next_value::<&'de RawValue>()?.get());
            Ok(())
        })?;
        Ok(Some(members))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.push_str("null");
        Ok(None)
    }
}

/// A repeated key among `members` (of an object whose text is in `raw`), named under `path`.
fn refuse_repeats(raw: &str, members: &[Member], path: &str) -> Result<(), ParamsError> {
    let repeated = |k: &str| ParamsError::Repeated(format!("{path}{}", quoted(k)));
    // Few members, the usual case: compared pairwise; many: sorted, so that a large object
    // costs n log n, not n².
    if members.len() <= 16 {
        for (i, m) in members.iter().enumerate() {
            let key = text(raw, &m.key);
            if members[..i].iter().any(|o| text(raw, &o.key) == key) {
                return Err(repeated(key));
            }
        }
        return Ok(());
    }
    let mut keys: Vec<&str> = members.iter().map(|m| text(raw, &m.key)).collect();
    keys.sort_unstable();
    match keys.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(repeated(w[0])),
        None => Ok(()),
    }
}

/// Params read from a message: indexed, or why they cannot be. Reading never fails on params
/// of the wrong shape, so that the message still parses: the front refuses them with its own
/// error (-32602), and a legacy client's message, relayed as its bytes, is not judged at all.
pub struct Read(pub Result<Params, ParamsError>);

impl<'de> Deserialize<'de> for Read {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ReadVisitor)
    }
}

struct ReadVisitor;

impl<'de> Visitor<'de> for ReadVisitor {
    type Value = Read;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("params")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
        // Sized for a usual call's params at once; a larger one grows it.
        let mut raw = String::with_capacity(256);
        let mut meta = None;
        let members = read_object(&mut map, &mut raw, |map, raw, key| {
            if is_key(raw, key, META) {
                meta = map.next_value_seed(MetaInto(raw))?;
            } else {
                raw.push_str(map.next_value::<&'de RawValue>()?.get());
            }
            Ok(())
        })?;
        Ok(Read(Params { raw, members, meta, tree: OnceLock::new() }.checked()))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Read, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Read, E> {
        Ok(Read(Err(ParamsError::NotObject)))
    }
}

/// A string, borrowed from the input when it has no escapes.
#[derive(Clone, Copy)]
struct CowStr;

impl<'de> de::DeserializeSeed<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }
}

#[cfg(test)]
mod tests;
