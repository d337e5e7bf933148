//! [`PodUid`]: a pod's uid as the cluster state keys its pods. The API server gives every pod
//! a UUID, kept here as its 16 bytes inside the key (no allocation per pod); any other text
//! (a manifest's `namespace/name` stand-in) is kept as written.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use uuid::Uuid;
use uuid::fmt::Hyphenated;

/// A pod's uid. Equal texts give equal keys, and keys order as their texts do.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum PodUid {
    /// A UUID written the way the API server writes it (hyphenated, lowercase).
    Uuid(Uuid),
    /// Any other text, as written.
    Text(Arc<str>),
}

impl PodUid {
    /// The key for `uid`: its 16 bytes when it is a UUID in the API server's form, which the
    /// text is exactly rebuilt from; the text itself otherwise (an uppercase or unhyphenated
    /// UUID included, so that no two texts share a key).
    pub fn new(uid: &str) -> Self {
        match Uuid::try_parse(uid) {
            Ok(u)
                if uid.len() == Hyphenated::LENGTH
                    && !uid.bytes().any(|b| b.is_ascii_uppercase()) =>
            {
                Self::Uuid(u)
            }
            _ => Self::Text(uid.into()),
        }
    }

    /// Calls `f` with the uid's text (rebuilt on the stack for a UUID).
    pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self {
            Self::Uuid(u) => f(u.hyphenated().encode_lower(&mut Uuid::encode_buffer())),
            Self::Text(t) => f(t),
        }
    }
}

impl Ord for PodUid {
    /// As the texts order. Two UUIDs compare by their bytes, which orders as their lowercase
    /// hex texts do (hyphens sit at the same places in both).
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Uuid(a), Self::Uuid(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
            _ => self.with_text(|a| other.with_text(|b| a.cmp(b))),
        }
    }
}

impl PartialOrd for PodUid {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PodUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_text(|t| f.write_str(t))
    }
}

impl fmt::Debug for PodUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_text(|t| fmt::Debug::fmt(t, f))
    }
}

impl From<&str> for PodUid {
    fn from(uid: &str) -> Self {
        Self::new(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0b7c5a52-3c9e-4d7a-9f1e-2a6b8c4d0e1f";

    #[test]
    fn an_api_server_uid_is_kept_inline_and_written_back_exactly() {
        let uid = PodUid::new(UUID);
        assert!(matches!(uid, PodUid::Uuid(_)), "{uid:?}");
        assert_eq!(uid.to_string(), UUID);
        assert_eq!(uid, PodUid::new(UUID));
    }

    #[test]
    fn other_texts_are_kept_as_written() {
        for text in [
            "default/worker-0",
            "",
            // UUIDs, but not in the API server's form: the text could not be rebuilt.
            "0B7C5A52-3C9E-4D7A-9F1E-2A6B8C4D0E1F",
            "0b7c5a523c9e4d7a9f1e2a6b8c4d0e1f",
            "{0b7c5a52-3c9e-4d7a-9f1e-2a6b8c4d0e1f}",
            "urn:uuid:0b7c5a52-3c9e-4d7a-9f1e-2a6b8c4d0e1f",
        ] {
            let uid = PodUid::new(text);
            assert!(matches!(uid, PodUid::Text(_)), "{text:?} gave {uid:?}");
            assert_eq!(uid.to_string(), text);
        }
        assert_ne!(
            PodUid::new(UUID),
            PodUid::new(&UUID.to_ascii_uppercase()),
            "two texts, two keys"
        );
    }

    #[test]
    fn keys_order_as_their_texts() {
        let mut texts = vec![
            UUID.to_string(),
            "ffffffff-0000-4000-8000-000000000000".to_string(),
            "00000000-0000-4000-8000-00000000000a".to_string(),
            "00000000-0000-4000-8000-000000000009".to_string(),
            "0b7c5a52-3c9e-4d7a-9f1e-2a6b8c4d0e1g".to_string(), // not hex: kept as text
            "0b7c".to_string(),
            "default/worker-0".to_string(),
            "1".to_string(),
        ];
        let mut keys: Vec<PodUid> = texts.iter().map(|t| PodUid::new(t)).collect();
        assert!(keys.iter().filter(|k| matches!(k, PodUid::Uuid(_))).count() >= 3);
        assert!(keys.iter().filter(|k| matches!(k, PodUid::Text(_))).count() >= 3);
        texts.sort();
        keys.sort();
        let sorted: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(sorted, texts);
    }

    #[test]
    fn a_key_is_24_bytes() {
        assert_eq!(std::mem::size_of::<PodUid>(), 24);
    }
}
