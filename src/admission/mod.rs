//! The admission webhook: the API server's AdmissionReviews answered from the shared cluster
//! state, with the decision of [`crate::cluster::admit`] (the same one the plan book and
//! `simulate` use).
//!
//! Its parts: [`review`] (AdmissionReview wire types), [`mutation`] (which
//! objects are TAS workloads, the decision per request), [`object`] (reading only the parts
//! of a Job or Pod admission uses), [`patch`] (what an admitted pod
//! template gets, as a JSON Patch) and [`mod@http`] (`POST /mutate`).

pub use crate::cluster::admit::{Admitted, AdmittedPodSet, Denial, WEBHOOK_NAME, admit};

pub mod http;
pub mod mutation;
pub mod object;
pub mod patch;
pub mod review;

pub use mutation::{Decision, Webhook};
