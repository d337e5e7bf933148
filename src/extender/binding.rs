//! Writing a bind to the API server: a `v1` `Binding` POSTed to the pod's `binding`
//! subresource, exactly what kube-scheduler's own DefaultBinder does (the shipped scheduler
//! configuration gives `bindVerb` to kube-tas, so nobody else writes it).
//!
//! The API server's refusal comes back as a sentence naming its reason and code (pod already
//! bound: 409 Conflict; pod gone: 404 NotFound; a timeout or a 5xx), which the extender answers
//! in the protocol's `Error` and kube-scheduler shows on the pod.

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
        let call = pods.create_subresource::<Binding, serde_json::Value>(
            "binding",
            &ticket.name,
            &params,
            &binding,
        );
        match tokio::time::timeout(BINDING_TIMEOUT, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(describe(ticket, &e)),
            Err(_) => Err(format!(
                "writing the Binding of pod {}/{} to node {} timed out after {}s",
                ticket.namespace,
                ticket.name,
                ticket.node,
                BINDING_TIMEOUT.as_secs()
            )),
        }
    }
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
