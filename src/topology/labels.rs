//! A node's labels: a sorted list of key/value pairs whose strings can be shared across
//! nodes, and the interner a cluster state shares them through.
//!
//! Most label keys repeat on every node and most values on many (zone, instance type,
//! block, rack), so a cluster state keeps one copy of each string ([`LabelTexts`]) and a node
//! keeps only pointers to them: about 32 bytes per label instead of two owned strings and a
//! map node.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Index;
use std::sync::Arc;

/// A node's `metadata.labels`, sorted by key, each key once. Cloning shares the list (a node
/// updated in its capacity only keeps its labels for one reference count).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeLabels(Arc<[(Arc<str>, Arc<str>)]>);

impl NodeLabels {
    /// The value of `key`, if the node has that label.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).ok().map(|i| &*self.0[i].1)
    }

    /// Whether the node has a label `key` (with any value, empty included).
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// The labels in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// How many labels the node has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the node has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key` to `value`, returning the value it replaces.
    pub fn insert(&mut self, key: &str, value: &str) -> Option<Arc<str>> {
        let mut pairs = self.0.to_vec();
        let replaced = match self.position(key) {
            Ok(i) => Some(std::mem::replace(&mut pairs[i].1, value.into())),
            Err(i) => {
                pairs.insert(i, (key.into(), value.into()));
                None
            }
        };
        self.0 = pairs.into();
        replaced
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Arc<str>> {
        let i = self.position(key).ok()?;
        let mut pairs = self.0.to_vec();
        let (_, value) = pairs.remove(i);
        self.0 = pairs.into();
        Some(value)
    }

    /// The same labels with every key and value replaced by the interner's copy.
    pub fn interned(self, texts: &mut LabelTexts) -> Self {
        Self(
            (self.0.iter())
                .map(|(key, value)| (texts.intern(key), texts.intern(value)))
                .collect(),
        )
    }

    /// Whether both hold the very same texts, pair by pair (each key and value the same shared
    /// allocation): equal labels, known without reading a text.
    pub fn same_texts_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || self.0.len() == other.0.len()
                && (self.0.iter().zip(other.0.iter()))
                    .all(|((k, v), (ok, ov))| Arc::ptr_eq(k, ok) && Arc::ptr_eq(v, ov))
    }

    /// Whether every key and value is the same allocation as in `texts` (tests).
    pub fn shares_texts_with(&self, texts: &LabelTexts) -> bool {
        self.0.iter().all(|(k, v)| {
            [k, v]
                .into_iter()
                .all(|s| texts.texts.get(s).is_some_and(|t| Arc::ptr_eq(t, s)))
        })
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
    }
}

/// One label key looked up on node after node. A cluster's nodes carry the same keys, so the
/// key is usually where it was on the node before: that position is tried first, and when the
/// key there is the same shared text as last time (nodes of one cluster state share their
/// keys) no text is compared at all; otherwise one comparison, and a search only on a miss.
#[derive(Debug, Clone)]
pub struct LabelLookup {
    key: Box<str>,
    /// Where the key was found last, and the key text found there.
    last: Option<(usize, Arc<str>)>,
}

impl LabelLookup {
    /// A lookup of `key`.
    pub fn new(key: &str) -> Self {
        Self {
            key: key.into(),
            last: None,
        }
    }

    /// The value of the key on `labels`, as the shared text the labels hold.
    pub fn value_in<'l>(&mut self, labels: &'l NodeLabels) -> Option<&'l Arc<str>> {
        if let Some((at, text)) = &self.last
            && let Some((k, v)) = labels.0.get(*at)
            && (Arc::ptr_eq(k, text) || **k == *self.key)
        {
            return Some(v);
        }
        let at = labels.position(&self.key).ok()?;
        let (k, v) = &labels.0[at];
        self.last = Some((at, Arc::clone(k)));
        Some(v)
    }
}

impl<K: Into<Arc<str>>, V: Into<Arc<str>>> FromIterator<(K, V)> for NodeLabels {
    /// Labels from pairs in any order; a key given twice keeps its last value, as a map's
    /// `insert` would.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut pairs: Vec<(Arc<str>, Arc<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // A stable sort keeps equal keys in input order; the last of each run wins.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(Arc<str>, Arc<str>)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match kept.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => kept.push(pair),
            }
        }
        Self(kept.into())
    }
}

