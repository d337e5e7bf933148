//! Kueue's validation of the `kueue.x-k8s.io/podset-*` annotations, with its exact words.
//!
//! A port of `pkg/controller/jobframework/tas_validation.go` (tas-semantics §2.3, §2.4):
//! [`validate_podset_annotations`] is `ValidateTASPodSetRequest`,
//! [`validate_slice_size_upper_bound`] is `ValidateSliceSizeAnnotationUpperBound` and
//! [`validate_podset_groups`] is `ValidatePodSetGroupingTopology`. Errors are Kubernetes
//! `field.Error`s whose [`Display`](std::fmt::Display) is byte-for-byte what
//! `field.Error.Error()` prints, and [`aggregate_message`] joins them the way
//! `ErrorList.ToAggregate().Error()` does, so a denial reads exactly like Kueue's.
//!
//! Invariants: every error is reported in Kueue's order (no early exit except where Kueue
//! stops); nothing here panics, whatever the annotation values (huge numbers, any Unicode,
//! deeply nested JSON).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use super::gates::FeatureGates;
use super::request::{TopologyRequest, gocompat, parse_slice_constraints};
use crate::keys;

/// The kind of a field error (the subset of k8s `field.ErrorType` Kueue uses here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    /// `FieldValueInvalid`, printed `Invalid value`.
    Invalid,
    /// `FieldValueForbidden`, printed `Forbidden` (never with a value).
    Forbidden,
    /// `FieldValueRequired`, printed `Required value` (never with a value).
    Required,
    /// `FieldValueDuplicate`, printed `Duplicate value`.
    Duplicate,
}

impl FieldErrorType {
    /// The k8s `ErrorType.String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "Invalid value",
            Self::Forbidden => "Forbidden",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
        }
    }

    /// The k8s `ErrorType` constant (`FieldValueInvalid`, …), as admission causes carry it.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::Forbidden => "FieldValueForbidden",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }
}

impl fmt::Display for FieldErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bad value of a field error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldValue {
    /// A string, printed Go-quoted (`%q`).
    Str(String),
    /// An integer, printed as is.
    Int(i64),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Str(s) => f.write_str(&gocompat::quote(s)),
            Self::Int(i) => write!(f, "{i}"),
        }
    }
}

/// One validation error, as k8s `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldError {
    /// What went wrong.
    pub error_type: FieldErrorType,
    /// The field path, e.g. `spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]`.
    pub field: String,
    /// The offending value; `None` when Kueue omits it (`field.OmitValueType{}`), and always
    /// `None` for `Forbidden` and `Required`, which k8s prints without a value.
    pub value: Option<FieldValue>,
    /// The human explanation.
    pub detail: String,
}

impl FieldError {
    fn invalid(field: String, value: Option<FieldValue>, detail: impl Into<String>) -> Self {
        Self {
            error_type: FieldErrorType::Invalid,
            field,
            value,
            detail: detail.into(),
        }
    }

    fn forbidden(field: String, detail: impl Into<String>) -> Self {
        Self {
            error_type: FieldErrorType::Forbidden,
            field,
            value: None,
            detail: detail.into(),
        }
    }

    fn required(field: String, detail: impl Into<String>) -> Self {
        Self {
            error_type: FieldErrorType::Required,
            field,
            value: None,
            detail: detail.into(),
        }
    }

    fn duplicate(field: String, value: FieldValue) -> Self {
        Self {
            error_type: FieldErrorType::Duplicate,
            field,
            value: Some(value),
            detail: String::new(),
        }
    }
}

