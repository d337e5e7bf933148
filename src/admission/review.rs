//! The `admission.k8s.io/v1` AdmissionReview as the API server sends and expects it.
//!
//! Own serde types rather than kube-core's: kube-core serialises `response.patch` as a JSON
//! array of numbers, while the documented form is a standard (padded, not URL-safe) base64
//! string, which is what [`AdmissionResponse::patch`] holds. The request's `object` is kept
//! as raw JSON and read into a typed Job or Pod only once the kind is known.
//!
//! Rules the API server enforces on the answer, kept here: `apiVersion` and `kind` echo the
//! request's; `response.uid` echoes `request.uid`; `patch` and `patchType` come together;
//! `allowed` is always written.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The only AdmissionReview version kube-tas registers for.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of the envelope, in and out.
pub const KIND: &str = "AdmissionReview";

/// An AdmissionReview as received; `object` borrows the request body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewIn<'a> {
    /// `admission.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `AdmissionReview`.
    #[serde(default)]
    pub kind: String,
    /// The request; absent only in a malformed review.
    #[serde(borrow)]
    pub request: Option<AdmissionRequest<'a>>,
}

/// `request` of an AdmissionReview (fields kube-tas reads; the rest is skipped).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'a> {
    /// Echoed in the answer.
    pub uid: String,
    /// The object's group, version and kind, e.g. `batch/v1 Job`.
    pub kind: GroupVersionKind,
    /// Set only for calls on a subresource (`pods/binding`, `pods/ephemeralcontainers`).
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Empty on CREATE with `generateName`.
    #[serde(default)]
    pub name: Option<String>,
    /// The request's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object as it will be stored (in-tree defaults applied); `null` on DELETE.
    #[serde(default, borrow)]
    pub object: Option<&'a RawValue>,
    /// A dry run: the answer must not depend on or leave any state.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `{group, version, kind}`; the core group is `""`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    /// API group, `""` for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

impl std::fmt::Display for GroupVersionKind {
    /// `batch/v1 Job`, `v1 Pod`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.version, self.kind)
        } else {
            write!(f, "{}/{} {}", self.group, self.version, self.kind)
        }
    }
}

/// The AdmissionReview sent back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewOut {
    /// The request's `apiVersion`.
    pub api_version: String,
    /// The request's `kind`.
    pub kind: String,
    /// The decision.
    pub response: AdmissionResponse,
}

/// `response` of an AdmissionReview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's `uid` (empty only when the request could not be read at all).
    pub uid: String,
    /// Whether the object may be stored. Always written: the API server reads a missing
    /// field as `false`.
    pub allowed: bool,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `JSONPatch` whenever [`Self::patch`] is set, never without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// The RFC 6902 JSON Patch, standard base64 (padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Shown by kubectl as `Warning: ...`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The `metav1.Status` of a refusal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `Failure`.
    pub status: String,
    /// What to fix.
    pub message: String,
    /// `Forbidden`, `Invalid` or `BadRequest`, matching [`Self::code`].
    pub reason: String,
    /// 403, 422 or 400: the status the user's client reports.
    pub code: u16,
}

impl Status {
    /// A refusal with `code` (403, 422 or 400) and its reason word.
    pub fn failure(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            422 => "Invalid",
            _ => "Forbidden",
        };
        Self {
            status: "Failure".to_string(),
            message: message.into(),
            reason: reason.to_string(),
            code,
        }
    }
}
