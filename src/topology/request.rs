//! What a PodSet asks of the topology: the request built from the `kueue.x-k8s.io/podset-*`
//! annotations exactly as Kueue's builder does, plus the pod-level facts placement needs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PreferredSchedulingTerm, Toleration};

use super::gates::FeatureGates;
use super::resources::ResourceList;
use crate::keys;

/// One slice layer: each group of `size` pods must sit inside one domain of `level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceLayer {
    /// The level's node label.
    pub level: String,
    /// Pods per slice at this layer; 0 when the annotation gave a level but no size.
    pub size: i32,
}

/// A PodSet's topology request (Kueue's `PodSetTopologyRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequest {
    /// `podset-required-topology`.
    pub required: Option<String>,
    /// `podset-preferred-topology`.
    pub preferred: Option<String>,
    /// `podset-unconstrained-topology`, parsed as Go's `ParseBool`.
    pub unconstrained: Option<bool>,
    /// The unified slice view, outermost first: the multi-layer constraints when given,
    /// else the legacy `slice-required-topology` + `slice-size` pair, else empty.
    pub slice_layers: Vec<SliceLayer>,
    /// `podset-group-name` (kept only with required or preferred, as Kueue does).
    pub group_name: Option<String>,
}

/// One PodSet to place: `count` identical pods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSetSpec {
    /// The PodSet name (`main` for a Job).
    pub name: String,
    /// How many pods.
    pub count: i32,
    /// One pod's effective requests (without the `pods` slot).
    pub requests: ResourceList,
    /// The topology request; `None` for a PodSet without TAS annotations.
    pub topology: Option<TopologyRequest>,
    /// No annotation but queued to a TAS-only ClusterQueue: unconstrained at the lowest level.
    pub implied: bool,
    /// The pod template's `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The pod template's tolerations (the flavor's are added at placement).
    pub tolerations: Vec<Toleration>,
    /// `requiredDuringSchedulingIgnoredDuringExecution` of the node affinity.
    pub required_affinity: Option<NodeSelector>,
    /// `preferredDuringSchedulingIgnoredDuringExecution` of the node affinity.
    pub preferred_affinity: Vec<PreferredSchedulingTerm>,
}

/// Why Kueue's builder could not turn the annotations into a request. The texts are the Go
/// error strings Kueue returns (the `strconv` ones included).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// `podset-unconstrained-topology` is not a value Go's `strconv.ParseBool` accepts.
    #[error("strconv.ParseBool: parsing {}: invalid syntax", gocompat::quote(.value))]
    Unconstrained {
        /// The annotation value.
        value: String,
    },
    /// `podset-slice-size` (with `podset-slice-required-topology`) is not an int32.
    #[error("strconv.ParseInt: parsing {}: {kind}", gocompat::quote(.value))]
    SliceSize {
        /// The annotation value.
        value: String,
        /// Syntax or range, as Go's `strconv.NumError` says it.
        kind: NumErrorKind,
    },
    /// The constraints annotation is not what Go's `encoding/json` decodes into
    /// `[]PodsetSliceRequiredTopologyConstraint`; the payload is the Go error text.
    #[error("failed to parse multi-layer topology constraints annotation: {0}")]
    ConstraintsJson(String),
    /// The constraints annotation decoded to fewer than 1 or more than 3 layers.
    #[error("topology constraints must contain between 1 and 3 entries: got {0}")]
    ConstraintsCount(usize),
}

impl TopologyRequest {
    /// Builds the request from a pod template's annotations exactly as Kueue's
    /// `podSetTopologyRequestBuilder` does (tas-semantics §2.2):
    ///
    /// 1. the first match wins: required → preferred → unconstrained (`strconv.ParseBool`,
    ///    a parse failure is an error); with none of them and no slice layer (neither the
    ///    legacy `slice-required-topology` + `slice-size` pair nor the constraints annotation)
    ///    there is no request (`Ok(None)`);
    /// 2. with `TASMultiLayerTopology` on and the constraints annotation present, the JSON is
    ///    decoded like Go's `encoding/json` and must hold 1..3 layers; otherwise the legacy
    ///    pair is used when both keys are present (size parsed as int32); `slice-required`
    ///    without `slice-size` is ignored here (validation rejects it);
    /// 3. the group name is kept only with required or preferred.
    ///
    /// Nothing is validated beyond what the builder needs (label syntax, sizes ≥ 1,
    /// mutual exclusion, … are [`super::validation`]'s job).
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        gates: &FeatureGates,
    ) -> Result<Option<TopologyRequest>, RequestError> {
        let get = |key: &str| annotations.get(key);
        let required = get(keys::PODSET_REQUIRED_TOPOLOGY);
        let preferred = get(keys::PODSET_PREFERRED_TOPOLOGY);
        let unconstrained = get(keys::PODSET_UNCONSTRAINED_TOPOLOGY);
        let slice_required = get(keys::PODSET_SLICE_REQUIRED_TOPOLOGY);
        let slice_size = get(keys::PODSET_SLICE_SIZE);
        let constraints = get(keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS);
        let group_name = get(keys::PODSET_GROUP_NAME);

        let mut request = TopologyRequest::default();
        if let Some(level) = required {
            request.required = Some(level.clone());
        } else if let Some(level) = preferred {
            request.preferred = Some(level.clone());
        } else if let Some(value) = unconstrained {
            let parsed =
                gocompat::parse_bool(value).ok_or_else(|| RequestError::Unconstrained {
                    value: value.clone(),
                })?;
            request.unconstrained = Some(parsed);
        } else if (slice_required.is_none() || slice_size.is_none()) && constraints.is_none() {
            return Ok(None);
        }

        if let Some(json) = constraints.filter(|_| gates.multi_layer()) {
            let layers = parse_slice_constraints(json).map_err(RequestError::ConstraintsJson)?;
            if layers.is_empty() || layers.len() > MAX_SLICE_LAYERS {
                return Err(RequestError::ConstraintsCount(layers.len()));
            }
            request.slice_layers = layers;
        } else if let (Some(level), Some(size)) = (slice_required, slice_size) {
            let size = gocompat::parse_int(size, 32).map_err(|kind| RequestError::SliceSize {
                value: size.clone(),
                kind,
            })?;
            // parse_int(_, 32) guarantees the int32 range.
            let size = i32::try_from(size).unwrap_or(i32::MAX);
            request.slice_layers = vec![SliceLayer {
                level: level.clone(),
                size,
            }];
        }

        if required.is_some() || preferred.is_some() {
            request.group_name = group_name.cloned();
        }
        Ok(Some(request))
    }

    /// Kueue's "explicit TAS" (tas-semantics §2.2 step 5): the request names unconstrained
    /// (even `false`), required, preferred, or a slice layer (legacy or multi-layer).
    pub fn is_explicit(&self) -> bool {
        self.unconstrained.is_some()
            || self.required.is_some()
            || self.preferred.is_some()
            || !self.slice_layers.is_empty()
    }
}

