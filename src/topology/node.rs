//! Nodes as the placement engine sees them, and the node-level filters Kueue applies in
//! hostname-lowest mode: taints against tolerations, nodeSelector, required node affinity,
//! and the preferred-affinity score.
//!
//! All matching follows the standard Kubernetes semantics (`k8s.io/component-helpers`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm, Taint,
    Toleration,
};

use super::labels::NodeLabels;
use super::resources::ResourceList;

/// A node stripped to what placement needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: NodeLabels,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `status.allocatable`, parsed (CPU in millicores).
    pub allocatable: ResourceList,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// The node has no `Ready` condition at all (a failed node for hot swap, at once).
    pub ready_condition_missing: bool,
    /// `lastTransitionTime` of the `Ready` condition, in seconds since the Unix epoch.
    pub ready_since: Option<i64>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
}

impl NodeInfo {
    /// Ready and not cordoned: the only nodes Kueue's cache keeps.
    pub fn schedulable_and_ready(&self) -> bool {
        self.ready && !self.unschedulable
    }
}

// ---------------------------------------------------------------------------------------------
// Taints and tolerations (k8s.io/api/core/v1 `Toleration.ToleratesTaint`,
// k8s.io/component-helpers/scheduling/corev1 `FindMatchingUntoleratedTaint`).
// ---------------------------------------------------------------------------------------------

/// Taint effect that keeps new pods off a node.
pub const TAINT_EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect that keeps new pods off a node and evicts running ones.
pub const TAINT_EFFECT_NO_EXECUTE: &str = "NoExecute";
/// Taint effect that is only a preference; placement ignores it.
pub const TAINT_EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";

/// Whether `toleration` tolerates `taint`, exactly as `Toleration.ToleratesTaint`:
///
/// * a non-empty toleration effect must equal the taint's effect (empty matches every effect);
/// * a non-empty toleration key must equal the taint's key (empty matches every key);
/// * operator `Exists` matches any value; operator `Equal` or empty compares the values
///   (a missing value is the empty string);
/// * any other operator does not match. This includes `Lt` and `Gt`, which Kubernetes only
///   evaluates behind the alpha `TaintTolerationComparisonOperators` gate (off by default),
///   and which Kueue's TAS does not enable.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// The first taint with effect `NoSchedule` or `NoExecute` that no toleration tolerates, in
/// the node's order (`PreferNoSchedule` and unknown effects are ignored), or `None` when the
/// node accepts the pod. This is Kueue's TAS taint filter.
pub fn first_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == TAINT_EFFECT_NO_SCHEDULE || t.effect == TAINT_EFFECT_NO_EXECUTE)
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// A taint as Go's `Taint.ToString()` prints it: `key=value:Effect`, or `key:Effect` when the
/// value is empty. Kueue counts excluded nodes under this string.
pub fn taint_to_string(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={}:{}", t.key, value, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

// ---------------------------------------------------------------------------------------------
// nodeSelector
// ---------------------------------------------------------------------------------------------

/// Whether the node labels satisfy an equality selector (`spec.nodeSelector`): every
/// `key: value` of the selector must be present with the same value. An empty selector
/// matches every node.
pub fn matches_node_selector(labels: &NodeLabels, selector: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v.as_str()))
}

// ---------------------------------------------------------------------------------------------
// Node affinity (k8s.io/component-helpers/scheduling/corev1/nodeaffinity)
// ---------------------------------------------------------------------------------------------

/// The only field a `matchFields` requirement may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// A node-affinity expression that Kubernetes would refuse to evaluate.
///
/// `path` names the term and the expression the way the API server does, e.g.
/// `nodeSelectorTerms[1].matchExpressions[0]` for required affinity or
/// `preferredDuringSchedulingIgnoredDuringExecution[2].preference.matchFields[0]` for a
/// preferred term.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid node affinity: {path}{problem}")]
pub struct AffinityError {
    /// The term and expression, e.g. `nodeSelectorTerms[1].matchExpressions[0]`.
    pub path: String,
    /// What is wrong with it.
    pub problem: AffinityProblem,
}