/// k8s `field.Error.Error()`: `<field>: <Type>[: <value>][: <detail>]`.
impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.error_type)?;
        match (self.error_type, &self.value) {
            (FieldErrorType::Forbidden | FieldErrorType::Required, _) | (_, None) => {}
            (_, Some(value)) => write!(f, ": {value}")?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// k8s `ErrorList.ToAggregate().Error()`: empty for no error, the error itself for one,
/// `[e1, e2, …]` for several; repeated texts are dropped (first occurrence kept).
pub fn aggregate_message(errors: &[FieldError]) -> String {
    let mut seen = HashSet::new();
    let texts: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|t| seen.insert(t.clone()))
        .collect();
    match texts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `path.Key(key)`: `<path>[<key>]`.
fn key_path(annotations_path: &str, key: &str) -> String {
    format!("{annotations_path}[{key}]")
}

/// `ValidateTASPodSetRequest` (tas-semantics §2.3, items 1–7) for one pod template.
///
/// `annotations_path` is the path of the template's annotations, e.g.
/// `spec.template.metadata.annotations`; errors on one annotation are reported at
/// `<annotations_path>[<key>]`. Only `TASMultiLayerTopology` is read from `gates`.
pub fn validate_podset_annotations(
    annotations_path: &str,
    annotations: &BTreeMap<String, String>,
    gates: &FeatureGates,
) -> Vec<FieldError> {
    let get = |key: &str| annotations.get(key).map(String::as_str);
    let required = get(keys::PODSET_REQUIRED_TOPOLOGY);
    let preferred = get(keys::PODSET_PREFERRED_TOPOLOGY);
    let unconstrained = get(keys::PODSET_UNCONSTRAINED_TOPOLOGY);
    let slice_required = get(keys::PODSET_SLICE_REQUIRED_TOPOLOGY);
    let slice_size = get(keys::PODSET_SLICE_SIZE);
    let group_name = get(keys::PODSET_GROUP_NAME);
    let path = |key: &str| key_path(annotations_path, key);
    let mut errs = Vec::new();

    // 1. At most one of required / preferred / unconstrained.
    let found = [required, preferred, unconstrained]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if found > 1 {
        errs.push(FieldError::invalid(
            annotations_path.to_string(),
            None,
            format!(
                "must not contain more than one topology annotation: [{}, {}, {}]",
                gocompat::quote(keys::PODSET_REQUIRED_TOPOLOGY),
                gocompat::quote(keys::PODSET_PREFERRED_TOPOLOGY),
                gocompat::quote(keys::PODSET_UNCONSTRAINED_TOPOLOGY),
            ),
        ));
    }

    // 2. Level names are label names.
    for (key, value) in [
        (keys::PODSET_REQUIRED_TOPOLOGY, required),
        (keys::PODSET_PREFERRED_TOPOLOGY, preferred),
        (keys::PODSET_SLICE_REQUIRED_TOPOLOGY, slice_required),
    ] {
        if let Some(value) = value {
            errs.extend(validate_label_name(value, &path(key)));
        }
    }

    // 3. The group name.
    if let Some(group) = group_name {
        let group_path = path(keys::PODSET_GROUP_NAME);
        if gocompat::parse_uint(group, 64).is_ok() {
            errs.push(FieldError::invalid(
                group_path.clone(),
                Some(FieldValue::Str(group.to_string())),
                "must not be a number",
            ));
        }
        if slice_size.is_some() {
            errs.push(FieldError::forbidden(
                group_path.clone(),
                format!(
                    "may not be set when '{}' is specified",
                    keys::PODSET_SLICE_SIZE
                ),
            ));
        }
        if slice_required.is_some() {
            errs.push(FieldError::forbidden(
                group_path.clone(),
                format!(
                    "may not be set when '{}' is specified",
                    keys::PODSET_SLICE_REQUIRED_TOPOLOGY
                ),
            ));
        }
        if preferred.is_none() && required.is_none() {
            errs.push(FieldError::forbidden(
                group_path,
                format!(
                    "may not be set when neither '{}' nor '{}' is specified",
                    keys::PODSET_PREFERRED_TOPOLOGY,
                    keys::PODSET_REQUIRED_TOPOLOGY
                ),
            ));
        }
    }

    // 4. Unconstrained is a Go boolean.
    if let Some(value) = unconstrained
        && gocompat::parse_bool(value).is_none()
    {
        errs.push(FieldError::invalid(
            path(keys::PODSET_UNCONSTRAINED_TOPOLOGY),
            Some(FieldValue::Str(value.to_string())),
            "must be a boolean value",
        ));
    }

    // 5. The slice size is an int32 ≥ 1.
    if let Some(value) = slice_size {
        let bad = FieldValue::Str(value.to_string());
        match gocompat::parse_int(value, 32) {
            Err(_) => errs.push(FieldError::invalid(
                path(keys::PODSET_SLICE_SIZE),
                Some(bad),
                "must be a numeric value",
            )),
            Ok(size) if size < 1 => errs.push(FieldError::invalid(
                path(keys::PODSET_SLICE_SIZE),
                Some(bad),
                "must be greater than or equal to 1",
            )),
            Ok(_) => {}
        }
    }

    // 6. The legacy slice pair comes together.
    if slice_required.is_some() && slice_size.is_none() {
        errs.push(FieldError::required(
            path(keys::PODSET_SLICE_SIZE),
            format!(
                "must be set when '{}' is specified",
                keys::PODSET_SLICE_REQUIRED_TOPOLOGY
            ),
        ));
    }
    if slice_required.is_none() && slice_size.is_some() {
        errs.push(FieldError::forbidden(
            path(keys::PODSET_SLICE_SIZE),
            format!(
                "may not be set when '{}' is not specified",
                keys::PODSET_SLICE_REQUIRED_TOPOLOGY
            ),
        ));
    }

    // 7. The multi-layer constraints.
    errs.extend(validate_constraints_annotation(
        annotations_path,
        annotations,
        gates,
        slice_required.is_some(),
        slice_size.is_some(),
        group_name.is_some(),
    ));
    errs
}

/// `validateSliceRequiredTopologyConstraintsAnnotation` (tas-semantics §2.3 item 7).
fn validate_constraints_annotation(
    annotations_path: &str,
    annotations: &BTreeMap<String, String>,
    gates: &FeatureGates,
    slice_required_found: bool,
    slice_size_found: bool,
    group_name_found: bool,
) -> Vec<FieldError> {
    let Some(json) = annotations.get(keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS) else {
        return Vec::new();
    };
    let fld = key_path(
        annotations_path,
        keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    );
    let mut errs = Vec::new();

    if !gates.multi_layer() {
        errs.push(FieldError::forbidden(
            fld,
            "the TASMultiLayerTopology feature gate must be enabled to use this annotation",
        ));
        return errs;
    }

    let constraints_specified = format!(
        "may not be set when '{}' is specified",
        keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS
    );
    if slice_required_found {
        errs.push(FieldError::forbidden(
            fld.clone(),
            format!(
                "may not be set when '{}' is specified",
                keys::PODSET_SLICE_REQUIRED_TOPOLOGY
            ),
        ));
    }
    if slice_size_found {
        errs.push(FieldError::forbidden(
            fld.clone(),
            format!(
                "may not be set when '{}' is specified",
                keys::PODSET_SLICE_SIZE
            ),
        ));
    }
    if group_name_found {
        errs.push(FieldError::forbidden(
            key_path(annotations_path, keys::PODSET_GROUP_NAME),
            constraints_specified,
        ));
    }

    let constraints = match parse_slice_constraints(json) {
        Ok(c) => c,
        Err(err) => {
            errs.push(FieldError::invalid(
                fld,
                Some(FieldValue::Str(json.clone())),
                format!("must be a valid JSON array: {err}"),
            ));
            return errs;
        }
    };
    if constraints.is_empty() || constraints.len() > super::request::MAX_SLICE_LAYERS {
        errs.push(FieldError::invalid(
            fld,
            Some(FieldValue::Str(json.clone())),
            "topology constraints must contain between 1 and 3 entries",
        ));
        return errs;
    }

    for (i, c) in constraints.iter().enumerate() {
        errs.extend(validate_label_name(
            &c.level,
            &format!("{fld}[{i}].topology"),
        ));
        if c.size < 1 {
            errs.push(FieldError::invalid(
                format!("{fld}[{i}].size"),
                Some(FieldValue::Int(i64::from(c.size))),
                "must be greater than or equal to 1",
            ));
        }
    }

    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, c) in constraints.iter().enumerate() {
        match seen.get(c.level.as_str()) {
            Some(prev) => errs.push(FieldError::duplicate(
                format!("{fld}[{i}].topology"),
                FieldValue::Str(format!("{} (also at index {prev})", c.level)),
            )),
            None => {
                seen.insert(&c.level, i);
            }
        }
    }

    for (i, pair) in constraints.windows(2).enumerate() {
        let [parent, child] = pair else { continue };
        let (parent, child) = (parent.size, child.size);
        if child > 0 && parent % child != 0 {
            errs.push(FieldError::invalid(
                format!("{fld}[{}].size", i + 1),
                Some(FieldValue::Int(i64::from(child))),
                format!("must evenly divide the parent layer size {parent}"),
            ));
        }
    }
    errs
}