/// The most layers the constraints annotation may hold.
pub const MAX_SLICE_LAYERS: usize = 3;

/// Decodes the `podset-slice-required-topology-constraints` value the way Go's
/// `json.Unmarshal` decodes it into `[]PodsetSliceRequiredTopologyConstraint`
/// (`{topology string, size int32}`): field names match case-insensitively, unknown fields
/// are ignored, a non-integer or out-of-int32 size fails, `null` is zero layers, and a
/// `null` field keeps its zero value. The error is Go's error text, e.g.
/// `invalid character 'i' looking for beginning of value` or
/// `json: cannot unmarshal string into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32`.
/// The layer count is not checked here.
pub fn parse_slice_constraints(value: &str) -> Result<Vec<SliceLayer>, String> {
    gocompat::json::decode_constraints(value)
}

/// Which Go `strconv.NumError` a number failed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumErrorKind {
    /// `strconv.ErrSyntax`: not a base-10 integer.
    Syntax,
    /// `strconv.ErrRange`: outside the requested bit size.
    Range,
}

impl std::fmt::Display for NumErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Syntax => "invalid syntax",
            Self::Range => "value out of range",
        })
    }
}

/// Small re-implementations of the Go standard-library behaviour Kueue's texts depend on:
/// `strconv.Quote`, `ParseBool`, `ParseInt`/`ParseUint` (base 10), and `encoding/json`
/// decoding of the constraints annotation (scanner errors and type errors included).
pub(crate) mod gocompat {
    use std::fmt;

    use super::NumErrorKind;