/// What is wrong with one node-affinity expression. Each message starts with the sub-field it
/// is about (`.operator`, `.key`, `.values` or `.values[i]`), so that appended to
/// [`AffinityError::path`] it reads like a Kubernetes field error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AffinityProblem {
    /// A `matchExpressions` operator other than In, NotIn, Exists, DoesNotExist, Gt, Lt.
    #[error(
        ".operator: Unsupported value: {operator:?}: supported values: \"In\", \"NotIn\", \
         \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\""
    )]
    UnsupportedOperator {
        /// The operator as written.
        operator: String,
    },
    /// A `matchFields` operator other than In and NotIn.
    #[error(".operator: Unsupported value: {operator:?}: supported values: \"In\", \"NotIn\"")]
    UnsupportedFieldOperator {
        /// The operator as written.
        operator: String,
    },
    /// A `matchFields` key other than `metadata.name`.
    #[error(".key: Unsupported value: {key:?}: supported values: \"metadata.name\"")]
    UnsupportedField {
        /// The key as written.
        key: String,
    },
    /// A `matchExpressions` key that is not a valid label name.
    #[error(".key: Invalid value: {key:?}: {reason}")]
    InvalidKey {
        /// The key as written.
        key: String,
        /// The label-name rule it breaks.
        reason: String,
    },
    /// `In` / `NotIn` without values.
    #[error(".values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")]
    EmptyValues,
    /// `Exists` / `DoesNotExist` with values.
    #[error(
        ".values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
    )]
    UnexpectedValues {
        /// The values as written.
        values: Vec<String>,
    },
    /// `Gt` / `Lt` with zero or several values.
    #[error(
        ".values: Invalid value: {values:?}: for 'Gt', 'Lt' operators, exactly one value is required"
    )]
    NotExactlyOneValue {
        /// The values as written.
        values: Vec<String>,
    },
    /// `Gt` / `Lt` with a value that is not a base-10 int64.
    #[error(
        ".values[{index}]: Invalid value: {value:?}: for 'Gt', 'Lt' operators, the value must be an integer"
    )]
    NotAnInteger {
        /// Position in `values`.
        index: usize,
        /// The value as written.
        value: String,
    },
    /// A `matchExpressions` value that is not a valid label value.
    #[error(".values[{index}]: Invalid value: {value:?}: {reason}")]
    InvalidValue {
        /// Position in `values`.
        index: usize,
        /// The value as written.
        value: String,
        /// The label-value rule it breaks.
        reason: String,
    },
    /// A `matchFields` `In` / `NotIn` without exactly one value.
    #[error(".values: Invalid value: {values:?}: must have one element")]
    FieldNotOneValue {
        /// The values as written.
        values: Vec<String>,
    },
}

/// A parsed `matchExpressions` operator with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A parsed `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelRequirement {
    key: String,
    op: LabelOp,
}

impl LabelRequirement {
    /// `labels.Requirement.Matches`.
    fn matches(&self, labels: &NodeLabels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            LabelOp::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            LabelOp::NotIn(values) => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
            LabelOp::Gt(bound) => parse_go_int(value).is_some_and(|v| v > *bound),
            LabelOp::Lt(bound) => parse_go_int(value).is_some_and(|v| v < *bound),
        }
    }
}

/// A node label value read as Go's `strconv.ParseInt(v, 10, 64)` reads it (optional sign,
/// decimal digits, no spaces); `None` when absent or not an integer.
fn parse_go_int(value: Option<&str>) -> Option<i64> {
    value.and_then(|v| v.parse::<i64>().ok())
}

/// A parsed `matchFields` requirement (the field is always `metadata.name`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum FieldRequirement {
    NameIs(String),
    NameIsNot(String),
}