/// `ValidateSliceSizeAnnotationUpperBound`: the slice size (or the outermost constraint
/// size) must not exceed the PodSet's `count`. A slice size that is not an int32 reports
/// `must be a numeric value` and stops; constraints that do not decode are ignored (the
/// per-template validation reports them).
pub fn validate_slice_size_upper_bound(
    annotations_path: &str,
    annotations: &BTreeMap<String, String>,
    count: i32,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(value) = annotations.get(keys::PODSET_SLICE_SIZE) {
        let fld = key_path(annotations_path, keys::PODSET_SLICE_SIZE);
        match gocompat::parse_int(value, 32) {
            Err(_) => {
                return vec![FieldError::invalid(
                    fld,
                    Some(FieldValue::Str(value.clone())),
                    "must be a numeric value",
                )];
            }
            Ok(size) if size > i64::from(count) => errs.push(FieldError::invalid(
                fld,
                Some(FieldValue::Str(value.clone())),
                format!("must not be greater than pod set count {count}"),
            )),
            Ok(_) => {}
        }
    }
    if let Some(json) = annotations.get(keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
        && let Ok(constraints) = parse_slice_constraints(json)
        && let Some(outer) = constraints.first()
        && outer.size > count
    {
        errs.push(FieldError::invalid(
            key_path(
                annotations_path,
                keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
            ),
            Some(FieldValue::Int(i64::from(outer.size))),
            format!("must not be greater than pod set count {count}"),
        ));
    }
    errs
}

/// `ValidatePodSetGroupingTopology` (tas-semantics §2.4) over a job's PodSets, given as
/// `(annotations path, annotations, count)` in PodSet order.
///
/// Groups are keyed by the request's group name — which Kueue's builder keeps only with
/// required or preferred — in order of first appearance. As in Kueue's webhooks, the check
/// runs only when every PodSet's request builds; if one fails, nothing is reported here (the
/// per-template validation reports the cause).
pub fn validate_podset_groups(
    podsets: &[(String, &BTreeMap<String, String>, i32)],
    gates: &FeatureGates,
) -> Vec<FieldError> {
    struct Member<'a> {
        path: &'a str,
        count: i32,
        request: TopologyRequest,
    }

    let mut groups: Vec<(String, Vec<Member<'_>>)> = Vec::new();
    for (path, annotations, count) in podsets {
        let request = match TopologyRequest::from_annotations(annotations, gates) {
            Ok(Some(request)) => request,
            Ok(None) => continue,
            Err(_) => return Vec::new(),
        };
        let Some(name) = request.group_name.clone() else {
            continue;
        };
        let member = Member {
            path: path.as_str(),
            count: *count,
            request,
        };
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, members)) => members.push(member),
            None => groups.push((name, vec![member])),
        }
    }

    let mut errs = Vec::new();
    for (name, members) in &groups {
        let [first, second] = members.as_slice() else {
            let detail = format!(
                "can only define groups of exactly 2 pod sets, got: {} pod set(s)",
                members.len()
            );
            for m in members {
                errs.push(FieldError::invalid(
                    key_path(m.path, keys::PODSET_GROUP_NAME),
                    Some(FieldValue::Str(name.clone())),
                    detail.clone(),
                ));
            }
            continue;
        };

        if first.count != 1 && second.count != 1 {
            let detail = format!(
                "can only define groups where at least one pod set has only 1 replica, got: {} replica(s) and {} replica(s) in the group",
                first.count, second.count
            );
            for m in [first, second] {
                errs.push(FieldError::invalid(
                    key_path(m.path, keys::PODSET_GROUP_NAME),
                    Some(FieldValue::Str(name.clone())),
                    detail.clone(),
                ));
            }
        }

        if !topology_requests_consistent(&first.request, &second.request) {
            for (m, other) in [(first, second), (second, first)] {
                errs.push(FieldError::invalid(
                    m.path.to_string(),
                    None,
                    format!(
                        "must specify '{}' or '{}' topology consistent with '{}' in group '{}'",
                        keys::PODSET_REQUIRED_TOPOLOGY,
                        keys::PODSET_PREFERRED_TOPOLOGY,
                        other.path,
                        name
                    ),
                ));
            }
        }
    }
    errs
}

/// Kueue's `topologyRequestsValid`: both name required or preferred, with equal values.
fn topology_requests_consistent(a: &TopologyRequest, b: &TopologyRequest) -> bool {
    let names_level = |r: &TopologyRequest| r.required.is_some() || r.preferred.is_some();
    names_level(a) && names_level(b) && a.required == b.required && a.preferred == b.preferred
}

// ---- k8s label-name validation (apimachinery `IsQualifiedName` = `content.IsLabelKey`) ----