    /// Go's `strconv.Quote` (what `%q` prints): `"` and `\` escaped, the short escapes
    /// `\a \b \f \n \r \t \v`, other non-printable runes as `\xNN`, `\uNNNN` or
    /// `\UNNNNNNNN`; printable runes (Go's `unicode.IsPrint`) kept as they are.
    pub(crate) fn quote(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            push_escaped(&mut out, c, '"');
        }
        out.push('"');
        out
    }

    /// Go's `appendEscapedRune` for one rune and the given quote character.
    pub(crate) fn push_escaped(out: &mut String, c: char, quote_char: char) {
        use fmt::Write as _;
        if c == quote_char || c == '\\' {
            out.push('\\');
            out.push(c);
            return;
        }
        if is_print(c) {
            out.push(c);
            return;
        }
        let code = u32::from(c);
        // Writing into a String cannot fail.
        let _ = match c {
            '\u{7}' => out.write_str("\\a"),
            '\u{8}' => out.write_str("\\b"),
            '\u{c}' => out.write_str("\\f"),
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            '\t' => out.write_str("\\t"),
            '\u{b}' => out.write_str("\\v"),
            _ if code < 0x20 || code == 0x7f => write!(out, "\\x{code:02x}"),
            _ if code < 0x10000 => write!(out, "\\u{code:04x}"),
            _ => write!(out, "\\U{code:08x}"),
        };
    }

    /// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII
    /// space. Rust's `escape_debug` keeps exactly those categories (it escapes C*, Z* but
    /// the space), except that a grapheme extender is escaped at the start of a string,
    /// hence the leading `a`.
    pub(crate) fn is_print(c: char) -> bool {
        if c.is_ascii() {
            return (' '..='~').contains(&c);
        }
        let mut buf = [0u8; 8];
        buf[0] = b'a';
        let len = 1 + c.encode_utf8(&mut buf[1..]).len();
        match std::str::from_utf8(&buf[..len]) {
            Ok(s) => s.escape_debug().count() == 2,
            Err(_) => false,
        }
    }

    /// Go's `strconv.ParseBool`.
    pub(crate) fn parse_bool(s: &str) -> Option<bool> {
        match s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
            _ => None,
        }
    }

    /// Go's `strconv.ParseUint(s, 10, bit_size)`: ASCII digits only, no sign, no `_`.
    pub(crate) fn parse_uint(s: &str, bit_size: u32) -> Result<u64, NumErrorKind> {
        if s.is_empty() {
            return Err(NumErrorKind::Syntax);
        }
        let max_val = if bit_size >= 64 {
            u64::MAX
        } else {
            (1u64 << bit_size) - 1
        };
        let cutoff = u64::MAX / 10 + 1;
        let mut n: u64 = 0;
        for b in s.bytes() {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                // Letters are digits of larger bases; in base 10 they are a syntax error,
                // but only once reached (an earlier overflow reports a range error).
                _ => return Err(NumErrorKind::Syntax),
            };
            if n >= cutoff {
                return Err(NumErrorKind::Range);
            }
            n = n.wrapping_mul(10);
            let n1 = n.wrapping_add(u64::from(d));
            if n1 < n || n1 > max_val {
                return Err(NumErrorKind::Range);
            }
            n = n1;
        }
        Ok(n)
    }

    /// Go's `strconv.ParseInt(s, 10, bit_size)`: an optional `+`/`-`, then ASCII digits.
    pub(crate) fn parse_int(s: &str, bit_size: u32) -> Result<i64, NumErrorKind> {
        if s.is_empty() {
            return Err(NumErrorKind::Syntax);
        }
        let (neg, digits) = match s.as_bytes().first() {
            Some(b'+') => (false, &s[1..]),
            Some(b'-') => (true, &s[1..]),
            _ => (false, s),
        };
        let un = match parse_uint(digits, 64) {
            Ok(v) => v,
            Err(NumErrorKind::Range) => u64::MAX,
            Err(NumErrorKind::Syntax) => return Err(NumErrorKind::Syntax),
        };
        let bit_size = bit_size.clamp(1, 64);
        let cutoff = 1u64 << (bit_size - 1);
        if !neg && un >= cutoff {
            return Err(NumErrorKind::Range);
        }
        if neg && un > cutoff {
            return Err(NumErrorKind::Range);
        }
        // un <= 2^63 here; 2^63 only when negative, where the wrap gives i64::MIN.
        let v = un as i64;
        Ok(if neg { v.wrapping_neg() } else { v })
    }

    /// Go's `encoding/json`, reduced to what decoding `[]{topology string, size int32}`
    /// needs: the full syntax check first (`checkValid`, with Go's scanner messages and its
    /// 10 000 nesting limit), then an iterative decode that records the first type error as
    /// Go's `UnmarshalTypeError` text. Nothing here recurses, so depth cannot overflow the
    /// stack.
    pub(crate) mod json {
        use super::super::SliceLayer;
        use super::{parse_int, push_escaped};

        const MAX_NESTING_DEPTH: usize = 10_000;
        const SLICE_TYPE: &str = "[]v1beta2.PodsetSliceRequiredTopologyConstraint";
        const ELEM_TYPE: &str = "v1beta2.PodsetSliceRequiredTopologyConstraint";
        const STRUCT_NAME: &str = "PodsetSliceRequiredTopologyConstraint";

        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Step {
            BeginValueOrEmpty,
            BeginValue,
            BeginStringOrEmpty,
            BeginString,
            EndValue,
            EndTop,
            InString,
            InStringEsc,
            InStringEscU(u8),
            Neg,
            Zero,
            One,
            Dot,
            Dot0,
            E,
            ESign,
            E0,
            /// Inside `true`, `false` or `null`: the word and how many bytes are matched.
            Literal(&'static [u8], usize),
        }

        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Parse {
            ObjectKey,
            ObjectValue,
            ArrayValue,
        }

        fn is_space(c: u8) -> bool {
            matches!(c, b' ' | b'\t' | b'\r' | b'\n')
        }

        /// Go's `quoteChar`: the byte as a Latin-1 rune, quoted with `'`.
        fn quote_char(c: u8) -> String {
            match c {
                b'\'' => "'\\''".to_string(),
                b'"' => "'\"'".to_string(),
                _ => {
                    let mut s = String::from("'");
                    push_escaped(&mut s, char::from(c), '"');
                    s.push('\'');
                    s
                }
            }
        }

        /// Go's `scanner`, returning the `SyntaxError` text on the first error.
        struct Scanner {
            step: Step,
            parse: Vec<Parse>,
            end_top: bool,
        }

        type ScanResult = Result<(), String>;

        fn error(c: u8, context: &str) -> ScanResult {
            Err(format!("invalid character {} {context}", quote_char(c)))
        }

        impl Scanner {
            fn new() -> Self {
                Self {
                    step: Step::BeginValue,
                    parse: Vec::new(),
                    end_top: false,
                }
            }

            fn push(&mut self, c: u8, p: Parse, next: Step) -> ScanResult {
                self.step = next;
                self.parse.push(p);
                if self.parse.len() <= MAX_NESTING_DEPTH {
                    Ok(())
                } else {
                    error(c, "exceeded max depth")
                }
            }

            fn pop(&mut self) {
                self.parse.pop();
                if self.parse.is_empty() {
                    self.step = Step::EndTop;
                    self.end_top = true;
                } else {
                    self.step = Step::EndValue;
                }
            }

            fn step(&mut self, c: u8) -> ScanResult {
                match self.step {
                    Step::BeginValueOrEmpty => {
                        if is_space(c) {
                            Ok(())
                        } else if c == b']' {
                            self.end_value(c)
                        } else {
                            self.begin_value(c)
                        }
                    }
                    Step::BeginValue => self.begin_value(c),
                    Step::BeginStringOrEmpty => {
                        if is_space(c) {
                            Ok(())
                        } else if c == b'}' {
                            if let Some(last) = self.parse.last_mut() {
                                *last = Parse::ObjectValue;
                            }
                            self.end_value(c)
                        } else {
                            self.begin_string(c)
                        }
                    }
                    Step::BeginString => self.begin_string(c),
                    Step::EndValue => self.end_value(c),
                    Step::EndTop => end_top(c),
                    Step::InString => {
                        if c == b'"' {
                            self.step = Step::EndValue;
                        } else if c == b'\\' {
                            self.step = Step::InStringEsc;
                        } else if c < 0x20 {
                            return error(c, "in string literal");
                        }
                        Ok(())
                    }
                    Step::InStringEsc => match c {
                        b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                            self.step = Step::InString;
                            Ok(())
                        }
                        b'u' => {
                            self.step = Step::InStringEscU(0);
                            Ok(())
                        }
                        _ => error(c, "in string escape code"),
                    },
                    Step::InStringEscU(seen) => {
                        if c.is_ascii_hexdigit() {
                            self.step = if seen >= 3 {
                                Step::InString
                            } else {
                                Step::InStringEscU(seen + 1)
                            };
                            Ok(())
                        } else {
                            error(c, "in \\u hexadecimal character escape")
                        }
                    }
                    Step::Neg => match c {
                        b'0' => {
                            self.step = Step::Zero;
                            Ok(())
                        }
                        b'1'..=b'9' => {
                            self.step = Step::One;
                            Ok(())
                        }
                        _ => error(c, "in numeric literal"),
                    },
                    Step::One => {
                        if c.is_ascii_digit() {
                            Ok(())
                        } else {
                            self.state0(c)
                        }
                    }
                    Step::Zero => self.state0(c),
                    Step::Dot => {
                        if c.is_ascii_digit() {
                            self.step = Step::Dot0;
                            Ok(())
                        } else {
                            error(c, "after decimal point in numeric literal")
                        }
                    }
                    Step::Dot0 => {
                        if c.is_ascii_digit() {
                            Ok(())
                        } else if c == b'e' || c == b'E' {
                            self.step = Step::E;
                            Ok(())
                        } else {
                            self.end_value(c)
                        }
                    }
                    Step::E => {
                        if c == b'+' || c == b'-' {
                            self.step = Step::ESign;
                            Ok(())
                        } else {
                            self.e_sign(c)
                        }
                    }
                    Step::ESign => self.e_sign(c),
                    Step::E0 => {
                        if c.is_ascii_digit() {
                            Ok(())
                        } else {
                            self.end_value(c)
                        }
                    }
                    Step::Literal(word, matched) => {
                        let expected = word.get(matched).copied().unwrap_or(b' ');
                        if c == expected {
                            self.step = if matched + 1 >= word.len() {
                                Step::EndValue
                            } else {
                                Step::Literal(word, matched + 1)
                            };
                            Ok(())
                        } else {
                            let name = std::str::from_utf8(word).unwrap_or("");
                            error(
                                c,
                                &format!("in literal {name} (expecting {})", quote_char(expected)),
                            )
                        }
                    }
                }
            }

            fn begin_value(&mut self, c: u8) -> ScanResult {
                if is_space(c) {
                    return Ok(());
                }
                match c {
                    b'{' => self.push(c, Parse::ObjectKey, Step::BeginStringOrEmpty),
                    b'[' => self.push(c, Parse::ArrayValue, Step::BeginValueOrEmpty),
                    b'"' => {
                        self.step = Step::InString;
                        Ok(())
                    }
                    b'-' => {
                        self.step = Step::Neg;
                        Ok(())
                    }
                    b'0' => {
                        self.step = Step::Zero;
                        Ok(())
                    }
                    b'1'..=b'9' => {
                        self.step = Step::One;
                        Ok(())
                    }
                    b't' => {
                        self.step = Step::Literal(b"true", 1);
                        Ok(())
                    }
                    b'f' => {
                        self.step = Step::Literal(b"false", 1);
                        Ok(())
                    }
                    b'n' => {
                        self.step = Step::Literal(b"null", 1);
                        Ok(())
                    }
                    _ => error(c, "looking for beginning of value"),
                }
            }

            fn begin_string(&mut self, c: u8) -> ScanResult {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'"' {
                    self.step = Step::InString;
                    return Ok(());
                }
                error(c, "looking for beginning of object key string")
            }

            fn state0(&mut self, c: u8) -> ScanResult {
                if c == b'.' {
                    self.step = Step::Dot;
                    Ok(())
                } else if c == b'e' || c == b'E' {
                    self.step = Step::E;
                    Ok(())
                } else {
                    self.end_value(c)
                }
            }

            fn e_sign(&mut self, c: u8) -> ScanResult {
                if c.is_ascii_digit() {
                    self.step = Step::E0;
                    Ok(())
                } else {
                    error(c, "in exponent of numeric literal")
                }
            }

            fn end_value(&mut self, c: u8) -> ScanResult {
                let Some(&ps) = self.parse.last() else {
                    self.step = Step::EndTop;
                    self.end_top = true;
                    return end_top(c);
                };
                if is_space(c) {
                    self.step = Step::EndValue;
                    return Ok(());
                }
                match ps {
                    Parse::ObjectKey => {
                        if c == b':' {
                            self.set_top(Parse::ObjectValue);
                            self.step = Step::BeginValue;
                            Ok(())
                        } else {
                            error(c, "after object key")
                        }
                    }
                    Parse::ObjectValue => {
                        if c == b',' {
                            self.set_top(Parse::ObjectKey);
                            self.step = Step::BeginString;
                            Ok(())
                        } else if c == b'}' {
                            self.pop();
                            Ok(())
                        } else {
                            error(c, "after object key:value pair")
                        }
                    }
                    Parse::ArrayValue => {
                        if c == b',' {
                            self.step = Step::BeginValue;
                            Ok(())
                        } else if c == b']' {
                            self.pop();
                            Ok(())
                        } else {
                            error(c, "after array element")
                        }
                    }
                }
            }

            fn set_top(&mut self, p: Parse) {
                if let Some(last) = self.parse.last_mut() {
                    *last = p;
                }
            }
        }

        fn end_top(c: u8) -> ScanResult {
            if is_space(c) {
                Ok(())
            } else {
                error(c, "after top-level value")
            }
        }

        /// Go's `checkValid`: the whole input, then end of input as one more space.
        fn check_valid(data: &[u8]) -> ScanResult {
            let mut scanner = Scanner::new();
            for &c in data {
                scanner.step(c)?;
            }
            if scanner.end_top {
                return Ok(());
            }
            scanner.step(b' ')?;
            if scanner.end_top {
                Ok(())
            } else {
                Err("unexpected end of JSON input".to_string())
            }
        }

        /// The struct fields, matched as Go does: exact name, then Go's `foldName`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Field {
            Topology,
            Size,
        }

        impl Field {
            fn name(self) -> &'static str {
                match self {
                    Field::Topology => "topology",
                    Field::Size => "size",
                }
            }

            fn go_type(self) -> &'static str {
                match self {
                    Field::Topology => "string",
                    Field::Size => "int32",
                }
            }

            fn lookup(key: &str) -> Option<Field> {
                match key {
                    "topology" => return Some(Field::Topology),
                    "size" => return Some(Field::Size),
                    _ => {}
                }
                let folded = fold_name(key);
                if folded == "TOPOLOGY" {
                    Some(Field::Topology)
                } else if folded == "SIZE" {
                    Some(Field::Size)
                } else {
                    None
                }
            }
        }

        /// Go's `foldName`: ASCII upper-cased; other runes as `ToUpper(ToLower(r))`. Only the
        /// runes that fold onto ASCII letters matter for ASCII field names: `ſ` (U+017F) → S,
        /// `ı` (U+0131) → I, `İ` (U+0130) → I, the Kelvin sign (U+212A) → K.
        fn fold_name(key: &str) -> String {
            key.chars()
                .map(|c| match c {
                    'a'..='z' => c.to_ascii_uppercase(),
                    '\u{17f}' => 'S',
                    '\u{131}' | '\u{130}' => 'I',
                    '\u{212a}' => 'K',
                    _ => c,
                })
                .collect()
        }

        /// The decode pass over input `check_valid` accepted.
        struct Decoder<'a> {
            text: &'a str,
            bytes: &'a [u8],
            pos: usize,
            /// Go's `savedError`: the first type error, reported after decoding.
            saved: Option<String>,
        }

        impl<'a> Decoder<'a> {
            fn peek(&self) -> u8 {
                self.bytes.get(self.pos).copied().unwrap_or(0)
            }

            fn skip_ws(&mut self) {
                while self.pos < self.bytes.len() && is_space(self.bytes[self.pos]) {
                    self.pos += 1;
                }
            }

            fn save(&mut self, value: &str, go_type: &str, field: Option<Field>) {
                if self.saved.is_some() {
                    return;
                }
                self.saved = Some(match field {
                    Some(f) => format!(
                        "json: cannot unmarshal {value} into Go struct field {STRUCT_NAME}.{} of type {go_type}",
                        f.name()
                    ),
                    None => {
                        format!("json: cannot unmarshal {value} into Go value of type {go_type}")
                    }
                });
            }

            /// What Go names a JSON value in a type error, by its first byte.
            fn kind_name(c: u8) -> &'static str {
                match c {
                    b'{' => "object",
                    b'[' => "array",
                    b'"' => "string",
                    b't' | b'f' => "bool",
                    _ => "number",
                }
            }

            /// A number, `true`, `false` or `null`: everything up to the next delimiter.
            fn literal(&mut self) -> &'a str {
                let start = self.pos;
                while self.pos < self.bytes.len()
                    && !matches!(self.bytes[self.pos], b',' | b']' | b'}' | b':')
                    && !is_space(self.bytes[self.pos])
                {
                    self.pos += 1;
                }
                self.text.get(start..self.pos).unwrap_or("")
            }

            /// Skips one (valid) value of any shape without recursion.
            fn skip_value(&mut self) {
                match self.peek() {
                    b'"' => {
                        self.string();
                    }
                    b'{' | b'[' => {
                        let mut depth = 0usize;
                        while self.pos < self.bytes.len() {
                            match self.bytes[self.pos] {
                                b'"' => {
                                    self.string();
                                    continue;
                                }
                                b'{' | b'[' => depth += 1,
                                b'}' | b']' => {
                                    depth = depth.saturating_sub(1);
                                    if depth == 0 {
                                        self.pos += 1;
                                        return;
                                    }
                                }
                                _ => {}
                            }
                            self.pos += 1;
                        }
                    }
                    _ => {
                        self.literal();
                    }
                }
            }

            /// Four hex digits at `at`, as Go's `getu4` (which also wants the `\u`).
            fn u4(&self, at: usize) -> Option<u32> {
                if self.bytes.get(at) != Some(&b'\\') || self.bytes.get(at + 1) != Some(&b'u') {
                    return None;
                }
                let hex = self.text.get(at + 2..at + 6)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                u32::from_str_radix(hex, 16).ok()
            }

            /// A string literal, unquoted like Go's `unquoteBytes` (bad surrogates → U+FFFD).
            fn string(&mut self) -> String {
                let mut out = String::new();
                self.pos += 1; // opening quote
                while self.pos < self.bytes.len() {
                    match self.bytes[self.pos] {
                        b'"' => {
                            self.pos += 1;
                            return out;
                        }
                        b'\\' => {
                            let esc = self.bytes.get(self.pos + 1).copied().unwrap_or(b'"');
                            let simple = match esc {
                                b'"' => Some('"'),
                                b'\\' => Some('\\'),
                                b'/' => Some('/'),
                                b'\'' => Some('\''),
                                b'b' => Some('\u{8}'),
                                b'f' => Some('\u{c}'),
                                b'n' => Some('\n'),
                                b'r' => Some('\r'),
                                b't' => Some('\t'),
                                _ => None,
                            };
                            if let Some(ch) = simple {
                                out.push(ch);
                                self.pos += 2;
                                continue;
                            }
                            let Some(rr) = self.u4(self.pos) else {
                                // Unreachable after check_valid; stop rather than loop.
                                self.pos += 2;
                                continue;
                            };
                            self.pos += 6;
                            if (0xD800..0xE000).contains(&rr) {
                                if let Some(rr1) = self.u4(self.pos)
                                    && (0xD800..0xDC00).contains(&rr)
                                    && (0xDC00..0xE000).contains(&rr1)
                                {
                                    let combined = 0x10000 + ((rr - 0xD800) << 10) + (rr1 - 0xDC00);
                                    out.push(char::from_u32(combined).unwrap_or('\u{fffd}'));
                                    self.pos += 6;
                                } else {
                                    out.push('\u{fffd}');
                                }
                            } else {
                                out.push(char::from_u32(rr).unwrap_or('\u{fffd}'));
                            }
                        }
                        _ => {
                            let start = self.pos;
                            while self.pos < self.bytes.len()
                                && !matches!(self.bytes[self.pos], b'"' | b'\\')
                            {
                                self.pos += 1;
                            }
                            // Both ends sit on ASCII bytes, so this is a char boundary.
                            out.push_str(self.text.get(start..self.pos).unwrap_or(""));
                        }
                    }
                }
                out
            }

            /// Skips `,` (returns true: more) or the closing bracket (returns false).
            fn next_member(&mut self) -> bool {
                self.skip_ws();
                match self.peek() {
                    b',' => {
                        self.pos += 1;
                        true
                    }
                    b']' | b'}' => {
                        self.pos += 1;
                        false
                    }
                    _ => false,
                }
            }

            fn element(&mut self) -> SliceLayer {
                let mut layer = SliceLayer {
                    level: String::new(),
                    size: 0,
                };
                match self.peek() {
                    b'{' => self.object(&mut layer),
                    b'n' => {
                        self.literal();
                    }
                    c => {
                        self.save(Self::kind_name(c), ELEM_TYPE, None);
                        self.skip_value();
                    }
                }
                layer
            }

            fn object(&mut self, layer: &mut SliceLayer) {
                self.pos += 1; // '{'
                self.skip_ws();
                if self.peek() == b'}' {
                    self.pos += 1;
                    return;
                }
                loop {
                    self.skip_ws();
                    if self.peek() != b'"' {
                        return; // unreachable after check_valid
                    }
                    let key = self.string();
                    self.skip_ws();
                    if self.peek() == b':' {
                        self.pos += 1;
                    }
                    self.skip_ws();
                    match Field::lookup(&key) {
                        None => self.skip_value(),
                        Some(field) => self.field_value(field, layer),
                    }
                    if !self.next_member() {
                        return;
                    }
                }
            }

            fn field_value(&mut self, field: Field, layer: &mut SliceLayer) {
                let c = self.peek();
                match (field, c) {
                    // null leaves a Go value untouched.
                    (_, b'n') => {
                        self.literal();
                    }
                    (Field::Topology, b'"') => layer.level = self.string(),
                    (Field::Size, b'-' | b'0'..=b'9') => {
                        let lit = self.literal();
                        match parse_int(lit, 64).ok().and_then(|v| i32::try_from(v).ok()) {
                            Some(v) => layer.size = v,
                            None => self.save(&format!("number {lit}"), "int32", Some(field)),
                        }
                    }
                    _ => {
                        self.save(Self::kind_name(c), field.go_type(), Some(field));
                        self.skip_value();
                    }
                }
            }
        }

        /// `json.Unmarshal(data, &[]PodsetSliceRequiredTopologyConstraint)`.
        pub(crate) fn decode_constraints(text: &str) -> Result<Vec<SliceLayer>, String> {
            check_valid(text.as_bytes())?;
            let mut d = Decoder {
                text,
                bytes: text.as_bytes(),
                pos: 0,
                saved: None,
            };
            d.skip_ws();
            let mut layers = Vec::new();
            match d.peek() {
                b'[' => {
                    d.pos += 1;
                    d.skip_ws();
                    if d.peek() == b']' {
                        d.pos += 1;
                    } else {
                        loop {
                            d.skip_ws();
                            layers.push(d.element());
                            if !d.next_member() {
                                break;
                            }
                        }
                    }
                }
                b'n' => {}
                c => d.save(Decoder::kind_name(c), SLICE_TYPE, None),
            }
            match d.saved {
                Some(err) => Err(err),
                None => Ok(layers),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::gocompat::{is_print, parse_bool, parse_int, parse_uint, quote};
    use super::*;

    const REQ: &str = keys::PODSET_REQUIRED_TOPOLOGY;
    const PREF: &str = keys::PODSET_PREFERRED_TOPOLOGY;
    const UNC: &str = keys::PODSET_UNCONSTRAINED_TOPOLOGY;
    const SREQ: &str = keys::PODSET_SLICE_REQUIRED_TOPOLOGY;
    const SSIZE: &str = keys::PODSET_SLICE_SIZE;
    const CONS: &str = keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS;
    const GROUP: &str = keys::PODSET_GROUP_NAME;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn layer(level: &str, size: i32) -> SliceLayer {
        SliceLayer {
            level: level.into(),
            size,
        }
    }

    fn gates_multi(on: bool) -> FeatureGates {
        let mut g = FeatureGates::default();
        g.set("TASMultiLayerTopology", on).unwrap();
        g
    }

    #[test]
    fn builder_table() {
        let rack16 = r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]"#;
        struct Case {
            name: &'static str,
            annotations: Vec<(&'static str, &'static str)>,
            multi_layer: bool,
            want: Result<Option<TopologyRequest>, RequestError>,
        }
        let req = |f: &dyn Fn(&mut TopologyRequest)| {
            let mut r = TopologyRequest::default();
            f(&mut r);
            Ok(Some(r))
        };
        let cases = vec![
            Case {
                name: "no annotations",
                annotations: vec![],
                multi_layer: true,
                want: Ok(None),
            },
            Case {
                name: "only a group name",
                annotations: vec![(GROUP, "g")],
                multi_layer: true,
                want: Ok(None),
            },
            Case {
                name: "slice-required without size gives no request",
                annotations: vec![(SREQ, "rack")],
                multi_layer: true,
                want: Ok(None),
            },
            Case {
                name: "slice-size without topology gives no request",
                annotations: vec![(SSIZE, "4")],
                multi_layer: true,
                want: Ok(None),
            },
            Case {
                name: "required",
                annotations: vec![(REQ, "block")],
                multi_layer: true,
                want: req(&|r| r.required = Some("block".into())),
            },
            Case {
                name: "required wins over preferred and unconstrained (even a bad one)",
                annotations: vec![(REQ, "block"), (PREF, "rack"), (UNC, "maybe")],
                multi_layer: true,
                want: req(&|r| r.required = Some("block".into())),
            },
            Case {
                name: "preferred wins over unconstrained",
                annotations: vec![(PREF, "rack"), (UNC, "true")],
                multi_layer: true,
                want: req(&|r| r.preferred = Some("rack".into())),
            },
            Case {
                name: "unconstrained true",
                annotations: vec![(UNC, "true")],
                multi_layer: true,
                want: req(&|r| r.unconstrained = Some(true)),
            },
            Case {
                name: "unconstrained F (Go ParseBool)",
                annotations: vec![(UNC, "F")],
                multi_layer: true,
                want: req(&|r| r.unconstrained = Some(false)),
            },
            Case {
                name: "unconstrained not a bool",
                annotations: vec![(UNC, "yes")],
                multi_layer: true,
                want: Err(RequestError::Unconstrained {
                    value: "yes".into(),
                }),
            },
            Case {
                name: "legacy slice pair with required",
                annotations: vec![(REQ, "block"), (SREQ, "rack"), (SSIZE, "4")],
                multi_layer: true,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.slice_layers = vec![layer("rack", 4)];
                }),
            },
            Case {
                name: "slice-only request (no main annotation)",
                annotations: vec![(SREQ, "rack"), (SSIZE, "+2")],
                multi_layer: true,
                want: req(&|r| r.slice_layers = vec![layer("rack", 2)]),
            },
            Case {
                name: "legacy size 0 is kept (validation rejects it)",
                annotations: vec![(REQ, "block"), (SREQ, "rack"), (SSIZE, "0")],
                multi_layer: true,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.slice_layers = vec![layer("rack", 0)];
                }),
            },
            Case {
                name: "legacy size not a number",
                annotations: vec![(REQ, "block"), (SREQ, "rack"), (SSIZE, "four")],
                multi_layer: true,
                want: Err(RequestError::SliceSize {
                    value: "four".into(),
                    kind: NumErrorKind::Syntax,
                }),
            },
            Case {
                name: "legacy size out of int32",
                annotations: vec![(REQ, "block"), (SREQ, "rack"), (SSIZE, "2147483648")],
                multi_layer: true,
                want: Err(RequestError::SliceSize {
                    value: "2147483648".into(),
                    kind: NumErrorKind::Range,
                }),
            },
            Case {
                name: "legacy slice-required without size is ignored",
                annotations: vec![(REQ, "block"), (SREQ, "rack")],
                multi_layer: true,
                want: req(&|r| r.required = Some("block".into())),
            },
            Case {
                name: "constraints with the gate on",
                annotations: vec![(REQ, "block"), (CONS, rack16)],
                multi_layer: true,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.slice_layers = vec![
                        layer("cloud.com/rack", 16),
                        layer("kubernetes.io/hostname", 4),
                    ];
                }),
            },
            Case {
                name: "constraints win over the legacy pair",
                annotations: vec![(REQ, "block"), (CONS, rack16), (SREQ, "x"), (SSIZE, "1")],
                multi_layer: true,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.slice_layers = vec![
                        layer("cloud.com/rack", 16),
                        layer("kubernetes.io/hostname", 4),
                    ];
                }),
            },
            Case {
                name: "constraints ignored with the gate off",
                annotations: vec![(REQ, "block"), (CONS, rack16)],
                multi_layer: false,
                want: req(&|r| r.required = Some("block".into())),
            },
            Case {
                name: "gate off: legacy pair used even with constraints",
                annotations: vec![(REQ, "block"), (CONS, rack16), (SREQ, "x"), (SSIZE, "1")],
                multi_layer: false,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.slice_layers = vec![layer("x", 1)];
                }),
            },
            Case {
                name: "constraints alone make a (non-explicit when gated off) request",
                annotations: vec![(CONS, rack16)],
                multi_layer: false,
                want: req(&|_| {}),
            },
            Case {
                name: "constraints-only request",
                annotations: vec![(CONS, r#"[{"topology":"r","size":2}]"#)],
                multi_layer: true,
                want: req(&|r| r.slice_layers = vec![layer("r", 2)]),
            },
            Case {
                name: "constraints invalid JSON",
                annotations: vec![(REQ, "block"), (CONS, "invalid-json")],
                multi_layer: true,
                want: Err(RequestError::ConstraintsJson(
                    "invalid character 'i' looking for beginning of value".into(),
                )),
            },
            Case {
                name: "constraints empty",
                annotations: vec![(REQ, "block"), (CONS, "[]")],
                multi_layer: true,
                want: Err(RequestError::ConstraintsCount(0)),
            },
            Case {
                name: "constraints null",
                annotations: vec![(REQ, "block"), (CONS, "null")],
                multi_layer: true,
                want: Err(RequestError::ConstraintsCount(0)),
            },
            Case {
                name: "constraints too many",
                annotations: vec![
                    (REQ, "block"),
                    (
                        CONS,
                        r#"[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},{"topology":"d","size":1}]"#,
                    ),
                ],
                multi_layer: true,
                want: Err(RequestError::ConstraintsCount(4)),
            },
            Case {
                name: "group name kept with required",
                annotations: vec![(REQ, "block"), (GROUP, "g")],
                multi_layer: true,
                want: req(&|r| {
                    r.required = Some("block".into());
                    r.group_name = Some("g".into());
                }),
            },
            Case {
                name: "group name kept with preferred",
                annotations: vec![(PREF, "block"), (GROUP, "g")],
                multi_layer: true,
                want: req(&|r| {
                    r.preferred = Some("block".into());
                    r.group_name = Some("g".into());
                }),
            },
            Case {
                name: "group name dropped with unconstrained",
                annotations: vec![(UNC, "true"), (GROUP, "g")],
                multi_layer: true,
                want: req(&|r| r.unconstrained = Some(true)),
            },
            Case {
                name: "group name dropped with a slice-only request",
                annotations: vec![(SREQ, "rack"), (SSIZE, "2"), (GROUP, "g")],
                multi_layer: true,
                want: req(&|r| r.slice_layers = vec![layer("rack", 2)]),
            },
        ];
        for case in cases {
            let got = TopologyRequest::from_annotations(
                &ann(&case.annotations),
                &gates_multi(case.multi_layer),
            );
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn builder_error_texts() {
        let g = FeatureGates::default();
        let err = |pairs: &[(&str, &str)]| {
            TopologyRequest::from_annotations(&ann(pairs), &g)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(&[(UNC, "yes")]),
            r#"strconv.ParseBool: parsing "yes": invalid syntax"#
        );
        assert_eq!(
            err(&[(UNC, "a\"b\n")]),
            r#"strconv.ParseBool: parsing "a\"b\n": invalid syntax"#
        );
        assert_eq!(
            err(&[(SREQ, "r"), (SSIZE, "1.5")]),
            r#"strconv.ParseInt: parsing "1.5": invalid syntax"#
        );
        assert_eq!(
            err(&[(SREQ, "r"), (SSIZE, "-2147483649")]),
            r#"strconv.ParseInt: parsing "-2147483649": value out of range"#
        );
        assert_eq!(
            err(&[(REQ, "b"), (CONS, "{")]),
            "failed to parse multi-layer topology constraints annotation: unexpected end of JSON input"
        );
        assert_eq!(
            err(&[(REQ, "b"), (CONS, "[]")]),
            "topology constraints must contain between 1 and 3 entries: got 0"
        );
    }

    #[test]
    fn is_explicit_follows_kueue() {
        let g = FeatureGates::default();
        let build = |pairs: &[(&str, &str)]| {
            TopologyRequest::from_annotations(&ann(pairs), &g)
                .unwrap()
                .unwrap()
        };
        assert!(build(&[(REQ, "b")]).is_explicit());
        assert!(build(&[(PREF, "b")]).is_explicit());
        assert!(
            build(&[(UNC, "false")]).is_explicit(),
            "unconstrained false still counts"
        );
        assert!(build(&[(SREQ, "r"), (SSIZE, "2")]).is_explicit());
        assert!(build(&[(CONS, r#"[{"topology":"r","size":2}]"#)]).is_explicit());
        assert!(!TopologyRequest::default().is_explicit());
        let gated_off = gates_multi(false);
        let req = TopologyRequest::from_annotations(
            &ann(&[(CONS, r#"[{"topology":"r","size":2}]"#)]),
            &gated_off,
        )
        .unwrap()
        .unwrap();
        assert!(!req.is_explicit());
    }

    #[test]
    fn json_decoding_like_go() {
        let ok = |s: &str| parse_slice_constraints(s).unwrap();
        assert_eq!(ok("null"), vec![]);
        assert_eq!(ok("  [ ]  "), vec![]);
        assert_eq!(ok(r#"[{"topology":"r","size":2}]"#), vec![layer("r", 2)]);
        // Case-insensitive field names, unknown fields ignored, last duplicate wins.
        assert_eq!(
            ok(r#"[{"TOPOLOGY":"a","Size":3,"extra":{"deep":[1,2,{"x":"]"}]},"size":4}]"#),
            vec![layer("a", 4)]
        );
        // Go's foldName: ſ folds to S, ı to I.
        assert_eq!(ok(r#"[{"topology":"a","ſıze":7}]"#), vec![layer("a", 7)]);
        // null fields and null elements keep zero values.
        assert_eq!(
            ok(r#"[null,{"topology":null,"size":null}]"#),
            vec![layer("", 0), layer("", 0)]
        );
        assert_eq!(
            ok(r#"[{"topology":"x","topology":null}]"#),
            vec![layer("x", 0)]
        );
        // Escapes, surrogate pairs, lone surrogates.
        assert_eq!(
            ok(r#"[{"topology":"a\/b\u00e9\ud83d\ude00\ud800x\"","size":-0}]"#),
            vec![layer("a/bé😀\u{fffd}x\"", 0)]
        );
        assert_eq!(
            ok("[{\"topology\":\"é\",\"size\":2147483647}]"),
            vec![layer("é", i32::MAX)]
        );
        assert_eq!(ok(r#"[{"size":-2147483648}]"#), vec![layer("", i32::MIN)]);
    }

    #[test]
    fn json_errors_like_go() {
        let err = |s: &str| parse_slice_constraints(s).unwrap_err();
        let cases: &[(&str, &str)] = &[
            ("", "unexpected end of JSON input"),
            ("   ", "unexpected end of JSON input"),
            ("[", "unexpected end of JSON input"),
            (r#"[{"topology":"a""#, "unexpected end of JSON input"),
            (
                "invalid-json",
                "invalid character 'i' looking for beginning of value",
            ),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("[]]", "invalid character ']' after top-level value"),
            ("[] x", "invalid character 'x' after top-level value"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            (
                "{1:2}",
                "invalid character '1' looking for beginning of object key string",
            ),
            (
                "{'a':1}",
                "invalid character '\\'' looking for beginning of object key string",
            ),
            (
                "tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                "[trux]",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            (
                "nul",
                "invalid character ' ' in literal null (expecting 'l')",
            ),
            (
                "fals",
                "invalid character ' ' in literal false (expecting 'e')",
            ),
            ("-", "invalid character ' ' in numeric literal"),
            ("[-a]", "invalid character 'a' in numeric literal"),
            (
                "1.",
                "invalid character ' ' after decimal point in numeric literal",
            ),
            (
                "1e+",
                "invalid character ' ' in exponent of numeric literal",
            ),
            ("01", "invalid character '1' after top-level value"),
            ("\"a\tb\"", "invalid character '\\t' in string literal"),
            ("\"\\x\"", "invalid character 'x' in string escape code"),
            (
                "\"\\u12g4\"",
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            ("é", "invalid character 'Ã' looking for beginning of value"),
            (
                "\u{a0}[]",
                "invalid character 'Â' looking for beginning of value",
            ),
            (
                "\u{1}",
                "invalid character '\\x01' looking for beginning of value",
            ),
            (
                "\u{feff}[]",
                "invalid character 'ï' looking for beginning of value",
            ),
            // Type errors (Go's UnmarshalTypeError), reported after a full decode.
            (
                "{}",
                "json: cannot unmarshal object into Go value of type []v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                "\"[]\"",
                "json: cannot unmarshal string into Go value of type []v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                "5",
                "json: cannot unmarshal number into Go value of type []v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                "true",
                "json: cannot unmarshal bool into Go value of type []v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                "[1]",
                "json: cannot unmarshal number into Go value of type v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                "[[]]",
                "json: cannot unmarshal array into Go value of type v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
            (
                r#"[{"topology":"a","size":"4"}]"#,
                "json: cannot unmarshal string into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"size":1.5}]"#,
                "json: cannot unmarshal number 1.5 into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"size":1e2}]"#,
                "json: cannot unmarshal number 1e2 into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"Size":2147483648}]"#,
                "json: cannot unmarshal number 2147483648 into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"size":99999999999999999999999}]"#,
                "json: cannot unmarshal number 99999999999999999999999 into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"size":true}]"#,
                "json: cannot unmarshal bool into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"size":{}}]"#,
                "json: cannot unmarshal object into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32",
            ),
            (
                r#"[{"topology":5}]"#,
                "json: cannot unmarshal number into Go struct field PodsetSliceRequiredTopologyConstraint.topology of type string",
            ),
            (
                r#"[{"topology":["a"]}]"#,
                "json: cannot unmarshal array into Go struct field PodsetSliceRequiredTopologyConstraint.topology of type string",
            ),
            // The first type error wins; a later element does not carry the struct context.
            (
                r#"[{"topology":"a","size":1},2,{"size":"x"}]"#,
                "json: cannot unmarshal number into Go value of type v1beta2.PodsetSliceRequiredTopologyConstraint",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(err(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn json_depth_limit_and_no_stack_overflow() {
        let deep_ok = format!("[{{\"x\":{}{}}}]", "[".repeat(9_990), "]".repeat(9_990));
        assert_eq!(
            parse_slice_constraints(&deep_ok).unwrap(),
            vec![layer("", 0)]
        );
        let too_deep = "[".repeat(200_000);
        assert_eq!(
            parse_slice_constraints(&too_deep).unwrap_err(),
            "invalid character '[' exceeded max depth"
        );
        let too_deep_obj = "{\"a\":".repeat(10_001);
        assert_eq!(
            parse_slice_constraints(&too_deep_obj).unwrap_err(),
            "invalid character '{' exceeded max depth"
        );
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        let cases: &[(&str, &str)] = &[
            ("", r#""""#),
            ("abc", r#""abc""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#),
            ("é日本😀", "\"é日本😀\""),
            (
                "\u{a0}\u{ad}\u{2028}\u{feff}",
                r#""\u00a0\u00ad\u2028\ufeff""#,
            ),
            ("\u{e000}\u{10ffff}", r#""\ue000\U0010ffff""#),
            ("a\u{300}", "\"a\u{300}\""),
            ("\u{300}", "\"\u{300}\""),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), *want, "input {input:?}");
        }
        assert!(is_print(' ') && !is_print('\u{85}') && is_print('\u{fe0f}'));
    }

    #[test]
    fn go_strconv_parsers() {
        assert_eq!(parse_bool("1"), Some(true));
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("FALSE"), Some(false));
        assert_eq!(parse_bool("tRUE"), None);
        assert_eq!(parse_bool(""), None);
        assert_eq!(parse_int("16", 32), Ok(16));
        assert_eq!(parse_int("+16", 32), Ok(16));
        assert_eq!(parse_int("-0", 32), Ok(0));
        assert_eq!(parse_int("2147483647", 32), Ok(i64::from(i32::MAX)));
        assert_eq!(parse_int("-2147483648", 32), Ok(i64::from(i32::MIN)));
        assert_eq!(parse_int("2147483648", 32), Err(NumErrorKind::Range));
        assert_eq!(parse_int("-9223372036854775808", 64), Ok(i64::MIN));
        assert_eq!(
            parse_int("9223372036854775808", 64),
            Err(NumErrorKind::Range)
        );
        assert_eq!(
            parse_int("99999999999999999999999x", 32),
            Err(NumErrorKind::Range)
        );
        for bad in [
            "", "+", "-", " 1", "1 ", "1_000", "0x10", "１", "1.0", "++1",
        ] {
            assert_eq!(parse_int(bad, 32), Err(NumErrorKind::Syntax), "{bad:?}");
        }
        assert_eq!(parse_uint("18446744073709551615", 64), Ok(u64::MAX));
        assert_eq!(
            parse_uint("18446744073709551616", 64),
            Err(NumErrorKind::Range)
        );
        assert_eq!(parse_uint("+1", 64), Err(NumErrorKind::Syntax));
        assert_eq!(parse_uint("-1", 64), Err(NumErrorKind::Syntax));
    }
}