/// A parsed, non-empty `NodeSelectorTerm`: the AND of its requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl Term {
    /// Parses a term; `Ok(None)` for an empty term (no expressions and no fields), which
    /// Kubernetes drops because it selects nothing.
    fn parse(term: &NodeSelectorTerm, path: &str) -> Result<Option<Self>, AffinityError> {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return Ok(None);
        }
        let labels = expressions
            .iter()
            .enumerate()
            .map(|(i, r)| {
                parse_label_requirement(r).map_err(|problem| AffinityError {
                    path: format!("{path}.matchExpressions[{i}]"),
                    problem,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let fields = fields
            .iter()
            .enumerate()
            .map(|(i, r)| {
                parse_field_requirement(r).map_err(|problem| AffinityError {
                    path: format!("{path}.matchFields[{i}]"),
                    problem,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Self { labels, fields }))
    }

    /// `nodeSelectorTerm.match`: all label requirements, then all field requirements.
    fn matches(&self, node: &NodeInfo) -> bool {
        if !self.labels.iter().all(|r| r.matches(&node.labels)) {
            return false;
        }
        // Kubernetes only evaluates matchFields when the node has a name (its field set is
        // empty otherwise), so a nameless node passes them.
        if node.name.is_empty() {
            return true;
        }
        self.fields.iter().all(|f| match f {
            FieldRequirement::NameIs(name) => node.name == *name,
            FieldRequirement::NameIsNot(name) => node.name != *name,
        })
    }
}

fn parse_label_requirement(
    r: &NodeSelectorRequirement,
) -> Result<LabelRequirement, AffinityProblem> {
    let values = r.values.as_deref().unwrap_or_default();
    #[derive(Clone, Copy)]
    enum Kind {
        In,
        NotIn,
        Exists,
        DoesNotExist,
        Gt,
        Lt,
    }
    let kind = match r.operator.as_str() {
        "In" => Kind::In,
        "NotIn" => Kind::NotIn,
        "Exists" => Kind::Exists,
        "DoesNotExist" => Kind::DoesNotExist,
        "Gt" => Kind::Gt,
        "Lt" => Kind::Lt,
        other => {
            return Err(AffinityProblem::UnsupportedOperator {
                operator: other.to_string(),
            });
        }
    };
    if let Err(reason) = validate_qualified_name(&r.key) {
        return Err(AffinityProblem::InvalidKey {
            key: r.key.clone(),
            reason,
        });
    }
    match kind {
        Kind::In | Kind::NotIn if values.is_empty() => return Err(AffinityProblem::EmptyValues),
        Kind::Exists | Kind::DoesNotExist if !values.is_empty() => {
            return Err(AffinityProblem::UnexpectedValues {
                values: values.to_vec(),
            });
        }
        Kind::Gt | Kind::Lt if values.len() != 1 => {
            return Err(AffinityProblem::NotExactlyOneValue {
                values: values.to_vec(),
            });
        }
        _ => {}
    }
    for (index, value) in values.iter().enumerate() {
        if let Err(reason) = validate_label_value(value) {
            return Err(AffinityProblem::InvalidValue {
                index,
                value: value.clone(),
                reason,
            });
        }
    }
    let bound = |values: &[String]| -> Result<i64, AffinityProblem> {
        let value = values.first().map(String::as_str).unwrap_or_default();
        value
            .parse::<i64>()
            .map_err(|_| AffinityProblem::NotAnInteger {
                index: 0,
                value: value.to_string(),
            })
    };
    let op = match kind {
        Kind::In => LabelOp::In(values.to_vec()),
        Kind::NotIn => LabelOp::NotIn(values.to_vec()),
        Kind::Exists => LabelOp::Exists,
        Kind::DoesNotExist => LabelOp::DoesNotExist,
        Kind::Gt => LabelOp::Gt(bound(values)?),
        Kind::Lt => LabelOp::Lt(bound(values)?),
    };
    Ok(LabelRequirement {
        key: r.key.clone(),
        op,
    })
}

fn parse_field_requirement(
    r: &NodeSelectorRequirement,
) -> Result<FieldRequirement, AffinityProblem> {
    let values = r.values.as_deref().unwrap_or_default();
    let negate = match r.operator.as_str() {
        "In" => false,
        "NotIn" => true,
        other => {
            return Err(AffinityProblem::UnsupportedFieldOperator {
                operator: other.to_string(),
            });
        }
    };
    if r.key != NODE_NAME_FIELD {
        return Err(AffinityProblem::UnsupportedField { key: r.key.clone() });
    }
    let [value] = values else {
        return Err(AffinityProblem::FieldNotOneValue {
            values: values.to_vec(),
        });
    };
    Ok(if negate {
        FieldRequirement::NameIsNot(value.clone())
    } else {
        FieldRequirement::NameIs(value.clone())
    })
}

/// Required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`), parsed once and
/// matched against many nodes.
///
/// Semantics: the OR of the terms; each term is the AND of its `matchExpressions` (on labels)
/// and `matchFields` (only `metadata.name`). A term with neither selects nothing, so an empty
/// term list, or a list of empty terms, matches no node. Every term is validated up front
/// (like `nodeaffinity.NewNodeSelector`): one invalid expression anywhere is an error, whatever
/// the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredAffinity {
    terms: Vec<Term>,
}

impl RequiredAffinity {
    /// Parses and validates a `NodeSelector`.
    pub fn parse(selector: &NodeSelector) -> Result<Self, AffinityError> {
        let mut terms = Vec::with_capacity(selector.node_selector_terms.len());
        for (i, term) in selector.node_selector_terms.iter().enumerate() {
            if let Some(t) = Term::parse(term, &format!("nodeSelectorTerms[{i}]"))? {
                terms.push(t);
            }
        }
        Ok(Self { terms })
    }

    /// Whether `node` satisfies at least one term.
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.terms.iter().any(|t| t.matches(node))
    }
}

/// Preferred node affinity (`preferredDuringSchedulingIgnoredDuringExecution`), parsed once
/// and scored against many nodes (`nodeaffinity.NewPreferredSchedulingTerms`).
///
/// A term with weight 0 or an empty preference is dropped without validation: Kubernetes
/// documents an empty preference as "matches all objects with implicit weight 0", so it never
/// adds to a score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredAffinity {
    terms: Vec<(Term, i64)>,
}

impl PreferredAffinity {
    /// Parses and validates the preferred terms.
    pub fn parse(terms: &[PreferredSchedulingTerm]) -> Result<Self, AffinityError> {
        let mut parsed = Vec::with_capacity(terms.len());
        for (i, term) in terms.iter().enumerate() {
            if term.weight == 0 {
                continue;
            }
            let path = format!("preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
            if let Some(t) = Term::parse(&term.preference, &path)? {
                parsed.push((t, i64::from(term.weight)));
            }
        }
        Ok(Self { terms: parsed })
    }

    /// The sum of the weights of the terms `node` matches.
    pub fn score(&self, node: &NodeInfo) -> i64 {
        self.terms
            .iter()
            .filter(|(t, _)| t.matches(node))
            .fold(0i64, |sum, (_, w)| sum.saturating_add(*w))
    }
}

/// Whether `node` satisfies the required node affinity `affinity` (see [`RequiredAffinity`]).
/// To match many nodes, parse once with [`RequiredAffinity::parse`].
pub fn matches_required_affinity(
    node: &NodeInfo,
    affinity: &NodeSelector,
) -> Result<bool, AffinityError> {
    Ok(RequiredAffinity::parse(affinity)?.matches(node))
}

/// The sum of the weights of the preferred terms `node` matches (Kueue's `affinityScore` under
/// `TASRespectNodeAffinityPreferred`; see [`PreferredAffinity`]). To score many nodes, parse
/// once with [`PreferredAffinity::parse`].
pub fn preferred_affinity_score(
    node: &NodeInfo,
    terms: &[PreferredSchedulingTerm],
) -> Result<i64, AffinityError> {
    Ok(PreferredAffinity::parse(terms)?.score(node))
}

// ---------------------------------------------------------------------------------------------
// Label syntax (k8s.io/apimachinery/pkg/util/validation), as `labels.NewRequirement` checks it.
// ---------------------------------------------------------------------------------------------

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, at most 253 bytes.
fn validate_dns1123_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters".to_string());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(e)) => {
                (f.is_ascii_lowercase() || f.is_ascii_digit())
                    && (e.is_ascii_lowercase() || e.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    };
    if s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .to_string(),
        )
    }
}

