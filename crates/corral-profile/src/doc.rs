//! Typed reading of a parsed TOML document: every value read keeps its key
//! path (`mount[2].dst`) and location, and every mismatch becomes an error
//! that says what was expected and what was found.

use crate::error::{invalid, Location, ProfileError, Source};
use toml_edit::{ArrayOfTables, Item, TableLike, Value};

/// A value read from a file, with where it was read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct L<T> {
    pub v: T,
    pub at: Location,
    /// Dotted key path, e.g. `env.set.PATH`.
    pub key: String,
}

impl<T> L<T> {
    pub fn invalid(&self, expected: impl Into<String>, found: impl Into<String>) -> ProfileError {
        invalid(&self.at, &self.key, expected, found)
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> L<U> {
        L {
            v: f(self.v),
            at: self.at,
            key: self.key,
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Node<'a> {
    Value(&'a Value),
    Table(&'a toml_edit::Table),
    Tables(&'a ArrayOfTables),
    Nothing,
}

impl<'a> From<&'a Item> for Node<'a> {
    fn from(item: &'a Item) -> Self {
        match item {
            Item::Value(v) => Node::Value(v),
            Item::Table(t) => Node::Table(t),
            Item::ArrayOfTables(a) => Node::Tables(a),
            Item::None => Node::Nothing,
        }
    }
}

/// What a node is, for "found ..." in error messages.
pub(crate) fn describe(node: Node<'_>) -> String {
    match node {
        Node::Value(Value::String(s)) => format!("string {:?}", s.value()),
        Node::Value(Value::Integer(i)) => format!("integer {}", i.value()),
        Node::Value(Value::Float(x)) => format!("float {}", x.value()),
        Node::Value(Value::Boolean(b)) => format!("boolean {}", b.value()),
        Node::Value(Value::Datetime(d)) => format!("date-time {}", d.value()),
        Node::Value(Value::Array(_)) => "an array".into(),
        Node::Value(Value::InlineTable(_)) | Node::Table(_) => "a table".into(),
        Node::Tables(_) => "an array of tables".into(),
        Node::Nothing => "nothing".into(),
    }
}

/// One value in a table (or array) being read.
pub(crate) struct Entry<'a> {
    pub src: Source<'a>,
    pub key: String,
    pub key_at: Location,
    pub node: Node<'a>,
}

impl<'a> Entry<'a> {
    /// The value's location (the key's for values without a span).
    pub fn at(&self) -> Location {
        let span = match self.node {
            Node::Value(v) => v.span(),
            Node::Table(t) => t.span(),
            Node::Tables(a) => a.span(),
            Node::Nothing => None,
        };
        span.map_or_else(|| self.key_at.clone(), |s| self.src.at(Some(s)))
    }

    pub fn wrong_type(&self, expected: &str) -> ProfileError {
        invalid(&self.at(), &self.key, expected, describe(self.node))
    }

    fn located<T>(&self, v: T) -> L<T> {
        L {
            v,
            at: self.at(),
            key: self.key.clone(),
        }
    }

    pub fn value(&self) -> Option<&'a Value> {
        match self.node {
            Node::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The value as written in the file (e.g. `0o755`), when it has a span.
    pub fn raw(&self) -> Option<&'a str> {
        self.value()?.span().and_then(|s| self.src.text.get(s))
    }

    pub fn string(&self) -> Result<L<String>, ProfileError> {
        match self.value() {
            Some(Value::String(s)) => Ok(self.located(s.value().clone())),
            _ => Err(self.wrong_type("a string")),
        }
    }

    pub fn integer(&self) -> Result<L<i64>, ProfileError> {
        match self.value() {
            Some(Value::Integer(i)) => Ok(self.located(*i.value())),
            _ => Err(self.wrong_type("an integer")),
        }
    }

    pub fn boolean(&self) -> Result<L<bool>, ProfileError> {
        match self.value() {
            Some(Value::Boolean(b)) => Ok(self.located(*b.value())),
            _ => Err(self.wrong_type("a boolean (true or false)")),
        }
    }

    pub fn table(&self) -> Result<Table<'a>, ProfileError> {
        let inner: &'a dyn TableLike = match self.node {
            Node::Table(t) => t,
            Node::Value(Value::InlineTable(t)) => t,
            _ => return Err(self.wrong_type("a table")),
        };
        Ok(Table {
            src: self.src,
            path: self.key.clone(),
            at: self.at(),
            inner,
        })
    }

    /// An array whose elements are all strings.
    pub fn strings(&self) -> Result<Vec<L<String>>, ProfileError> {
        self.elements("an array of strings")?
            .iter()
            .map(Entry::string)
            .collect()
    }

    /// `[[name]]` tables, or an array of inline tables.
    pub fn tables(&self) -> Result<Vec<Table<'a>>, ProfileError> {
        if let Node::Tables(a) = self.node {
            return Ok(a
                .iter()
                .enumerate()
                .map(|(i, t)| Table {
                    src: self.src,
                    path: format!("{}[{i}]", self.key),
                    at: t
                        .span()
                        .map_or_else(|| self.key_at.clone(), |s| self.src.at(Some(s))),
                    inner: t,
                })
                .collect());
        }
        self.elements("an array of tables")?
            .iter()
            .map(Entry::table)
            .collect()
    }

    fn elements(&self, expected: &str) -> Result<Vec<Entry<'a>>, ProfileError> {
        let Some(Value::Array(array)) = self.value() else {
            return Err(self.wrong_type(expected));
        };
        Ok(array
            .iter()
            .enumerate()
            .map(|(i, v)| Entry {
                src: self.src,
                key: format!("{}[{i}]", self.key),
                key_at: self.key_at.clone(),
                node: Node::Value(v),
            })
            .collect())
    }
}