impl From<BTreeMap<String, String>> for NodeLabels {
    fn from(map: BTreeMap<String, String>) -> Self {
        // Already sorted and unique.
        Self(map.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}

impl<K: Into<Arc<str>>, V: Into<Arc<str>>, const N: usize> From<[(K, V); N]> for NodeLabels {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl Index<&str> for NodeLabels {
    type Output = str;

    /// The value of `key`; panics when the node has no such label, as a map's index does.
    fn index(&self, key: &str) -> &str {
        match self.get(key) {
            Some(value) => value,
            None => panic!("node has no label {key:?}"),
        }
    }
}

impl fmt::Debug for NodeLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// One copy of every label key and value the nodes of a cluster state carry.
#[derive(Debug, Default)]
pub struct LabelTexts {
    texts: HashSet<Arc<str>, foldhash::fast::RandomState>,
    /// How many texts were kept after the last sweep of unused ones.
    kept_after_sweep: usize,
}

impl LabelTexts {
    /// Texts are swept once their number passes twice what the last sweep kept plus this.
    const SWEEP_SLACK: usize = 1024;

    /// The shared copy of `text`, added when new.
    pub fn intern(&mut self, text: &Arc<str>) -> Arc<str> {
        if let Some(shared) = self.texts.get(text) {
            return Arc::clone(shared);
        }
        self.sweep_if_grown();
        self.texts.insert(Arc::clone(text));
        Arc::clone(text)
    }

    /// How many texts are kept.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether no text is kept.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Drops the texts no node refers to any more, once the set has grown well past what
    /// the last sweep kept: label values that change over time (a timestamp, a version)
    /// cannot pile up, and the sweep's cost is spread over the insertions that made it due.
    fn sweep_if_grown(&mut self) {
        if self.texts.len() < 2 * self.kept_after_sweep + Self::SWEEP_SLACK {
            return;
        }
        self.sweep();
    }

    /// Drops every text only this set refers to.
    pub fn sweep(&mut self) {
        self.texts.retain(|t| Arc::strong_count(t) > 1);
        self.kept_after_sweep = self.texts.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> NodeLabels {
        pairs.iter().copied().collect()
    }

    #[test]
    fn labels_read_like_a_map_built_by_the_same_inserts() {
        let pairs = [
            ("zone", "a"),
            ("block", "b1"),
            ("rack", "r1"),
            ("zone", "b"),
            ("", ""),
        ];
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let from_pairs = labels(&pairs);
        assert_eq!(from_pairs, NodeLabels::from(map.clone()));
        assert_eq!(
            from_pairs.iter().collect::<Vec<_>>(),
            map.iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            from_pairs.get("zone"),
            Some("b"),
            "the last value of a key wins"
        );
        assert_eq!(from_pairs.get(""), Some(""));
        assert!(from_pairs.contains_key("rack") && !from_pairs.contains_key("host"));
        assert_eq!(&from_pairs["block"], "b1");
        assert_eq!(from_pairs.len(), 4);

        let mut edited = from_pairs.clone();
        assert_eq!(edited.insert("host", "h1"), None);
        assert_eq!(edited.insert("rack", "r2").as_deref(), Some("r1"));
        assert_eq!(edited.remove("zone").as_deref(), Some("b"));
        assert_eq!(edited.remove("zone"), None);
        assert_eq!(
            edited.iter().collect::<Vec<_>>(),
            [("", ""), ("block", "b1"), ("host", "h1"), ("rack", "r2")]
        );
        assert_eq!(format!("{:?}", labels(&[("a", "1")])), r#"{"a": "1"}"#);
    }

    #[test]
    fn a_lookup_finds_what_a_search_finds_wherever_the_key_was_before() {
        let mut texts = LabelTexts::default();
        let nodes = [
            labels(&[("block", "b1"), ("rack", "r1"), ("zone", "a")]),
            labels(&[("block", "b1"), ("rack", "r1"), ("zone", "a")]).interned(&mut texts),
            labels(&[("block", "b2"), ("rack", "r2"), ("zone", "b")]).interned(&mut texts),
            labels(&[("rack", "r2"), ("zone", "b")]),
            labels(&[("block", "b2"), ("zone", "c")]).interned(&mut texts),
            labels(&[("block", "b3"), ("rack", "r3"), ("zone", "d")]).interned(&mut texts),
            labels(&[]),
        ];
        for key in ["block", "rack", "zone", "host"] {
            // Every order of the nodes a lookup can meet them in, starting anywhere.
            for start in 0..nodes.len() {
                let mut lookup = LabelLookup::new(key);
                for step in 0..2 * nodes.len() {
                    let node = &nodes[(start + step * 3) % nodes.len()];
                    let found = lookup.value_in(node).map(|v| &**v);
                    assert_eq!(found, node.get(key), "{key} on {node:?}");
                }
            }
        }
    }

    #[test]
    fn interned_labels_share_one_copy_of_each_text_and_unused_texts_are_swept() {
        let mut texts = LabelTexts::default();
        let a = labels(&[("rack", "r1"), ("zone", "a")]).interned(&mut texts);
        let b = labels(&[("rack", "r2"), ("zone", "a")]).interned(&mut texts);
        assert_eq!(a, labels(&[("rack", "r1"), ("zone", "a")]));
        assert!(a.shares_texts_with(&texts) && b.shares_texts_with(&texts));
        assert!(!labels(&[("rack", "r1")]).shares_texts_with(&texts));
        assert!(
            Arc::ptr_eq(&a.0[1].1, &b.0[1].1),
            "one copy of the shared value"
        );
        // rack, zone, r1, r2, a
        assert_eq!(texts.len(), 5);

        drop(b);
        texts.sweep();
        assert_eq!(texts.len(), 4, "r2 is referred to by no node any more");
        assert!(a.shares_texts_with(&texts));
    }

    #[test]
    fn texts_that_change_over_time_do_not_pile_up() {
        let mut texts = LabelTexts::default();
        let mut node = NodeLabels::default();
        for stamp in 0..20 * LabelTexts::SWEEP_SLACK {
            node = labels(&[("stamp", &stamp.to_string())]).interned(&mut texts);
        }
        assert!(node.shares_texts_with(&texts));
        assert!(
            texts.len() <= 2 * 2 + LabelTexts::SWEEP_SLACK,
            "{} texts kept for a node with one label",
            texts.len()
        );
        assert!(texts.len() > 2, "swept only when due");
    }
}