/// `validation.IsQualifiedName`: an optional DNS-1123 subdomain prefix and `/`, then a name of
/// at most 63 characters.
fn validate_qualified_name(key: &str) -> Result<(), String> {
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Err(format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and \
                 '/' (e.g. 'example.com/MyName')"
            ));
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".to_string());
        }
        validate_dns1123_subdomain(prefix).map_err(|m| format!("prefix part {m}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".to_string());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        return Err(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    Ok(())
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of the qualified-name form.
fn validate_label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        return Err(format!(
            "a valid label must be an empty string or {QUALIFIED_NAME_MSG}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            ..Taint::default()
        }
    }

    fn tol(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: opt(key),
            operator: opt(operator),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
        NodeInfo {
            name: name.to_string(),
            labels: labels.iter().copied().collect(),
            ..NodeInfo::default()
        }
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn term(
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    fn selector(terms: Vec<NodeSelectorTerm>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms,
        }
    }

    #[test]
    fn toleration_matching() {
        let gpu = taint("nvidia.com/gpu", "present", "NoSchedule");
        let bare = taint("dedicated", "", "NoExecute");
        let cases: &[(&str, Toleration, &Taint, bool)] = &[
            (
                "exists same key",
                tol("nvidia.com/gpu", "Exists", "", ""),
                &gpu,
                true,
            ),
            (
                "exists other key",
                tol("other", "Exists", "", ""),
                &gpu,
                false,
            ),
            (
                "empty key exists matches all",
                tol("", "Exists", "", ""),
                &gpu,
                true,
            ),
            (
                "empty key exists matches all (2)",
                tol("", "Exists", "", ""),
                &bare,
                true,
            ),
            (
                "equal same value",
                tol("nvidia.com/gpu", "Equal", "present", ""),
                &gpu,
                true,
            ),
            (
                "equal other value",
                tol("nvidia.com/gpu", "Equal", "absent", ""),
                &gpu,
                false,
            ),
            (
                "empty operator is Equal",
                tol("nvidia.com/gpu", "", "present", ""),
                &gpu,
                true,
            ),
            (
                "empty operator other value",
                tol("nvidia.com/gpu", "", "x", ""),
                &gpu,
                false,
            ),
            (
                "equal empty value vs none",
                tol("dedicated", "Equal", "", ""),
                &bare,
                true,
            ),
            (
                "equal value vs none",
                tol("dedicated", "Equal", "x", ""),
                &bare,
                false,
            ),
            (
                "effect matches",
                tol("nvidia.com/gpu", "Exists", "", "NoSchedule"),
                &gpu,
                true,
            ),
            (
                "effect differs",
                tol("nvidia.com/gpu", "Exists", "", "NoExecute"),
                &gpu,
                false,
            ),
            (
                "empty effect matches all",
                tol("dedicated", "Exists", "", ""),
                &bare,
                true,
            ),
            (
                "empty key equal compares value only",
                tol("", "Equal", "present", ""),
                &gpu,
                true,
            ),
            (
                "Gt is gated off",
                tol("nvidia.com/gpu", "Gt", "1", ""),
                &gpu,
                false,
            ),
            (
                "unknown operator",
                tol("nvidia.com/gpu", "Bogus", "", ""),
                &gpu,
                false,
            ),
            (
                "operator is case sensitive",
                tol("nvidia.com/gpu", "exists", "", ""),
                &gpu,
                false,
            ),
        ];
        for (name, t, taint, want) in cases {
            assert_eq!(tolerates(t, taint), *want, "{name}");
        }
    }

    #[test]
    fn untolerated_taints() {
        let taints = vec![
            taint("soft", "", "PreferNoSchedule"),
            taint("a", "1", "NoSchedule"),
            taint("b", "", "NoExecute"),
        ];
        let cases: &[(&str, Vec<Toleration>, Option<&str>)] = &[
            ("no tolerations: first hard taint", vec![], Some("a")),
            (
                "first tolerated",
                vec![tol("a", "Exists", "", "")],
                Some("b"),
            ),
            (
                "all tolerated",
                vec![
                    tol("a", "Equal", "1", "NoSchedule"),
                    tol("b", "Exists", "", ""),
                ],
                None,
            ),
            ("wildcard", vec![tol("", "Exists", "", "")], None),
            (
                "wrong effect",
                vec![
                    tol("a", "Exists", "", "NoExecute"),
                    tol("b", "Exists", "", ""),
                ],
                Some("a"),
            ),
        ];
        for (name, tols, want) in cases {
            let got = first_untolerated_taint(&taints, tols).map(|t| t.key.as_str());
            assert_eq!(got, *want, "{name}");
        }
        assert_eq!(
            first_untolerated_taint(&[taint("soft", "", "PreferNoSchedule")], &[]),
            None
        );
        assert_eq!(
            first_untolerated_taint(&[taint("odd", "", "Whatever")], &[]),
            None
        );
        assert_eq!(first_untolerated_taint(&[], &[]), None);
    }

    #[test]
    fn taint_strings() {
        let cases = [
            (
                taint("nvidia.com/gpu", "present", "NoSchedule"),
                "nvidia.com/gpu=present:NoSchedule",
            ),
            (taint("dedicated", "", "NoExecute"), "dedicated:NoExecute"),
            (
                Taint {
                    value: Some(String::new()),
                    ..taint("k", "", "NoSchedule")
                },
                "k:NoSchedule",
            ),
            (taint("k", "v", ""), "k=v:"),
        ];
        for (t, want) in cases {
            assert_eq!(taint_to_string(&t), want);
        }
    }

    #[test]
    fn node_selector() {
        let labels: NodeLabels = [("a", "1"), ("b", "2")].into_iter().collect();
        let sel = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases = [
            (sel(&[]), true),
            (sel(&[("a", "1")]), true),
            (sel(&[("a", "1"), ("b", "2")]), true),
            (sel(&[("a", "2")]), false),
            (sel(&[("c", "")]), false),
            (sel(&[("a", "1"), ("c", "3")]), false),
        ];
        for (s, want) in cases {
            assert_eq!(matches_node_selector(&labels, &s), want, "{s:?}");
        }
    }

    #[test]
    fn required_affinity_matching() {
        let n = node("x1", &[("zone", "a"), ("gen", "5"), ("gpu", "")]);
        let cases: Vec<(&str, NodeSelector, bool)> = vec![
            ("no terms", selector(vec![]), false),
            (
                "only empty term",
                selector(vec![term(vec![], vec![])]),
                false,
            ),
            (
                "In",
                selector(vec![term(vec![req("zone", "In", &["a", "b"])], vec![])]),
                true,
            ),
            (
                "In miss",
                selector(vec![term(vec![req("zone", "In", &["b"])], vec![])]),
                false,
            ),
            (
                "In absent",
                selector(vec![term(vec![req("rack", "In", &["a"])], vec![])]),
                false,
            ),
            (
                "NotIn",
                selector(vec![term(vec![req("zone", "NotIn", &["b"])], vec![])]),
                true,
            ),
            (
                "NotIn hit",
                selector(vec![term(vec![req("zone", "NotIn", &["a"])], vec![])]),
                false,
            ),
            (
                "NotIn absent",
                selector(vec![term(vec![req("rack", "NotIn", &["a"])], vec![])]),
                true,
            ),
            (
                "Exists",
                selector(vec![term(vec![req("gpu", "Exists", &[])], vec![])]),
                true,
            ),
            (
                "Exists miss",
                selector(vec![term(vec![req("tpu", "Exists", &[])], vec![])]),
                false,
            ),
            (
                "DoesNotExist",
                selector(vec![term(vec![req("tpu", "DoesNotExist", &[])], vec![])]),
                true,
            ),
            (
                "DoesNotExist hit",
                selector(vec![term(vec![req("gpu", "DoesNotExist", &[])], vec![])]),
                false,
            ),
            (
                "Gt",
                selector(vec![term(vec![req("gen", "Gt", &["4"])], vec![])]),
                true,
            ),
            (
                "Gt equal",
                selector(vec![term(vec![req("gen", "Gt", &["5"])], vec![])]),
                false,
            ),
            (
                "Lt",
                selector(vec![term(vec![req("gen", "Lt", &["6"])], vec![])]),
                true,
            ),
            (
                "Lt equal",
                selector(vec![term(vec![req("gen", "Lt", &["5"])], vec![])]),
                false,
            ),
            (
                "Gt non-integer label",
                selector(vec![term(vec![req("zone", "Gt", &["1"])], vec![])]),
                false,
            ),
            (
                "Gt absent label",
                selector(vec![term(vec![req("none", "Gt", &["1"])], vec![])]),
                false,
            ),
            (
                "AND inside a term",
                selector(vec![term(
                    vec![req("zone", "In", &["a"]), req("gen", "Gt", &["7"])],
                    vec![],
                )]),
                false,
            ),
            (
                "OR across terms",
                selector(vec![
                    term(vec![req("zone", "In", &["b"])], vec![]),
                    term(vec![req("gen", "In", &["5"])], vec![]),
                ]),
                true,
            ),
            (
                "empty term skipped, other matches",
                selector(vec![
                    term(vec![], vec![]),
                    term(vec![req("zone", "In", &["a"])], vec![]),
                ]),
                true,
            ),
            (
                "matchFields In",
                selector(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["x1"])],
                )]),
                true,
            ),
            (
                "matchFields In other",
                selector(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["x2"])],
                )]),
                false,
            ),
            (
                "matchFields NotIn",
                selector(vec![term(
                    vec![],
                    vec![req("metadata.name", "NotIn", &["x2"])],
                )]),
                true,
            ),
            (
                "labels and fields ANDed",
                selector(vec![term(
                    vec![req("zone", "In", &["a"])],
                    vec![req("metadata.name", "NotIn", &["x1"])],
                )]),
                false,
            ),
        ];
        for (name, sel, want) in cases {
            assert_eq!(matches_required_affinity(&n, &sel), Ok(want), "{name}");
        }
    }

    #[test]
    fn match_fields_ignored_for_nameless_node() {
        let sel = selector(vec![term(
            vec![],
            vec![req("metadata.name", "In", &["x1"])],
        )]);
        assert_eq!(matches_required_affinity(&node("", &[]), &sel), Ok(true));
    }

    #[test]
    fn required_affinity_errors() {
        let n = node("x1", &[("zone", "a")]);
        let cases: Vec<(&str, NodeSelector, &str, AffinityProblem)> = vec![
            (
                "unknown operator",
                selector(vec![term(vec![req("zone", "Like", &["a"])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::UnsupportedOperator {
                    operator: "Like".into(),
                },
            ),
            (
                "In without values",
                selector(vec![
                    term(vec![req("zone", "In", &["a"])], vec![]),
                    term(
                        vec![req("zone", "In", &["a"]), req("zone", "NotIn", &[])],
                        vec![],
                    ),
                ]),
                "nodeSelectorTerms[1].matchExpressions[1]",
                AffinityProblem::EmptyValues,
            ),
            (
                "Exists with values",
                selector(vec![term(vec![req("zone", "Exists", &["a"])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::UnexpectedValues {
                    values: vec!["a".into()],
                },
            ),
            (
                "DoesNotExist with values",
                selector(vec![term(
                    vec![req("zone", "DoesNotExist", &["a"])],
                    vec![],
                )]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::UnexpectedValues {
                    values: vec!["a".into()],
                },
            ),
            (
                "Gt with two values",
                selector(vec![term(vec![req("gen", "Gt", &["1", "2"])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::NotExactlyOneValue {
                    values: vec!["1".into(), "2".into()],
                },
            ),
            (
                "Lt without values",
                selector(vec![term(vec![req("gen", "Lt", &[])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::NotExactlyOneValue { values: vec![] },
            ),
            (
                "Gt not an integer",
                selector(vec![term(vec![req("gen", "Gt", &["five"])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::NotAnInteger {
                    index: 0,
                    value: "five".into(),
                },
            ),
            (
                "bad label key",
                selector(vec![term(vec![req("bad key", "Exists", &[])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::InvalidKey {
                    key: "bad key".into(),
                    reason: format!("name part {QUALIFIED_NAME_MSG}"),
                },
            ),
            (
                "bad label value",
                selector(vec![term(vec![req("zone", "In", &["a b"])], vec![])]),
                "nodeSelectorTerms[0].matchExpressions[0]",
                AffinityProblem::InvalidValue {
                    index: 0,
                    value: "a b".into(),
                    reason: format!(
                        "a valid label must be an empty string or {QUALIFIED_NAME_MSG}"
                    ),
                },
            ),
            (
                "field operator",
                selector(vec![term(
                    vec![],
                    vec![req("metadata.name", "Exists", &[])],
                )]),
                "nodeSelectorTerms[0].matchFields[0]",
                AffinityProblem::UnsupportedFieldOperator {
                    operator: "Exists".into(),
                },
            ),
            (
                "field key",
                selector(vec![term(vec![], vec![req("metadata.uid", "In", &["u"])])]),
                "nodeSelectorTerms[0].matchFields[0]",
                AffinityProblem::UnsupportedField {
                    key: "metadata.uid".into(),
                },
            ),
            (
                "field with two values",
                selector(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["x1", "x2"])],
                )]),
                "nodeSelectorTerms[0].matchFields[0]",
                AffinityProblem::FieldNotOneValue {
                    values: vec!["x1".into(), "x2".into()],
                },
            ),
        ];
        for (name, sel, path, problem) in cases {
            let want = AffinityError {
                path: path.to_string(),
                problem,
            };
            assert_eq!(matches_required_affinity(&n, &sel), Err(want), "{name}");
        }
    }

    #[test]
    fn affinity_error_message_names_term_and_expression() {
        let sel = selector(vec![term(vec![req("zone", "Like", &[])], vec![])]);
        let err = matches_required_affinity(&node("x1", &[]), &sel)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "invalid node affinity: nodeSelectorTerms[0].matchExpressions[0].operator: \
                 Unsupported value: \"Like\": supported values: \"In\", \"NotIn\", \"Exists\", \
                 \"DoesNotExist\", \"Gt\", \"Lt\""
            )
        );
    }

    #[test]
    fn qualified_names() {
        let cases = [
            ("zone", true),
            ("topology.kubernetes.io/zone", true),
            ("cloud.provider.com/topology-block", true),
            ("A_b.c-D", true),
            ("", false),
            ("/zone", false),
            ("example.com/", false),
            ("a/b/c", false),
            ("Example.com/zone", false),
            ("-zone", false),
            ("zone-", false),
            (&"x".repeat(64), false),
        ];
        for (key, ok) in cases {
            assert_eq!(validate_qualified_name(key).is_ok(), ok, "{key:?}");
        }
        assert!(validate_label_value("").is_ok());
        assert!(validate_label_value(&"v".repeat(64)).is_err());
    }

    fn pref(weight: i32, t: NodeSelectorTerm) -> PreferredSchedulingTerm {
        PreferredSchedulingTerm {
            weight,
            preference: t,
        }
    }

    #[test]
    fn preferred_scores() {
        let n = node("x1", &[("zone", "a"), ("gen", "5")]);
        let cases: Vec<(&str, Vec<PreferredSchedulingTerm>, i64)> = vec![
            ("none", vec![], 0),
            (
                "one match",
                vec![pref(10, term(vec![req("zone", "In", &["a"])], vec![]))],
                10,
            ),
            (
                "sum of matches",
                vec![
                    pref(10, term(vec![req("zone", "In", &["a"])], vec![])),
                    pref(5, term(vec![req("gen", "Gt", &["1"])], vec![])),
                    pref(7, term(vec![req("zone", "In", &["b"])], vec![])),
                ],
                15,
            ),
            (
                "empty preference adds nothing",
                vec![pref(50, term(vec![], vec![]))],
                0,
            ),
            (
                "weight zero skipped even if invalid",
                vec![pref(0, term(vec![req("zone", "Like", &[])], vec![]))],
                0,
            ),
            (
                "matchFields",
                vec![pref(
                    3,
                    term(vec![], vec![req("metadata.name", "In", &["x1"])]),
                )],
                3,
            ),
        ];
        for (name, terms, want) in cases {
            assert_eq!(preferred_affinity_score(&n, &terms), Ok(want), "{name}");
        }
    }

    #[test]
    fn preferred_errors() {
        let terms = vec![
            pref(1, term(vec![req("zone", "In", &["a"])], vec![])),
            pref(
                2,
                term(
                    vec![req("zone", "In", &["a"])],
                    vec![req("metadata.name", "Gt", &["1"])],
                ),
            ),
        ];
        assert_eq!(
            preferred_affinity_score(&node("x1", &[]), &terms),
            Err(AffinityError {
                path:
                    "preferredDuringSchedulingIgnoredDuringExecution[1].preference.matchFields[0]"
                        .to_string(),
                problem: AffinityProblem::UnsupportedFieldOperator {
                    operator: "Gt".into()
                },
            })
        );
    }

    #[test]
    fn parsed_affinity_reused_across_nodes() {
        let sel = selector(vec![term(vec![req("zone", "In", &["a"])], vec![])]);
        let parsed = RequiredAffinity::parse(&sel);
        assert!(parsed.is_ok());
        if let Ok(parsed) = parsed {
            assert!(parsed.matches(&node("x1", &[("zone", "a")])));
            assert!(!parsed.matches(&node("x2", &[("zone", "b")])));
        }
    }
}
