//! Writing a bind to the API server: a `v1` `Binding` POSTed to the pod's `binding`
//! subresource, exactly what kube-scheduler's own DefaultBinder does (the shipped scheduler
//! configuration gives `bindVerb` to kube-tas, so nobody else writes it).
//!
//! The API server's refusal comes back as a sentence naming its reason and code (pod already
//! bound: 409 Conflict; pod gone: 404 NotFound; a timeout or a 5xx), which the extender answers
//! in the protocol's `Error` and kube-scheduler shows on the pod.
//!
//! An answer that does not say the Binding was refused for good (a 409, a 429 or 5xx, a
//! timeout, a connection lost) may come after the Binding was stored: an earlier try of the
//! same bind, or etcd committing after the API server gave up waiting. The pod is then read
//! back, and one bound to the node asked (the same uid) is a bind done: its seat must not be
//! opened again while the pod runs there.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::plans::BindTicket;

/// How long one Binding POST may take before the bind is given up (kube-scheduler's own
/// extender `httpTimeout` for bind is 5 s in the shipped configuration).
pub const BINDING_TIMEOUT: Duration = Duration::from_secs(4);

/// Where a bind goes.
#[derive(Clone)]
pub enum Binder {
    /// Recorded in kube-tas only (files mode, `simulate`, tests): nothing is written.
    Record,
    /// POSTed as a `Binding` to the API server.
    Api(kube::Client),
}

impl Binder {
    /// Writes the bind; the error is the API server's reason, ready for the extender's
    /// `Error`.
    pub async fn write(&self, ticket: &BindTicket) -> Result<(), String> {
        let Binder::Api(client) = self else {
            return Ok(());
        };
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ticket.namespace);
        let binding = binding_for(ticket);
        let params = PostParams::default();
        let deadline = tokio::time::Instant::now() + BIND_LONGEST;
        let call = pods.create_subresource::<Binding, serde_json::Value>(
            "binding",
            &ticket.name,
            &params,
            &binding,
        );
        let reason = match tokio::time::timeout(BINDING_TIMEOUT, call).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if !may_have_landed(&e) => return Err(describe(ticket, &e)),
            Ok(Err(e)) => describe(ticket, &e),
            Err(_) => format!(
                "writing the Binding of pod {}/{} to node {} timed out after {}s",
                ticket.namespace,
                ticket.name,
                ticket.node,
                BINDING_TIMEOUT.as_secs()
            ),
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match bound_as_asked(&pods, ticket, left.max(READ_BACK_LEAST)).await {
            Ok(true) => {
                tracing::info!(
                    pod = %format_args!("{}/{}", ticket.namespace, ticket.name),
                    node = %ticket.node,
                    answer = %reason,
                    "the Binding's answer was an error, but the pod is bound to the node asked"
                );
                Ok(())
            }
            Ok(false) => Err(reason),
            Err(read) => Err(format!("{reason}; reading the pod back failed too: {read}")),
        }
    }
}

/// The longest a bind's writing takes, the Binding and reading the pod back after an unclear
/// answer together: within kube-scheduler's 5 s `httpTimeout` for bind (the shipped
/// configuration), so that the read-back's answer reaches it.
pub const BIND_LONGEST: Duration = Duration::from_millis(4500);

/// The least a read-back is given (after a Binding that took all its time).
const READ_BACK_LEAST: Duration = Duration::from_millis(500);

/// Whether an error leaves open that the Binding was stored: anything but a refusal for a
/// reason that holds (400, 401, 403, 404, 422: bad request, no right, no pod, invalid).
fn may_have_landed(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code == 409 || status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// Whether the pod, read back, is the ticket's (its uid) and bound to the ticket's node.
async fn bound_as_asked(
    pods: &Api<Pod>,
    ticket: &BindTicket,
    within: Duration,
) -> Result<bool, String> {
    let pod = match tokio::time::timeout(within, pods.get_opt(&ticket.name)).await {
        Ok(Ok(pod)) => pod,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer in {} ms", within.as_millis())),
    };
    Ok(pod.is_some_and(|pod| {
        let same_pod = ticket.uid.contains('/') || pod.metadata.uid.as_deref() == Some(&ticket.uid);
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        same_pod && node == Some(ticket.node.as_str())
    }))
}

/// The `Binding` kube-scheduler would write: the pod's name and uid, the node as target.
pub fn binding_for(ticket: &BindTicket) -> Binding {
    // The uid is a precondition: a pod deleted and re-created under the same name between
    // filter and bind is not bound in its predecessor's place.
    let uid = (!ticket.uid.contains('/')).then(|| ticket.uid.clone());
    Binding {
        metadata: ObjectMeta {
            name: Some(ticket.name.clone()),
            namespace: Some(ticket.namespace.clone()),
            uid,
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(ticket.node.clone()),
            ..Default::default()
        },
    }
}

fn describe(ticket: &BindTicket, e: &kube::Error) -> String {
    let what = format!(
        "the API server refused the Binding of pod {}/{} to node {}",
        ticket.namespace, ticket.name, ticket.node
    );
    match e {
        kube::Error::Api(status) => format!(
            "{what}: {} ({} {})",
            status.message, status.code, status.reason
        ),
        other => format!("{what}: {other}"),
    }
}
