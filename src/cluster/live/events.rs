//! Kubernetes Events (`events.k8s.io/v1`, through kube-runtime's `Recorder`) for what the plan
//! book noticed: a plan made (which domain), a group that does not fit (why), a plan expired,
//! a Binding refused. They land on the group's owner (its Job, or the pod), so
//! `kubectl describe job` shows them; repeats are folded into one Event's series by the
//! recorder.
//!
//! Events are advice, never state: the channel is bounded and a full channel drops the notice;
//! a refused Event is logged and forgotten.

use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::plans::Notice;

/// How many notices may wait for the publisher.
pub const QUEUE: usize = 1024;

/// A channel for notices; hand the sender to the extender and the receiver to [`publish`].
pub fn channel() -> (mpsc::Sender<Notice>, mpsc::Receiver<Notice>) {
    mpsc::channel(QUEUE)
}

/// Publishes notices as Events until `cancel` or the senders are gone.
pub async fn publish(
    client: Client,
    instance: String,
    mut notices: mpsc::Receiver<Notice>,
    cancel: CancellationToken,
) {
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "kube-tas".to_string(),
            instance: Some(instance),
        },
    );
    loop {
        let notice = tokio::select! {
            () = cancel.cancelled() => return,
            n = notices.recv() => match n {
                Some(n) => n,
                None => return,
            },
        };
        let event = Event {
            type_: if notice.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: notice.reason.to_string(),
            note: Some(truncate(&notice.note, 1000)),
            action: "Scheduling".to_string(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &notice.regarding).await {
            tracing::debug!(error = %e, reason = notice.reason, "Event not recorded");
        }
    }
}

/// At most `max` bytes, cut at a character boundary (an Event's note is limited to 1 kB).
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