const LABEL_KEY_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MAX_LENGTH: usize = 63;
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// k8s `RegexError(msg, fmt, examples...)`, double spaces and all.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$` (Go's `$` is the end of text).
fn matches_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`.
fn matches_dns1123_subdomain(s: &str) -> bool {
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                lower_alnum(first)
                    && lower_alnum(last)
                    && b.iter().all(|c| lower_alnum(c) || *c == b'-')
            }
            _ => false,
        }
    };
    s.split('.').all(label_ok)
}

/// k8s `IsDNS1123Subdomain`.
fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// k8s `IsQualifiedName`, which current apimachinery (the one Kueue builds with) defines as
/// `content.IsLabelKey`: an optional DNS-1123 subdomain prefix (at most 253 bytes) and `/`,
/// then a name of at most 63 bytes. More than one `/` gives the single "a valid label key …"
/// message (older apimachinery said "a qualified name …"); every other text is unchanged.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let mut parts = value.splitn(3, '/');
    let first = parts.next().unwrap_or("");
    let name = match (parts.next(), parts.next()) {
        (None, _) => first,
        (Some(name), None) => {
            if first.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(first)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        (Some(_), Some(_)) => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_KEY_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX_LENGTH)));
    }
    if !matches_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// k8s `metav1validation.ValidateLabelName`: one `Invalid` error per qualified-name message.
pub fn validate_label_name(label: &str, field: &str) -> Vec<FieldError> {
    is_qualified_name(label)
        .into_iter()
        .map(|msg| {
            FieldError::invalid(
                field.to_string(),
                Some(FieldValue::Str(label.to_string())),
                msg,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "spec.template.metadata.annotations";
    const REQ: &str = keys::PODSET_REQUIRED_TOPOLOGY;
    const PREF: &str = keys::PODSET_PREFERRED_TOPOLOGY;
    const UNC: &str = keys::PODSET_UNCONSTRAINED_TOPOLOGY;
    const SREQ: &str = keys::PODSET_SLICE_REQUIRED_TOPOLOGY;
    const SSIZE: &str = keys::PODSET_SLICE_SIZE;
    const CONS: &str = keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS;
    const GROUP: &str = keys::PODSET_GROUP_NAME;

    const NAME_PART_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const PREFIX_REGEX: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const TOO_MANY_SLASHES: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
    const MORE_THAN_ONE: &str = "must not contain more than one topology annotation: [\"kueue.x-k8s.io/podset-required-topology\", \"kueue.x-k8s.io/podset-preferred-topology\", \"kueue.x-k8s.io/podset-unconstrained-topology\"]";

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn gates(pairs: &[(&str, bool)]) -> FeatureGates {
        let mut g = FeatureGates::default();
        for (name, on) in pairs {
            g.set(name, *on).unwrap();
        }
        g
    }

    fn texts(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn k(key: &str) -> String {
        key_path(P, key)
    }

    /// The `batch/v1` Job webhook's TAS part: per-template validation, then the upper bound
    /// when the request builds (as Kueue's `validateTopologyRequest`).
    fn job_webhook(a: &BTreeMap<String, String>, count: i32, g: &FeatureGates) -> Vec<FieldError> {
        let mut errs = validate_podset_annotations(P, a, g);
        if TopologyRequest::from_annotations(a, g).is_ok() {
            errs.extend(validate_slice_size_upper_bound(P, a, count));
        }
        errs
    }

    #[test]
    fn display_matches_k8s_field_error() {
        let cases = [
            (
                FieldError::invalid("a.b".into(), None, "bad"),
                "a.b: Invalid value: bad",
            ),
            (
                FieldError::invalid(
                    "a[k]".into(),
                    Some(FieldValue::Str("x \"y\"\n".into())),
                    "bad",
                ),
                "a[k]: Invalid value: \"x \\\"y\\\"\\n\": bad",
            ),
            (
                FieldError::invalid("a[0].size".into(), Some(FieldValue::Int(-3)), "bad"),
                "a[0].size: Invalid value: -3: bad",
            ),
            (FieldError::forbidden("a".into(), "no"), "a: Forbidden: no"),
            (
                FieldError::required("a".into(), "yes"),
                "a: Required value: yes",
            ),
            (
                FieldError::duplicate(
                    "a[1].topology".into(),
                    FieldValue::Str("r (also at index 0)".into()),
                ),
                "a[1].topology: Duplicate value: \"r (also at index 0)\"",
            ),
            // Forbidden and Required never print a value, even if one is attached.
            (
                FieldError {
                    error_type: FieldErrorType::Forbidden,
                    field: "a".into(),
                    value: Some(FieldValue::Int(1)),
                    detail: "no".into(),
                },
                "a: Forbidden: no",
            ),
            (
                FieldError::invalid("a".into(), Some(FieldValue::Str(String::new())), ""),
                "a: Invalid value: \"\"",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(FieldErrorType::Required.reason(), "FieldValueRequired");
    }

    #[test]
    fn aggregate_like_k8s() {
        let a = FieldError::forbidden("a".into(), "x");
        let b = FieldError::forbidden("b".into(), "y");
        assert_eq!(aggregate_message(&[]), "");
        assert_eq!(
            aggregate_message(std::slice::from_ref(&a)),
            "a: Forbidden: x"
        );
        assert_eq!(
            aggregate_message(&[a.clone(), a.clone()]),
            "a: Forbidden: x"
        );
        assert_eq!(
            aggregate_message(&[a.clone(), b.clone(), a.clone()]),
            "[a: Forbidden: x, b: Forbidden: y]"
        );
    }

    /// Every `admission/*` conformance case: annotations, count, gates → the denial contains
    /// every expected detail (and the exact field error where the case names it).
    #[test]
    fn admission_conformance_cases() {
        struct Case {
            name: &'static str,
            validator: &'static str,
            gates: Vec<(&'static str, bool)>,
            count: i32,
            annotations: Vec<(&'static str, &'static str)>,
            want: Vec<&'static str>,
        }
        let rack16 = r#"[{"topology":"cloud.com/rack","size":16}]"#;
        let rack16_host4 = r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]"#;
        let cases = vec![
            Case {
                name: "job-webhook invalid slice topology request - slice size larger than number of podsets",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 4,
                annotations: vec![
                    (REQ, "cloud.com/block"),
                    (SREQ, "cloud.com/block"),
                    (SSIZE, "20"),
                ],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"20\": must not be greater than pod set count 4",
                ],
            },
            Case {
                name: "job-webhook invalid topology request - both annotations",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 1,
                annotations: vec![(REQ, "cloud.com/block"), (PREF, "cloud.com/block")],
                want: vec![
                    "spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: [\"kueue.x-k8s.io/podset-required-topology\", \"kueue.x-k8s.io/podset-preferred-topology\", \"kueue.x-k8s.io/podset-unconstrained-topology\"]",
                ],
            },
            Case {
                name: "job-webhook invalid topology request - invalid preferred",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 1,
                annotations: vec![(PREF, "some preferred value")],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]: Invalid value: \"some preferred value\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            },
            Case {
                name: "job-webhook invalid topology request - slice requested without slice size",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 1,
                annotations: vec![(REQ, "cloud.com/block"), (SREQ, "cloud.com/block")],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
                ],
            },
            Case {
                name: "job-webhook invalid topology request - slice size is zero",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 1,
                annotations: vec![
                    (REQ, "cloud.com/block"),
                    (SREQ, "cloud.com/block"),
                    (SSIZE, "0"),
                ],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"0\": must be greater than or equal to 1",
                ],
            },
            Case {
                name: "job-webhook valid topology request - slice-only topology - unconstrained with slices defined",
                validator: "job",
                gates: vec![("TopologyAwareScheduling", true)],
                count: 1,
                annotations: vec![(UNC, "true"), (SREQ, "cloud.com/block"), (SSIZE, "1")],
                want: vec![],
            },
            Case {
                name: "constraints invalid: empty array",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", true)],
                count: 64,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, "[]")],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints]: Invalid value: \"[]\": topology constraints must contain between 1 and 3 entries",
                ],
            },
            Case {
                name: "constraints invalid: feature gate disabled",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", false)],
                count: 64,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16)],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints]: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use this annotation",
                ],
            },
            Case {
                name: "constraints invalid: size less than 1",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", true)],
                count: 64,
                annotations: vec![
                    (REQ, "cloud.com/block"),
                    (CONS, r#"[{"topology":"cloud.com/rack","size":0}]"#),
                ],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints][0].size: Invalid value: 0: must be greater than or equal to 1",
                ],
            },
            Case {
                name: "constraints invalid: with podset-group-name",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", true)],
                count: 64,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16), (GROUP, "group1")],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-group-name]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology-constraints' is specified",
                ],
            },
            Case {
                name: "constraints valid: single constraint layer",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", true)],
                count: 64,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16)],
                want: vec![],
            },
            Case {
                name: "constraints valid: two constraint layers",
                validator: "tas",
                gates: vec![("TASMultiLayerTopology", true)],
                count: 64,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16_host4)],
                want: vec![],
            },
            Case {
                name: "upper bound invalid: multi-layer outermost size exceeds pod count",
                validator: "upper",
                gates: vec![],
                count: 10,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16_host4)],
                want: vec![
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints]: Invalid value: 16: must not be greater than pod set count 10",
                ],
            },
            Case {
                name: "upper bound valid: multi-layer outermost size within bound",
                validator: "upper",
                gates: vec![],
                count: 20,
                annotations: vec![(REQ, "cloud.com/block"), (CONS, rack16_host4)],
                want: vec![],
            },
            Case {
                name: "upper bound valid: PodSetSliceSizeAnnotation within bound",
                validator: "upper",
                gates: vec![],
                count: 20,
                annotations: vec![
                    (SSIZE, "16"),
                    (SREQ, "cloud.com/rack"),
                    (REQ, "cloud.com/block"),
                ],
                want: vec![],
            },
        ];
        for case in cases {
            let a = ann(&case.annotations);
            let g = gates(&case.gates);
            // The conformance runner builds the Job from the manifest, so every case also
            // goes through the whole Job webhook; the narrower validator must agree.
            let narrow = match case.validator {
                "tas" => validate_podset_annotations(P, &a, &g),
                "upper" => validate_slice_size_upper_bound(P, &a, case.count),
                _ => job_webhook(&a, case.count, &g),
            };
            let full = job_webhook(&a, case.count, &g);
            assert_eq!(texts(&narrow), case.want, "{}", case.name);
            assert_eq!(texts(&full), case.want, "{} (whole Job webhook)", case.name);
            let message = aggregate_message(&full);
            for want in &case.want {
                assert!(message.contains(want), "{}: {message}", case.name);
            }
        }
    }

    /// The rows of `validation-public.json` (and the rest of Kueue's
    /// `tas_validation_test.go` tables), as `(name, multi-layer gate, annotations, errors)`.
    #[test]
    fn tas_podset_request_table() {
        let cons_path = k(CONS);
        type Row = (
            &'static str,
            bool,
            Vec<(&'static str, &'static str)>,
            Vec<String>,
        );
        let rows: Vec<Row> = vec![
            (
                "valid: three constraint layers",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (
                        CONS,
                        r#"[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/sub-rack","size":4},{"topology":"kubernetes.io/hostname","size":2}]"#,
                    ),
                ],
                vec![],
            ),
            (
                "invalid: not valid JSON",
                true,
                vec![(REQ, "cloud.com/block"), (CONS, "invalid-json")],
                vec![format!(
                    "{cons_path}: Invalid value: \"invalid-json\": must be a valid JSON array: invalid character 'i' looking for beginning of value"
                )],
            ),
            (
                "invalid: more than 3 entries",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (
                        CONS,
                        r#"[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},{"topology":"d","size":1}]"#,
                    ),
                ],
                vec![format!(
                    "{cons_path}: Invalid value: \"[{{\\\"topology\\\":\\\"a\\\",\\\"size\\\":64}},{{\\\"topology\\\":\\\"b\\\",\\\"size\\\":16}},{{\\\"topology\\\":\\\"c\\\",\\\"size\\\":4}},{{\\\"topology\\\":\\\"d\\\",\\\"size\\\":1}}]\": topology constraints must contain between 1 and 3 entries"
                )],
            ),
            (
                "invalid: null is zero entries",
                true,
                vec![(REQ, "cloud.com/block"), (CONS, "null")],
                vec![format!(
                    "{cons_path}: Invalid value: \"null\": topology constraints must contain between 1 and 3 entries"
                )],
            ),
            (
                "invalid: size does not divide parent",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (
                        CONS,
                        r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":5}]"#,
                    ),
                ],
                vec![format!(
                    "{cons_path}[1].size: Invalid value: 5: must evenly divide the parent layer size 16"
                )],
            ),
            (
                "invalid: mutual exclusivity with podset-slice-required-topology",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (SREQ, "cloud.com/rack"),
                    (SSIZE, "16"),
                    (CONS, r#"[{"topology":"cloud.com/rack","size":16}]"#),
                ],
                vec![
                    format!(
                        "{cons_path}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified"
                    ),
                    format!(
                        "{cons_path}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified"
                    ),
                ],
            ),
            (
                "invalid: duplicate topology labels",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (
                        CONS,
                        r#"[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/rack","size":4}]"#,
                    ),
                ],
                vec![format!(
                    "{cons_path}[1].topology: Duplicate value: \"cloud.com/rack (also at index 0)\""
                )],
            ),
            (
                "invalid: duplicate topology label among three entries",
                true,
                vec![
                    (REQ, "cloud.com/block"),
                    (
                        CONS,
                        r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4},{"topology":"cloud.com/rack","size":2}]"#,
                    ),
                ],
                vec![format!(
                    "{cons_path}[2].topology: Duplicate value: \"cloud.com/rack (also at index 0)\""
                )],
            ),
            (
                "every per-entry error, in Kueue's order",
                true,
                vec![(
                    CONS,
                    r#"[{"topology":"A B","size":6},{"topology":"A B","size":-4},{"size":3}]"#,
                )],
                vec![
                    format!("{cons_path}[0].topology: Invalid value: \"A B\": {NAME_PART_REGEX}"),
                    format!("{cons_path}[1].topology: Invalid value: \"A B\": {NAME_PART_REGEX}"),
                    format!(
                        "{cons_path}[1].size: Invalid value: -4: must be greater than or equal to 1"
                    ),
                    format!(
                        "{cons_path}[2].topology: Invalid value: \"\": name part must be non-empty"
                    ),
                    format!("{cons_path}[2].topology: Invalid value: \"\": {NAME_PART_REGEX}"),
                    format!("{cons_path}[1].topology: Duplicate value: \"A B (also at index 0)\""),
                    format!(
                        "{cons_path}[2].size: Invalid value: 3: must evenly divide the parent layer size -4"
                    ),
                ],
            ),
            (
                "JSON type error stops the checks",
                true,
                vec![
                    (SREQ, "r"),
                    (SSIZE, "2"),
                    (CONS, r#"[{"topology":"r","size":"2"}]"#),
                ],
                vec![
                    format!(
                        "{cons_path}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified"
                    ),
                    format!(
                        "{cons_path}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified"
                    ),
                    format!(
                        "{cons_path}: Invalid value: \"[{{\\\"topology\\\":\\\"r\\\",\\\"size\\\":\\\"2\\\"}}]\": must be a valid JSON array: json: cannot unmarshal string into Go struct field PodsetSliceRequiredTopologyConstraint.size of type int32"
                    ),
                ],
            ),
            (
                "gate off: only the Forbidden, even for broken JSON and a group name",
                false,
                vec![(REQ, "b"), (GROUP, "g"), (CONS, "{{{")],
                vec![format!(
                    "{cons_path}: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use this annotation"
                )],
            ),
        ];
        for (name, multi, pairs, want) in rows {
            let got = validate_podset_annotations(
                P,
                &ann(&pairs),
                &gates(&[("TASMultiLayerTopology", multi)]),
            );
            assert_eq!(texts(&got), want, "{name}");
        }
    }

    /// §2.3 items 1–6, one row per rule and combination, with the full texts.
    #[test]
    fn per_rule_table() {
        let group_forbidden_size = format!(
            "{}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified",
            k(GROUP)
        );
        let group_forbidden_sreq = format!(
            "{}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
            k(GROUP)
        );
        let group_forbidden_neither = format!(
            "{}: Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor 'kueue.x-k8s.io/podset-required-topology' is specified",
            k(GROUP)
        );
        let size_forbidden = format!(
            "{}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified",
            k(SSIZE)
        );
        let size_required = format!(
            "{}: Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
            k(SSIZE)
        );
        type Row = (&'static str, Vec<(&'static str, &'static str)>, Vec<String>);
        let rows: Vec<Row> = vec![
            ("nothing", vec![], vec![]),
            ("unrelated annotations", vec![("foo", "bar")], vec![]),
            ("required only", vec![(REQ, "cloud.com/block")], vec![]),
            (
                "preferred with a hostname level",
                vec![(PREF, "kubernetes.io/hostname")],
                vec![],
            ),
            (
                "required + unconstrained",
                vec![(REQ, "b"), (UNC, "true")],
                vec![format!("{P}: Invalid value: {MORE_THAN_ONE}")],
            ),
            (
                "all three, each still label-checked",
                vec![(REQ, "b"), (PREF, "-bad"), (UNC, "true")],
                vec![
                    format!("{P}: Invalid value: {MORE_THAN_ONE}"),
                    format!("{}: Invalid value: \"-bad\": {NAME_PART_REGEX}", k(PREF)),
                ],
            ),
            (
                "invalid required and slice-required labels",
                vec![(REQ, "a/b/c"), (SREQ, "Bad.Prefix/x"), (SSIZE, "1")],
                vec![
                    format!("{}: Invalid value: \"a/b/c\": {TOO_MANY_SLASHES}", k(REQ)),
                    format!(
                        "{}: Invalid value: \"Bad.Prefix/x\": {PREFIX_REGEX}",
                        k(SREQ)
                    ),
                ],
            ),
            (
                "empty required",
                vec![(REQ, "")],
                vec![
                    format!(
                        "{}: Invalid value: \"\": name part must be non-empty",
                        k(REQ)
                    ),
                    format!("{}: Invalid value: \"\": {NAME_PART_REGEX}", k(REQ)),
                ],
            ),
            (
                "group with required",
                vec![(REQ, "b"), (GROUP, "leader")],
                vec![],
            ),
            (
                "group \"-1\" is not a number",
                vec![(REQ, "b"), (GROUP, "-1")],
                vec![],
            ),
            (
                "group \"+1\" is not a number",
                vec![(REQ, "b"), (GROUP, "+1")],
                vec![],
            ),
            (
                "group beyond uint64 is not a number",
                vec![(REQ, "b"), (GROUP, "18446744073709551616")],
                vec![],
            ),
            (
                "group that is a number",
                vec![(PREF, "b"), (GROUP, "007")],
                vec![format!(
                    "{}: Invalid value: \"007\": must not be a number",
                    k(GROUP)
                )],
            ),
            (
                "group with the legacy slice pair",
                vec![
                    (REQ, "b"),
                    (GROUP, "18446744073709551615"),
                    (SREQ, "r"),
                    (SSIZE, "2"),
                ],
                vec![
                    format!(
                        "{}: Invalid value: \"18446744073709551615\": must not be a number",
                        k(GROUP)
                    ),
                    group_forbidden_size.clone(),
                    group_forbidden_sreq.clone(),
                ],
            ),
            (
                "group without required or preferred",
                vec![(GROUP, "g")],
                vec![group_forbidden_neither.clone()],
            ),
            (
                "group with unconstrained only",
                vec![(UNC, "true"), (GROUP, "g")],
                vec![group_forbidden_neither.clone()],
            ),
            (
                "group with slice-size only",
                vec![(GROUP, "g"), (SSIZE, "2")],
                vec![
                    group_forbidden_size,
                    group_forbidden_neither,
                    size_forbidden.clone(),
                ],
            ),
            ("unconstrained 1", vec![(UNC, "1")], vec![]),
            ("unconstrained False", vec![(UNC, "False")], vec![]),
            (
                "unconstrained yes",
                vec![(UNC, "yes")],
                vec![format!(
                    "{}: Invalid value: \"yes\": must be a boolean value",
                    k(UNC)
                )],
            ),
            (
                "unconstrained empty",
                vec![(UNC, "")],
                vec![format!(
                    "{}: Invalid value: \"\": must be a boolean value",
                    k(UNC)
                )],
            ),
            (
                "slice pair",
                vec![(REQ, "b"), (SREQ, "r"), (SSIZE, "2")],
                vec![],
            ),
            (
                "slice pair, size +2",
                vec![(REQ, "b"), (SREQ, "r"), (SSIZE, "+2")],
                vec![],
            ),
            (
                "slice size not a number",
                vec![(REQ, "b"), (SREQ, "r"), (SSIZE, "two")],
                vec![format!(
                    "{}: Invalid value: \"two\": must be a numeric value",
                    k(SSIZE)
                )],
            ),
            (
                "slice size beyond int32",
                vec![(SREQ, "r"), (SSIZE, "2147483648")],
                vec![format!(
                    "{}: Invalid value: \"2147483648\": must be a numeric value",
                    k(SSIZE)
                )],
            ),
            (
                "slice size negative",
                vec![(SREQ, "r"), (SSIZE, "-5")],
                vec![format!(
                    "{}: Invalid value: \"-5\": must be greater than or equal to 1",
                    k(SSIZE)
                )],
            ),
            (
                "slice size without slice topology",
                vec![(REQ, "b"), (SSIZE, "1")],
                vec![size_forbidden.clone()],
            ),
            (
                "bad slice size without slice topology",
                vec![(SSIZE, "x")],
                vec![
                    format!(
                        "{}: Invalid value: \"x\": must be a numeric value",
                        k(SSIZE)
                    ),
                    size_forbidden,
                ],
            ),
            (
                "slice topology without size",
                vec![(PREF, "b"), (SREQ, "r")],
                vec![size_required],
            ),
        ];
        let g = FeatureGates::default();
        for (name, pairs, want) in rows {
            assert_eq!(
                texts(&validate_podset_annotations(P, &ann(&pairs), &g)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn upper_bound_table() {
        type Row = (
            &'static str,
            Vec<(&'static str, &'static str)>,
            i32,
            Vec<String>,
        );
        let rows: Vec<Row> = vec![
            (
                "invalid: PodSetSliceSizeAnnotation exceeds pod count",
                vec![
                    (SSIZE, "20"),
                    (SREQ, "cloud.com/rack"),
                    (REQ, "cloud.com/block"),
                ],
                16,
                vec![format!(
                    "{}: Invalid value: \"20\": must not be greater than pod set count 16",
                    k(SSIZE)
                )],
            ),
            ("equal to count", vec![(SSIZE, "16")], 16, vec![]),
            (
                "not a number stops",
                vec![(SSIZE, "x"), (CONS, r#"[{"topology":"r","size":99}]"#)],
                1,
                vec![format!(
                    "{}: Invalid value: \"x\": must be a numeric value",
                    k(SSIZE)
                )],
            ),
            (
                "both annotations over the count",
                vec![(SSIZE, "3"), (CONS, r#"[{"topology":"r","size":4}]"#)],
                2,
                vec![
                    format!(
                        "{}: Invalid value: \"3\": must not be greater than pod set count 2",
                        k(SSIZE)
                    ),
                    format!(
                        "{}: Invalid value: 4: must not be greater than pod set count 2",
                        k(CONS)
                    ),
                ],
            ),
            ("broken JSON is ignored", vec![(CONS, "[{")], 1, vec![]),
            (
                "empty constraints are ignored",
                vec![(CONS, "[]")],
                0,
                vec![],
            ),
            ("count 0 with no slice", vec![(REQ, "b")], 0, vec![]),
            (
                "negative count",
                vec![(SSIZE, "1")],
                -1,
                vec![format!(
                    "{}: Invalid value: \"1\": must not be greater than pod set count -1",
                    k(SSIZE)
                )],
            ),
        ];
        for (name, pairs, count, want) in rows {
            assert_eq!(
                texts(&validate_slice_size_upper_bound(P, &ann(&pairs), count)),
                want,
                "{name}"
            );
        }
    }

    /// One template of a multi-template job: annotations path, annotations, count.
    type Template = (&'static str, Vec<(&'static str, &'static str)>, i32);

    /// A multi-template webhook (JobSet / LeaderWorkerSet shape): per-template validation and
    /// upper bound for each template, then the grouping check.
    fn multi_webhook(podsets: &[Template], g: &FeatureGates) -> Vec<FieldError> {
        let anns: Vec<BTreeMap<String, String>> = podsets.iter().map(|(_, a, _)| ann(a)).collect();
        let mut errs = Vec::new();
        let all_build = anns
            .iter()
            .all(|a| TopologyRequest::from_annotations(a, g).is_ok());
        for ((path, _, count), a) in podsets.iter().zip(&anns) {
            errs.extend(validate_podset_annotations(path, a, g));
            if all_build {
                errs.extend(validate_slice_size_upper_bound(path, a, *count));
            }
        }
        let input: Vec<(String, &BTreeMap<String, String>, i32)> = podsets
            .iter()
            .zip(&anns)
            .map(|((path, _, count), a)| (path.to_string(), a, *count))
            .collect();
        errs.extend(validate_podset_groups(&input, g));
        errs
    }

    /// The JobSet and LeaderWorkerSet rows of `validation-public.json`, plus §2.4 rules.
    #[test]
    fn grouping_table() {
        const JS0: &str = "spec.replicatedJobs[0].template.spec.template.metadata.annotations";
        const JS1: &str = "spec.replicatedJobs[1].template.spec.template.metadata.annotations";
        const JS2: &str = "spec.replicatedJobs[2].template.spec.template.metadata.annotations";
        const JS3: &str = "spec.replicatedJobs[3].template.spec.template.metadata.annotations";
        const LEADER: &str = "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations";
        const WORKER: &str = "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations";
        let block = (REQ, "cloud.com/block");
        type Row = (&'static str, Vec<Template>, Vec<String>);
        let rows: Vec<Row> = vec![
            (
                "jobset valid topology request",
                vec![(JS0, vec![block], 1), (JS1, vec![block], 1)],
                vec![],
            ),
            (
                "jobset valid PodSet grouping request",
                vec![
                    (JS0, vec![(GROUP, "groupname"), block], 1),
                    (JS1, vec![(GROUP, "groupname"), block], 4),
                ],
                vec![],
            ),
            (
                "jobset invalid PodSet grouping request - groups of size other than 2",
                vec![
                    (JS0, vec![block, (GROUP, "1podset")], 1),
                    (JS1, vec![block, (GROUP, "3podsets")], 1),
                    (JS2, vec![block, (GROUP, "3podsets")], 2),
                    (JS3, vec![block, (GROUP, "3podsets")], 4),
                ],
                vec![
                    format!(
                        "{JS0}[{GROUP}]: Invalid value: \"1podset\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                    ),
                    format!(
                        "{JS1}[{GROUP}]: Invalid value: \"3podsets\": can only define groups of exactly 2 pod sets, got: 3 pod set(s)"
                    ),
                    format!(
                        "{JS2}[{GROUP}]: Invalid value: \"3podsets\": can only define groups of exactly 2 pod sets, got: 3 pod set(s)"
                    ),
                    format!(
                        "{JS3}[{GROUP}]: Invalid value: \"3podsets\": can only define groups of exactly 2 pod sets, got: 3 pod set(s)"
                    ),
                ],
            ),
            (
                "lws valid topology request",
                vec![(LEADER, vec![block], 1), (WORKER, vec![block], 0)],
                vec![],
            ),
            (
                "lws invalid slice topology request - slice size larger than number of podsets",
                vec![
                    (
                        LEADER,
                        vec![block, (SREQ, "cloud.com/block"), (SSIZE, "2")],
                        1,
                    ),
                    (
                        WORKER,
                        vec![block, (SREQ, "cloud.com/block"), (SSIZE, "20")],
                        3,
                    ),
                ],
                vec![
                    format!(
                        "{LEADER}[{SSIZE}]: Invalid value: \"2\": must not be greater than pod set count 1"
                    ),
                    format!(
                        "{WORKER}[{SSIZE}]: Invalid value: \"20\": must not be greater than pod set count 3"
                    ),
                ],
            ),
            (
                "lws invalid slice topology request - slice size provided without slice topology",
                vec![
                    (LEADER, vec![(SSIZE, "1")], 1),
                    (WORKER, vec![(SSIZE, "1")], 3),
                ],
                vec![
                    format!(
                        "{LEADER}[{SSIZE}]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified"
                    ),
                    format!(
                        "{WORKER}[{SSIZE}]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified"
                    ),
                ],
            ),
            (
                "lws invalid PodSet group name request - value is a number",
                vec![
                    (LEADER, vec![(GROUP, "1234"), block], 1),
                    (WORKER, vec![(GROUP, "1234"), block], 0),
                ],
                vec![
                    format!("{LEADER}[{GROUP}]: Invalid value: \"1234\": must not be a number"),
                    format!("{WORKER}[{GROUP}]: Invalid value: \"1234\": must not be a number"),
                ],
            ),
            (
                "lws invalid PodSet grouping request - group specified only in leader",
                vec![
                    (LEADER, vec![(GROUP, "groupname"), block], 1),
                    (WORKER, vec![], 0),
                ],
                vec![format!(
                    "{LEADER}[{GROUP}]: Invalid value: \"groupname\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                )],
            ),
            (
                "lws invalid PodSet grouping request - group specified only in worker",
                vec![
                    (LEADER, vec![], 1),
                    (WORKER, vec![(GROUP, "groupname"), block], 0),
                ],
                vec![format!(
                    "{WORKER}[{GROUP}]: Invalid value: \"groupname\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                )],
            ),
            (
                "lws invalid PodSet grouping request - group name does not match",
                vec![
                    (LEADER, vec![(GROUP, "groupname1"), block], 1),
                    (WORKER, vec![(GROUP, "groupname2"), block], 0),
                ],
                vec![
                    format!(
                        "{LEADER}[{GROUP}]: Invalid value: \"groupname1\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                    ),
                    format!(
                        "{WORKER}[{GROUP}]: Invalid value: \"groupname2\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                    ),
                ],
            ),
            (
                "lws invalid PodSet grouping request - preferred topology request does not match",
                vec![
                    (
                        LEADER,
                        vec![(GROUP, "groupname"), (PREF, "cloud.com/block")],
                        1,
                    ),
                    (
                        WORKER,
                        vec![(GROUP, "groupname"), (PREF, "cloud.com/rack")],
                        0,
                    ),
                ],
                vec![
                    format!(
                        "{LEADER}: Invalid value: must specify 'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology consistent with '{WORKER}' in group 'groupname'"
                    ),
                    format!(
                        "{WORKER}: Invalid value: must specify 'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology consistent with '{LEADER}' in group 'groupname'"
                    ),
                ],
            ),
            (
                "lws invalid PodSet grouping request - neither preferred nor required topology is requested",
                vec![
                    (LEADER, vec![(GROUP, "groupname")], 1),
                    (WORKER, vec![(GROUP, "groupname")], 0),
                ],
                vec![
                    format!(
                        "{LEADER}[{GROUP}]: Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor 'kueue.x-k8s.io/podset-required-topology' is specified"
                    ),
                    format!(
                        "{WORKER}[{GROUP}]: Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor 'kueue.x-k8s.io/podset-required-topology' is specified"
                    ),
                ],
            ),
            (
                "lws invalid PodSet grouping request - grouping requested without leader template",
                vec![(
                    WORKER,
                    vec![(GROUP, "groupname"), (PREF, "cloud.com/block")],
                    1,
                )],
                vec![format!(
                    "{WORKER}[{GROUP}]: Invalid value: \"groupname\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                )],
            ),
            // §2.4 rules beyond the public rows.
            (
                "neither count is 1, and required vs preferred mismatch",
                vec![
                    (JS0, vec![(GROUP, "g"), block], 2),
                    (JS1, vec![(GROUP, "g"), (PREF, "cloud.com/block")], 3),
                ],
                vec![
                    format!(
                        "{JS0}[{GROUP}]: Invalid value: \"g\": can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) and 3 replica(s) in the group"
                    ),
                    format!(
                        "{JS1}[{GROUP}]: Invalid value: \"g\": can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) and 3 replica(s) in the group"
                    ),
                    format!(
                        "{JS0}: Invalid value: must specify 'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology consistent with '{JS1}' in group 'g'"
                    ),
                    format!(
                        "{JS1}: Invalid value: must specify 'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology consistent with '{JS0}' in group 'g'"
                    ),
                ],
            ),
            (
                "groups reported in order of first appearance",
                vec![
                    (JS0, vec![(GROUP, "b"), block], 1),
                    (JS1, vec![(GROUP, "a"), block], 1),
                    (JS2, vec![(GROUP, "b"), block], 1),
                ],
                vec![format!(
                    "{JS1}[{GROUP}]: Invalid value: \"a\": can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
                )],
            ),
            (
                "a template whose request does not build disables the grouping check",
                vec![
                    (JS0, vec![(GROUP, "g"), block], 1),
                    (JS1, vec![(UNC, "maybe")], 1),
                ],
                vec![format!(
                    "{JS1}[{UNC}]: Invalid value: \"maybe\": must be a boolean value"
                )],
            ),
        ];
        let g = FeatureGates::default();
        for (name, podsets, want) in rows {
            assert_eq!(texts(&multi_webhook(&podsets, &g)), want, "{name}");
        }
    }

    #[test]
    fn qualified_name_table() {
        let long63 = "a".repeat(63);
        let long64 = "a".repeat(64);
        let prefix253 = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        let prefix254 = format!("{prefix253}e");
        let ok = [
            "a",
            "A",
            "0",
            "a.b_c-d",
            "cloud.com/rack",
            "kubernetes.io/hostname",
            "MyName",
            &long63,
        ];
        for v in ok {
            assert_eq!(is_qualified_name(v), Vec::<String>::new(), "{v:?}");
        }
        assert_eq!(
            is_qualified_name(&format!("{prefix253}/x")),
            Vec::<String>::new()
        );
        let name_regex = NAME_PART_REGEX.to_string();
        let cases: Vec<(String, Vec<String>)> = vec![
            (
                "".into(),
                vec!["name part must be non-empty".into(), name_regex.clone()],
            ),
            ("-a".into(), vec![name_regex.clone()]),
            ("a-".into(), vec![name_regex.clone()]),
            ("a b".into(), vec![name_regex.clone()]),
            ("é".into(), vec![name_regex.clone()]),
            ("a\n".into(), vec![name_regex.clone()]),
            (
                long64.clone(),
                vec!["name part must be no more than 63 characters".into()],
            ),
            (
                format!("{long64}-"),
                vec![
                    "name part must be no more than 63 characters".into(),
                    name_regex.clone(),
                ],
            ),
            ("/a".into(), vec!["prefix part must be non-empty".into()]),
            (
                "a/".into(),
                vec!["name part must be non-empty".into(), name_regex.clone()],
            ),
            (
                "/".into(),
                vec![
                    "prefix part must be non-empty".into(),
                    "name part must be non-empty".into(),
                    name_regex.clone(),
                ],
            ),
            ("Cloud.com/rack".into(), vec![PREFIX_REGEX.into()]),
            ("cloud..com/rack".into(), vec![PREFIX_REGEX.into()]),
            ("-cloud.com/rack".into(), vec![PREFIX_REGEX.into()]),
            ("cloud_x.com/rack".into(), vec![PREFIX_REGEX.into()]),
            (
                format!("{prefix254}/x"),
                vec!["prefix part must be no more than 253 characters".into()],
            ),
            (
                format!("{}/x", "a".repeat(254)),
                vec!["prefix part must be no more than 253 characters".into()],
            ),
            (
                format!("{}-/x", "a".repeat(254)),
                vec![
                    "prefix part must be no more than 253 characters".into(),
                    PREFIX_REGEX.into(),
                ],
            ),
            ("a/b/c".into(), vec![TOO_MANY_SLASHES.into()]),
            ("//".into(), vec![TOO_MANY_SLASHES.into()]),
        ];
        for (value, want) in cases {
            assert_eq!(is_qualified_name(&value), want, "{value:?}");
        }
        let errs = validate_label_name("a b", "f");
        assert_eq!(
            texts(&errs),
            vec![format!("f: Invalid value: \"a b\": {NAME_PART_REGEX}")]
        );
    }

    /// Odd inputs never panic and every function still answers.
    #[test]
    fn hostile_inputs_do_not_panic() {
        let huge = "9".repeat(10_000);
        let deep = "[".repeat(100_000);
        let deep_obj = format!(
            "[{{\"size\":{}1{}}}]",
            "[".repeat(20_000),
            "]".repeat(20_000)
        );
        let values: Vec<String> = vec![
            huge.clone(),
            format!("-{huge}"),
            deep.clone(),
            deep_obj,
            "\u{0}\u{7f}\u{85}\u{2028}\u{feff}\u{10ffff}/\u{300}".into(),
            "[{\"topology\":\"\\ud800\\udc00\\udfff\",\"size\":1e999999}]".into(),
            "[".into(),
            "/".repeat(1000),
            format!("{}/{}", "a".repeat(100_000), "b".repeat(100_000)),
        ];
        let g = FeatureGates::default();
        for v in &values {
            for key in [REQ, PREF, UNC, SREQ, SSIZE, CONS, GROUP] {
                let a = ann(&[(key, v.as_str()), (REQ, "b"), (SREQ, v.as_str())]);
                let errs = validate_podset_annotations(P, &a, &g);
                let _ = aggregate_message(&errs);
                let _ = validate_slice_size_upper_bound(P, &a, i32::MIN);
                let _ = validate_slice_size_upper_bound(P, &a, i32::MAX);
                let _ = TopologyRequest::from_annotations(&a, &g);
                let _ = validate_podset_groups(&[("p".into(), &a, 0), ("q".into(), &a, 1)], &g);
            }
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn key() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec![REQ, PREF, UNC, SREQ, SSIZE, CONS, GROUP])
        }

        proptest! {
            #[test]
            fn never_panics(
                pairs in prop::collection::vec((key(), any::<String>()), 0..6),
                json in r#"[\[\]{}",:0-9a-z\-.eE \\u]{0,40}"#,
                count in any::<i32>(),
            ) {
                let mut a: BTreeMap<String, String> =
                    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                a.insert(CONS.into(), json);
                let g = FeatureGates::default();
                let errs = validate_podset_annotations(P, &a, &g);
                let message = aggregate_message(&errs);
                prop_assert_eq!(errs.is_empty(), message.is_empty());
                let _ = validate_slice_size_upper_bound(P, &a, count);
                let _ = TopologyRequest::from_annotations(&a, &g);
                let _ = validate_podset_groups(&[("p".into(), &a, count)], &g);
            }
        }
    }
}
