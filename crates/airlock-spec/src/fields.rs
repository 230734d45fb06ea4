//! Reading a mapping node field by field, pushing every problem onto a [`Diag`].
//!
//! Each accessor reports a wrong type or a missing required key at the key's own position and
//! returns `None`, so a validator continues and finds the next problem too.

use std::str::FromStr;

use crate::diag::{Diag, child};
use crate::policy::UnknownWord;
use crate::tree::{Entry, Node, NodeValue, Pos};

/// A mapping under validation: its entries, its key path and its position.
pub(crate) struct Fields<'n> {
    entries: &'n [Entry],
    path: String,
    at: Pos,
}

impl<'n> Fields<'n> {
    /// Opens `node` as a mapping whose keys must be among `allowed`; each unknown key is a
    /// problem. `None` (with a problem) when `node` is not a mapping.
    pub(crate) fn open(node: &'n Node, path: &str, allowed: &[&str], d: &mut Diag) -> Option<Self> {
        let fields = Self::open_free(node, path, d)?;
        for entry in fields.entries {
            if !allowed.contains(&entry.key.as_str()) {
                d.push(
                    entry.key_at,
                    &child(path, &entry.key),
                    format!(
                        "unknown key `{}`; expected one of: {}",
                        entry.key,
                        allowed.join(", ")
                    ),
                );
            }
        }
        Some(fields)
    }

    /// Opens `node` as a mapping whose keys are free names (`parameters`, `properties`).
    pub(crate) fn open_free(node: &'n Node, path: &str, d: &mut Diag) -> Option<Self> {
        let NodeValue::Map(entries) = &node.value else {
            d.push(
                node.at,
                path,
                format!("expected a mapping, found {}", node.kind()),
            );
            return None;
        };
        Some(Self {
            entries,
            path: path.to_owned(),
            at: node.at,
        })
    }

    /// The entries in file order (for mappings whose keys are names, like `parameters`).
    pub(crate) fn entries(&self) -> &'n [Entry] {
        self.entries
    }

    /// The position of the mapping itself.
    pub(crate) fn at(&self) -> Pos {
        self.at
    }

    /// The key path of the mapping itself.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The key path of `key` inside this mapping.
    pub(crate) fn key(&self, key: &str) -> String {
        child(&self.path, key)
    }

    /// Where `key` is written, or where the mapping starts when it is absent.
    pub(crate) fn key_at(&self, key: &str) -> Pos {
        self.entry(key).map_or(self.at, |e| e.key_at)
    }

    fn entry(&self, key: &str) -> Option<&'n Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// The value of `key`, if present (a YAML `null` counts as absent).
    pub(crate) fn get(&self, key: &str) -> Option<&'n Node> {
        self.entry(key)
            .map(|e| &e.value)
            .filter(|v| v.value != NodeValue::Null)
    }

    /// Whether `key` is written at all, even as `null`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// The value of a required `key`; a problem when it is missing.
    pub(crate) fn required(&self, key: &str, d: &mut Diag) -> Option<&'n Node> {
        let value = self.get(key);
        if value.is_none() {
            d.push(
                self.key_at(key),
                &self.key(key),
                format!("`{key}` is required"),
            );
        }
        value
    }

    /// A required string.
    pub(crate) fn req_str(&self, key: &str, d: &mut Diag) -> Option<String> {
        self.required(key, d)
            .and_then(|node| self.as_string(key, node, d))
    }

    /// An optional string.
    pub(crate) fn opt_str(&self, key: &str, d: &mut Diag) -> Option<String> {
        self.get(key).and_then(|node| self.as_string(key, node, d))
    }

    fn as_string(&self, key: &str, node: &Node, d: &mut Diag) -> Option<String> {
        match node.as_str() {
            Some(s) => Some(s.to_owned()),
            None => {
                d.push(
                    self.key_at(key),
                    &self.key(key),
                    format!("expected a string, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// An optional enum word (`approval: once`); `Err(())` when it is present but wrong.
    pub(crate) fn word<T>(&self, key: &str, d: &mut Diag) -> Result<Option<T>, ()>
    where
        T: FromStr<Err = UnknownWord>,
    {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        let Some(text) = self.as_string(key, node, d) else {
            return Err(());
        };
        text.parse().map(Some).map_err(|e: UnknownWord| {
            d.push(self.key_at(key), &self.key(key), e.to_string());
        })
    }

    /// An optional boolean written as `true` or `false` exactly (not `0`, not `"false"`).
    pub(crate) fn opt_bool(&self, key: &str, d: &mut Diag) -> Result<Option<bool>, ()> {
        match self.get(key).map(|n| (n, &n.value)) {
            None => Ok(None),
            Some((_, NodeValue::Bool(b))) => Ok(Some(*b)),
            Some((node, _)) => {
                d.push(
                    self.key_at(key),
                    &self.key(key),
                    format!("expected `true` or `false`, found {}", node.kind()),
                );
                Err(())
            }
        }
    }

    /// An optional list; each item is returned with its key path.
    pub(crate) fn opt_list(&self, key: &str, d: &mut Diag) -> Option<Vec<(String, &'n Node)>> {
        let node = self.get(key)?;
        let NodeValue::Seq(items) = &node.value else {
            d.push(
                self.key_at(key),
                &self.key(key),
                format!("expected a list, found {}", node.kind()),
            );
            return None;
        };
        let path = self.key(key);
        Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| (format!("{path}[{i}]"), item))
                .collect(),
        )
    }

    /// An optional list of strings.
    pub(crate) fn opt_str_list(&self, key: &str, d: &mut Diag) -> Option<Vec<(String, Pos)>> {
        let items = self.opt_list(key, d)?;
        let mut out = Vec::with_capacity(items.len());
        for (path, item) in items {
            match item.as_str() {
                Some(s) => out.push((s.to_owned(), item.at)),
                None => d.push(
                    item.at,
                    &path,
                    format!("expected a string, found {}", item.kind()),
                ),
            }
        }
        Some(out)
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_u64(&self, key: &str, d: &mut Diag) -> Option<u64> {
        let node = self.get(key)?;
        match node.value {
            NodeValue::Int(i) if i >= 0 => u64::try_from(i).ok(),
            _ => {
                d.push(
                    self.key_at(key),
                    &self.key(key),
                    format!("expected a non-negative integer, found {}", node.kind()),
                );
                None
            }
        }
    }
}
