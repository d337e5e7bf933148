//! A node's labels: a sorted list of key/value pairs whose strings can be shared across
//! nodes, and the interner a cluster state shares them through.
//!
//! Most label keys repeat on every node and most values on many (zone, instance type,
//! block, rack), so a cluster state keeps one copy of each string ([`LabelTexts`]) and the
//! nodes it stores keep only pointers to them: about 32 bytes per label instead of two owned
//! strings and a map node.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::BuildHasher;
use std::ops::Index;
use std::sync::Arc;

use hashbrown::HashTable;

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
        self.interned_with_ids(texts, &mut Vec::new())
    }

    /// [`Self::interned`], writing each pair's `(key id, value id)` to `ids` (cleared first),
    /// in key order. Labels that hold the interner's copies already are kept as they are.
    pub fn interned_with_ids(self, texts: &mut LabelTexts, ids: &mut Vec<(u32, u32)>) -> Self {
        ids.clear();
        let mut shared = Vec::with_capacity(self.0.len());
        let mut all_same = true;
        for (key, value) in self.0.iter() {
            let (k, key_id) = texts.intern(key);
            let (v, value_id) = texts.intern(value);
            all_same = all_same && Arc::ptr_eq(&k, key) && Arc::ptr_eq(&v, value);
            ids.push((key_id, value_id));
            shared.push((k, v));
        }
        match all_same {
            true => self,
            false => Self(shared.into()),
        }
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
            [k, v].into_iter().all(|s| {
                (texts.id_of(s)).is_some_and(|id| {
                    texts.texts[id as usize]
                        .as_ref()
                        .is_some_and(|t| Arc::ptr_eq(t, s))
                })
            })
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

/// One copy of every label key and value the nodes of a cluster state carry, each with a
/// dense id (a node's labels can then be read as id pairs, from consecutive memory).
///
/// Invariants: an id names one text for as long as any allocation other than this set's own
/// holds that text (a node's labels, a tree's nodes): a text is only freed, and its id only
/// reused, once nothing else refers to it, and every freeing is counted in
/// [`TextsStamp::sweeps`], so whoever kept ids without holding their texts knows to look
/// them up again.
#[derive(Debug, Default)]
pub struct LabelTexts {
    /// By id; `None` for a freed id.
    texts: Vec<Option<Arc<str>>>,
    /// By id, the text's first bytes as an integer ([`head_key`]), so that texts are sorted
    /// mostly without reading them.
    heads: Vec<u128>,
    /// Each text with its id, hashed by the text (kept beside the id, so a lookup reads no
    /// other memory).
    ids: HashTable<(Arc<str>, u32)>,
    hasher: foldhash::fast::RandomState,
    /// Freed ids, reused first.
    free: Vec<u32>,
    /// How many texts were kept after the last sweep of unused ones.
    kept_after_sweep: usize,
    stamp: TextsStamp,
}

/// How far a [`LabelTexts`] has come: ids kept across an equal stamp still name the same
/// texts, and a text looked up and not found is still absent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TextsStamp {
    /// Sweeps that freed ids (a freed id may come back for another text).
    pub sweeps: u64,
    /// Texts added.
    pub added: u64,
}