/// A table being read.
pub(crate) struct Table<'a> {
    pub src: Source<'a>,
    /// Dotted path of the table; empty for the document root.
    pub path: String,
    pub at: Location,
    pub inner: &'a dyn TableLike,
}

impl<'a> Table<'a> {
    pub fn root(src: Source<'a>, table: &'a toml_edit::Table) -> Self {
        Table {
            src,
            path: String::new(),
            at: src.at(Some(0..0)),
            inner: table,
        }
    }

    pub fn get(&self, key: &str) -> Option<Entry<'a>> {
        let (k, item) = self.inner.get_key_value(key)?;
        Some(Entry {
            src: self.src,
            key: self.child_path(key),
            key_at: k
                .span()
                .map_or_else(|| self.at.clone(), |s| self.src.at(Some(s))),
            node: Node::from(item),
        })
    }

    /// Errors on the first key (in file order) that is not in `allowed`.
    pub fn check_keys(&self, allowed: &[&str]) -> Result<(), ProfileError> {
        for (name, _) in self.inner.iter() {
            if allowed.contains(&name) {
                continue;
            }
            let at = self.get(name).map_or_else(|| self.at.clone(), |e| e.key_at);
            let table = if self.path.is_empty() {
                "top level"
            } else {
                &self.path
            };
            return Err(invalid(
                &at,
                table,
                format!("one of the keys {}", allowed.join(", ")),
                format!("unknown key {name:?}"),
            ));
        }
        Ok(())
    }

    pub fn child_path(&self, key: &str) -> String {
        let key = quote_key(key);
        if self.path.is_empty() {
            key
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

/// A key as TOML would write it: bare when it can be, quoted otherwise.
pub(crate) fn quote_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.to_string()
    } else {
        toml::Value::String(key.to_string()).to_string()
    }
}

/// Convert a parsed value into a `toml::Value` (for limits, carried raw).
pub(crate) fn to_toml(node: Node<'_>) -> toml::Value {
    fn table(t: &dyn TableLike) -> toml::Value {
        toml::Value::Table(
            t.iter()
                .map(|(k, v)| (k.to_string(), to_toml(Node::from(v))))
                .collect(),
        )
    }
    match node {
        Node::Value(Value::String(s)) => toml::Value::String(s.value().clone()),
        Node::Value(Value::Integer(i)) => toml::Value::Integer(*i.value()),
        Node::Value(Value::Float(x)) => toml::Value::Float(*x.value()),
        Node::Value(Value::Boolean(b)) => toml::Value::Boolean(*b.value()),
        Node::Value(Value::Datetime(d)) => toml::Value::Datetime(*d.value()),
        Node::Value(Value::Array(a)) => {
            toml::Value::Array(a.iter().map(|v| to_toml(Node::Value(v))).collect())
        }
        Node::Value(Value::InlineTable(t)) => table(t),
        Node::Table(t) => table(t),
        Node::Tables(a) => toml::Value::Array(a.iter().map(|t| table(t)).collect()),
        Node::Nothing => toml::Value::Table(toml::Table::new()),
    }
}
