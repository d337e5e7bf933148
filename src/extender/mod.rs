//! The scheduler extender: `filter`, `prioritize` and `bind` as kube-scheduler calls them,
//! answered from the plans and seats of [`crate::plans`].
//!
//! [`Extender`] is the service (no HTTP in it): `simulate` calls it in process, [`http`]
//! mounts it on axum. Every answer is in the protocol's own shape; nothing here panics on
//! input, and a problem with a request becomes the protocol's `Error`, never an HTTP error.

use std::sync::{Arc, Mutex};

pub mod http;
pub mod wire;

pub use wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
};

use crate::plans::{PlanBook, PlanStats};

/// The extender service: a shared [`PlanBook`] behind a lock (decisions are serialised, as
/// kube-scheduler's cycle is).
#[derive(Clone)]
pub struct Extender {
    book: Arc<Mutex<PlanBook>>,
}

impl Extender {
    /// Serves decisions from `book`.
    pub fn new(book: PlanBook) -> Self {
        Self {
            book: Arc::new(Mutex::new(book)),
        }
    }

    /// `POST /scheduler/filter`.
    pub fn filter(&self, args: &ExtenderArgs) -> ExtenderFilterResult {
        let _ = args;
        ExtenderFilterResult {
            error: "filter is not built yet".to_string(),
            ..Default::default()
        }
    }

    /// `POST /scheduler/prioritize`: a bare array, scores 0..=10, only favoured hosts.
    pub fn prioritize(&self, args: &ExtenderArgs) -> Vec<HostPriority> {
        let _ = args;
        Vec::new()
    }

    /// `POST /scheduler/bind`.
    pub fn bind(&self, args: &ExtenderBindingArgs) -> ExtenderBindingResult {
        let _ = args;
        ExtenderBindingResult {
            error: "bind is not built yet".to_string(),
        }
    }

    /// Counters and gauges for `/metrics`.
    pub fn stats(&self) -> PlanStats {
        self.lock().stats()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlanBook> {
        // A panic while holding the lock cannot leave the book half-updated in a way later
        // requests would misread (every mutation is a single step), so recover the guard.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}