/// The first 16 bytes of `bytes`, big-endian, zero-padded: `a < b` as byte strings implies
/// `head_key(a) <= head_key(b)`, so keys order texts as the texts do, up to ties.
pub fn head_key(bytes: &[u8]) -> u128 {
    let mut key = [0u8; 16];
    let n = bytes.len().min(16);
    key[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(key)
}

impl LabelTexts {
    /// Texts are swept once their number passes twice what the last sweep kept plus this.
    const SWEEP_SLACK: usize = 1024;

    /// The shared copy of `text` and its id, added when new.
    pub fn intern(&mut self, text: &Arc<str>) -> (Arc<str>, u32) {
        let hash = self.hasher.hash_one(&**text);
        if let Some((shared, id)) = self.find(hash, text) {
            return (Arc::clone(shared), *id);
        }
        self.sweep_if_grown();
        let id = match self.free.pop() {
            Some(id) => {
                self.texts[id as usize] = Some(Arc::clone(text));
                self.heads[id as usize] = head_key(text.as_bytes());
                id
            }
            None => {
                self.texts.push(Some(Arc::clone(text)));
                self.heads.push(head_key(text.as_bytes()));
                self.texts.len() as u32 - 1
            }
        };
        let hasher = &self.hasher;
        self.ids
            .insert_unique(hash, (Arc::clone(text), id), |(t, _)| hasher.hash_one(&**t));
        self.stamp.added += 1;
        (Arc::clone(text), id)
    }

    /// The id of `text`, when some node carries it.
    pub fn id_of(&self, text: &str) -> Option<u32> {
        self.find(self.hasher.hash_one(text), text)
            .map(|(_, id)| *id)
    }

    fn find(&self, hash: u64, text: &str) -> Option<&(Arc<str>, u32)> {
        self.ids.find(hash, |(t, _)| **t == *text)
    }

    /// The text of a kept id (`None` for an id freed or never given).
    pub fn text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize)?.as_deref()
    }

    /// The first 16 bytes of an id's text as a big-endian integer, zero-padded: for texts
    /// `a < b`, `head(a) <= head(b)` (equal heads leave the order to the texts).
    pub fn head(&self, id: u32) -> u128 {
        self.heads[id as usize]
    }

    /// How far the set has come (see [`TextsStamp`]).
    pub fn stamp(&self) -> TextsStamp {
        self.stamp
    }

    /// How many texts are kept.
    pub fn len(&self) -> usize {
        self.texts.len() - self.free.len()
    }

    /// Whether no text is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the texts no node refers to any more, once the set has grown well past what
    /// the last sweep kept: label values that change over time (a timestamp, a version)
    /// cannot pile up, and the sweep's cost is spread over the insertions that made it due.
    fn sweep_if_grown(&mut self) {
        if self.len() < 2 * self.kept_after_sweep + Self::SWEEP_SLACK {
            return;
        }
        self.sweep();
    }

    /// Drops every text only this set refers to, freeing its id.
    pub fn sweep(&mut self) {
        let mut freed = false;
        for (id, slot) in self.texts.iter_mut().enumerate() {
            // Held here twice: by id and in the table.
            if let Some(text) = slot
                && Arc::strong_count(text) == 2
            {
                let hash = self.hasher.hash_one(&**text);
                if let Ok(entry) = self.ids.find_entry(hash, |(_, i)| *i as usize == id) {
                    entry.remove();
                }
                *slot = None;
                self.free.push(id as u32);
                freed = true;
            }
        }
        if freed {
            self.stamp.sweeps += 1;
        }
        self.kept_after_sweep = self.len();
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
    /// An id names its text while anything else holds the text; a sweep frees the ids of
    /// texts nothing holds, counts itself in the stamp, and a freed id comes back for a new
    /// text; a lookup finds every held text and no freed one.
    #[test]
    fn ids_name_their_texts_while_held_and_freed_ids_come_back_after_a_sweep() {
        let mut texts = LabelTexts::default();
        let (rack, rack_id) = texts.intern(&Arc::from("rack"));
        let (_, r1_id) = texts.intern(&Arc::from("r1"));
        assert_eq!(
            texts.intern(&Arc::from("rack")).1,
            rack_id,
            "one id per text"
        );
        assert!(Arc::ptr_eq(&texts.intern(&Arc::from("rack")).0, &rack));
        assert_eq!(
            texts.stamp(),
            TextsStamp {
                sweeps: 0,
                added: 2
            }
        );
        assert_eq!(
            (texts.text(rack_id), texts.text(r1_id)),
            (Some("rack"), Some("r1"))
        );
        assert_eq!(texts.id_of("r1"), Some(r1_id));
        assert_eq!(texts.texts.len(), 2, "no id more");

        // Only "rack" is held outside.
        texts.sweep();
        assert_eq!(texts.stamp().sweeps, 1);
        assert_eq!(
            (texts.text(rack_id), texts.text(r1_id)),
            (Some("rack"), None)
        );
        assert_eq!(
            (texts.id_of("rack"), texts.id_of("r1")),
            (Some(rack_id), None)
        );
        assert_eq!(texts.len(), 1);
        let (_, r2_id) = texts.intern(&Arc::from("r2"));
        assert_eq!(r2_id, r1_id, "the freed id comes back");
        assert_eq!(texts.text(r2_id), Some("r2"));
        assert_eq!(texts.texts.len(), 2, "no id more");
        // A sweep that frees nothing leaves the stamp.
        let (_held, _) = texts.intern(&Arc::from("r3"));
        let before = texts.stamp();
        drop(rack);
        let (_r2, _) = texts.intern(&Arc::from("r2"));
        texts.sweep();
        assert_eq!(texts.stamp().sweeps, before.sweeps + 1, "rack freed");
        let now = texts.stamp();
        texts.sweep();
        assert_eq!(texts.stamp(), now, "nothing freed, nothing counted");
        assert_eq!(texts.id_of("rack"), None);
    }

    /// Interning with ids gives each pair's ids in key order, and keeps labels that already
    /// hold the shared copies as they are (the same list).
    #[test]
    fn interning_gives_each_pair_its_ids_in_key_order() {
        let mut texts = LabelTexts::default();
        let mut ids = Vec::new();
        let a = labels(&[("zone", "a"), ("rack", "r1")]).interned_with_ids(&mut texts, &mut ids);
        let named: Vec<(&str, &str)> = (ids.iter())
            .map(|&(k, v)| (texts.text(k).expect("held"), texts.text(v).expect("held")))
            .collect();
        assert_eq!(named, [("rack", "r1"), ("zone", "a")]);
        let again = a.clone().interned_with_ids(&mut texts, &mut ids);
        assert!(Arc::ptr_eq(&again.0, &a.0), "already shared: kept");
        assert_eq!(ids.len(), 2, "cleared first");
    }
}
