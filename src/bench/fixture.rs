//! What every extender and webhook measurement starts from: a generated cluster loaded into
//! an [`Extender`] (a 256-pod rack-required gang already planned), the services called in
//! process, and the request bodies of each call shape with what each answer must be.
//!
//! Shared by `kube-tas bench` (over HTTP and in process) and `cargo bench --bench extender`
//! (in process), so that both time the same requests against the same state.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Bytes;
use serde_json::Value;

use super::floor;
use super::requests::{self, JobInfo};
use crate::admission::Webhook;
use crate::admission::http as admission_http;
use crate::extender::Extender;
use crate::extender::http as extender_http;
use crate::keys::PODSET_REQUIRED_TOPOLOGY;
use crate::synthetic::{RACK_LABEL, SyntheticCluster, job_yaml};
use crate::topology::FeatureGates;

/// Pods of the Job whose pods the gang rows send.
pub const GANG_PODS: u32 = 256;
/// Bodies kept per row at most (they cycle); fewer when they are large.
const MAX_BODIES: usize = 256;
const BODY_BUDGET_BYTES: usize = 64 << 20;

/// What each node has left, by name: kube-scheduler's own resource filter, as the replay runs
/// it before calling the extender (the extender sees only nodes with room).
pub type Room = std::collections::HashMap<String, crate::topology::ResourceList>;

/// A generated cluster, served in process, with its gang planned.
pub struct Fixture {
    /// kube-tas's and the floor's services over the cluster.
    pub services: Services,
    /// Every node's name, in the cluster's order.
    pub names: Vec<String>,
    /// The same names as JSON strings.
    pub quoted: Vec<String>,
    /// Every Job of the cluster (the gang first).
    pub jobs: Vec<JobInfo>,
    /// Every node's allocatable, by name.
    pub room: Room,
    /// The gang pod of each completion index's seat.
    pub seats: Vec<String>,
}

impl Fixture {
    /// `shape`'s nodes, the [`GANG_PODS`]-pod gang "gang" (one rack required) and the Jobs of
    /// `extra_jobs_yaml`, loaded into an extender whose plans never expire; the gang is planned
    /// by a filter of its first pod with every name, and each pod's seat taken.
    pub fn generate(shape: &SyntheticCluster, extra_jobs_yaml: &str) -> anyhow::Result<Self> {
        let node_count = usize::try_from(shape.node_count()).context("too many nodes")?;
        if node_count == 0 {
            bail!("the cluster has no node: --blocks, --racks and --hosts must be at least 1");
        }
        let started = Instant::now();
        let jobs_yaml = job_yaml(
            "gang",
            GANG_PODS,
            1000,
            PODSET_REQUIRED_TOPOLOGY,
            RACK_LABEL,
        ) + extra_jobs_yaml;
        let yaml = shape.to_yaml() + &jobs_yaml;
        let cluster = crate::cluster::load_text(std::path::Path::new("generated.yaml"), &yaml)
            .context("the generated cluster does not load")?;
        let jobs = job_infos(&jobs_yaml)?;
        eprintln!(
            "bench: {node_count} nodes and {} Jobs generated and loaded in {:.1?}",
            jobs.len(),
            started.elapsed()
        );
        let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        let quoted: Vec<String> = names
            .iter()
            .map(|n| Value::from(n.as_str()).to_string())
            .collect();
        let room: Room = cluster
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.allocatable.clone()))
            .collect();
        let extender =
            Extender::over_cluster(&cluster, FeatureGates::default(), Duration::from_secs(3600));
        drop(cluster);
        let services = Services {
            webhook: Webhook::new(extender.state().clone(), extender.gates().clone()),
            extender,
            floor_names: names.iter().cloned().collect(),
        };
        let mut fixture = Self {
            services,
            names,
            quoted,
            jobs,
            room,
            seats: Vec::new(),
        };
        fixture.seats = fixture.plan_gang()?;
        Ok(fixture)
    }

    /// The gang Job.
    pub fn gang(&self) -> &JobInfo {
        &self.jobs[0]
    }

    /// Each gang pod's seat: the first filter with every name makes the plan.
    fn plan_gang(&self) -> anyhow::Result<Vec<String>> {
        eprintln!("bench: planning the {GANG_PODS}-pod gang");
        let gang = self.gang();
        let all_names = self.quoted.join(",");
        let mut seats = Vec::with_capacity(gang.count);
        for index in 0..gang.count {
            let pod = requests::gang_pod(gang, index);
            let body = requests::request_body(&pod, &all_names);
            let answer = self.services.kube_tas(FILTER, &body);
            let value: Value = serde_json::from_slice(&answer)?;
            let seat = match value["NodeNames"].as_array().map(Vec::as_slice) {
                Some([Value::String(seat)]) => seat.clone(),
                _ => bail!(
                    "the gang pod {index} got no single seat: {}",
                    String::from_utf8_lossy(&answer[..answer.len().min(400)])
                ),
            };
            seats.push(seat);
        }
        Ok(seats)
    }

    /// The call shapes with `k` names per extender request: filter for a lone pod, for a gang
    /// pod whose seat is in the window and one whose seat is not, prioritize for a gang pod,
    /// filter with every name (when `k` is fewer), and `/mutate` of a Job's pod.
    pub fn rows(&self, k: usize) -> anyhow::Result<Vec<RowBodies>> {
        let gang = self.gang();
        let quoted = &self.quoted;
        let mut rows = Vec::new();
        let lone: Vec<(Bytes, Expect)> = (0..pool_size(k))
            .map(|i| {
                let pod = requests::lone_pod(i);
                (window_body(&pod, quoted, k, i, None), Expect::SomeNode)
            })
            .collect();
        rows.push(RowBodies {
            call: format!("filter, lone pod, {k} names"),
            path: FILTER,
            bodies: lone.clone(),
            after: None,
            floor_path: FILTER,
        });
        let gang_rows: [GangRow; 3] = [
            (
                "filter, gang pod, seat sampled",
                FILTER,
                |s| Expect::Seat(s.to_string()),
                true,
            ),
            (
                "filter, gang pod, seat not sampled",
                FILTER,
                |_| Expect::NoNode,
                false,
            ),
            (
                "prioritize, gang pod",
                PRIORITIZE,
                |s| Expect::Favoured(s.to_string()),
                true,
            ),
        ];
        for (call, path, expect, with_seat) in gang_rows {
            let bodies = (0..pool_size(k).min(gang.count))
                .map(|i| {
                    let pod = requests::gang_pod(gang, i);
                    let seat = (self.seats[i].as_str(), with_seat);
                    (
                        window_body(&pod, quoted, k, i, Some(seat)),
                        expect(&self.seats[i]),
                    )
                })
                .collect();
            rows.push(RowBodies {
                call: format!("{call}, {k} names"),
                path,
                bodies,
                after: None,
                floor_path: path,
            });
        }
        if k < self.names.len() {
            let all_names = quoted.join(",");
            let bodies = (0..pool_size(self.names.len()).min(gang.count))
                .map(|i| {
                    let pod = requests::gang_pod(gang, i);
                    let body = requests::request_body(&pod, &all_names);
                    (body, Expect::Seat(self.seats[i].clone()))
                })
                .collect();
            rows.push(RowBodies {
                call: format!("filter, gang pod, all {} names", self.names.len()),
                path: FILTER,
                bodies,
                after: None,
                floor_path: FILTER,
            });
        }
        let user = requests::creator(true);
        let reviews: Vec<(Bytes, Expect)> = (0..gang.count.min(MAX_BODIES))
            .map(|i| {
                let uid = requests::fake_uid(&format!("review/{i}"));
                let object = requests::job_pod_object(gang, i);
                (
                    requests::review_body(&uid, &object, &user),
                    Expect::Allowed(uid),
                )
            })
            .collect();
        rows.push(RowBodies {
            call: "/mutate, Job pod".to_string(),
            path: MUTATE,
            bodies: reviews,
            after: None,
            floor_path: MUTATE,
        });
        // Last, so that the rows before keep their places in `service-calls --row`.
        rows.push(RowBodies {
            call: format!("prioritize, lone pod, {k} names"),
            path: PRIORITIZE,
            bodies: lone
                .iter()
                .map(|(body, _)| (body.clone(), Expect::NothingFavoured))
                .collect(),
            after: Some(FILTER),
            floor_path: PRIORITIZE,
        });
        // The first row again, against a floor whose answer is as long as kube-tas's must be.
        rows.push(RowBodies {
            call: format!("filter, lone pod, {k} names, floor passing every name"),
            path: FILTER,
            bodies: lone,
            after: None,
            floor_path: floor::FILTER_EVERY_NAME,
        });
        Ok(rows)
    }
}

/// The extender's filter route.
pub const FILTER: &str = "/scheduler/filter";
/// The extender's prioritize route.
pub const PRIORITIZE: &str = "/scheduler/prioritize";
/// The webhook's route.
pub const MUTATE: &str = "/mutate";

fn job_infos(yaml: &str) -> anyhow::Result<Vec<JobInfo>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).context("the generated YAML")?;
    Ok(docs
        .iter()
        .filter(|d| d["kind"] == "Job")
        .map(requests::job_info)
        .collect())
}

/// The same services the servers run, called in process (no HTTP) to time their work alone.
pub struct Services {
    /// kube-tas's extender.
    pub extender: Extender,
    /// kube-tas's webhook over the same state.
    pub webhook: Webhook,
    /// What the floor knows.
    pub floor_names: floor::FloorNames,
}

impl Services {
    /// kube-tas's answer to `body` on `path`, as the route's handler makes it.
    pub fn kube_tas(&self, path: &str, body: &[u8]) -> Vec<u8> {
        match path {
            FILTER => extender_http::filter_answer(&self.extender, body),
            PRIORITIZE => {
                extender_http::prioritize_answer(&self.extender, body).unwrap_or_default()
            }
            _ => {
                serde_json::to_vec(&admission_http::review(&self.webhook, body)).unwrap_or_default()
            }
        }
    }

    /// Sends every body of `row` to kube-tas's route `row.after` once, if the row names one
    /// (the servers share this extender, so that their answers see it too).
    pub fn prepare(&self, row: &RowBodies) {
        if let Some(path) = row.after {
            for (body, _) in &row.bodies {
                self.kube_tas(path, body);
            }
        }
    }

    /// The floor's answer to `body` on `path` (empty when it cannot read the body).
    pub fn floor(&self, path: &str, body: &[u8]) -> Vec<u8> {
        match path {
            FILTER => floor::filter_answer(&self.floor_names, body),
            floor::FILTER_EVERY_NAME => floor::filter_every_name_answer(&self.floor_names, body),
            PRIORITIZE => floor::prioritize_answer(&self.floor_names, body),
            _ => floor::mutate_answer(body),
        }
        .unwrap_or_default()
    }
}

/// What a kube-tas answer must be for a row's sample to count.
#[derive(Debug, Clone)]
pub enum Expect {
    /// Filter passes exactly this node.
    Seat(String),
    /// Filter passes nothing.
    NoNode,
    /// Filter passes at least one node.
    SomeNode,
    /// Prioritize gives this node the top score.
    Favoured(String),
    /// Prioritize answers scores and favours no node (a pod of no group).
    NothingFavoured,
    /// An allowed review echoing this uid.
    Allowed(String),
}

impl Expect {
    /// Fails with the answer quoted when it is not what the request needs.
    pub fn check(&self, answer: &[u8]) -> anyhow::Result<()> {
        let value: Value = serde_json::from_slice(answer).context("the answer is not JSON")?;
        let passing = || -> Vec<&str> {
            value["NodeNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect()
        };
        let ok = match self {
            Expect::Seat(node) => value["Error"] == "" && passing() == [node.as_str()],
            Expect::NoNode => value["Error"] == "" && passing().is_empty(),
            Expect::SomeNode => value["Error"] == "" && !passing().is_empty(),
            Expect::Favoured(node) => best_host(&value) == Some(node.as_str()),
            Expect::NothingFavoured => value
                .as_array()
                .is_some_and(|scores| scores.iter().all(|h| h["Score"] == 0)),
            Expect::Allowed(uid) => {
                value["response"]["allowed"] == true && value["response"]["uid"] == uid.as_str()
            }
        };
        if !ok {
            let text = String::from_utf8_lossy(&answer[..answer.len().min(400)]);
            bail!("kube-tas answered {text}, which is not what the request needs");
        }
        Ok(())
    }
}

/// The host with the highest score (the first of equals) of a prioritize answer.
pub fn best_host(value: &Value) -> Option<&str> {
    let mut best: Option<(&str, i64)> = None;
    for h in value.as_array()? {
        let (Some(host), Some(score)) = (h["Host"].as_str(), h["Score"].as_i64()) else {
            continue;
        };
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((host, score));
        }
    }
    best.map(|(h, _)| h)
}

/// A gang row: what it is called, its route, the answer for a seat, the seat sampled.
type GangRow = (&'static str, &'static str, fn(&str) -> Expect, bool);

/// The bodies of one row, cycled, and what each answer must be.
#[derive(Clone)]
pub struct RowBodies {
    /// What is sent, for people.
    pub call: String,
    /// The route.
    pub path: &'static str,
    /// The bodies and what kube-tas must answer to each.
    pub bodies: Vec<(Bytes, Expect)>,
    /// A route each body goes to once before the row is measured ([`Services::prepare`]), as
    /// kube-scheduler filters a pod before it prioritizes it.
    pub after: Option<&'static str>,
    /// The floor's route the row is compared with: `path`, or [`floor::FILTER_EVERY_NAME`].
    pub floor_path: &'static str,
}

/// Bodies kept for a row whose requests carry `names` names.
fn pool_size(names: usize) -> usize {
    (BODY_BUDGET_BYTES / (6_000 + names * 40)).clamp(8, MAX_BODIES)
}

/// A filter/prioritize body for `pod` with the `i`-th window of `k` names; with a seat, the
/// window made to hold it (`true`: in place of another name) or to leave it out (`false`:
/// one name fewer).
pub fn window_body(
    pod: &Value,
    quoted: &[String],
    k: usize,
    i: usize,
    seat: Option<(&str, bool)>,
) -> Bytes {
    let n = quoted.len();
    let start = if k >= n { 0 } else { (i * k) % n };
    let mut window: Vec<&str> = (0..k.min(n))
        .map(|j| quoted[(start + j) % n].as_str())
        .collect();
    if let Some((seat, wanted)) = seat {
        let seat_quoted = Value::from(seat).to_string();
        let position = window.iter().position(|q| *q == seat_quoted);
        match (wanted, position) {
            (true, None) => {
                let at = (i * 7919) % window.len();
                window[at] = quoted
                    .iter()
                    .find(|q| **q == seat_quoted)
                    .map_or("", String::as_str);
            }
            (false, Some(at)) => {
                window.remove(at);
            }
            _ => {}
        }
    }
    requests::request_body(pod, &window.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_or_leave_out_the_seat() {
        let quoted: Vec<String> = (0..10).map(|i| format!("\"n{i}\"")).collect();
        let pod = serde_json::json!({"metadata": {"name": "p"}});
        let text = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
        let with = text(window_body(&pod, &quoted, 3, 0, Some(("n7", true))));
        assert!(with.contains("\"n7\""), "{with}");
        assert_eq!(
            with.matches("\"n").count() - 1,
            3,
            "{with}: three names and \"name\""
        );
        let without = text(window_body(&pod, &quoted, 3, 2, Some(("n7", false))));
        assert!(!without.contains("\"n7\""), "{without}");
        assert!(without.contains("\"n6\",\"n8\""), "{without}");
        // A window of every name leaves the seat out too.
        let all = text(window_body(&pod, &quoted, 10, 0, Some(("n0", false))));
        assert!(!all.contains("\"n0\""), "{all}");
        assert_eq!(all.matches("\"n").count() - 1, 9, "{all}");
    }

    #[test]
    fn the_best_host_is_the_first_top_score() {
        let v = serde_json::json!([{"Host": "a", "Score": 3}, {"Host": "b", "Score": 9},
                                   {"Host": "c", "Score": 9}]);
        assert_eq!(best_host(&v), Some("b"));
        assert_eq!(best_host(&serde_json::json!([])), None);
    }

    #[test]
    fn expectations_refuse_wrong_answers() {
        let seat = Expect::Seat("n1".into());
        assert!(seat.check(br#"{"NodeNames":["n1"],"Error":""}"#).is_ok());
        assert!(seat.check(br#"{"NodeNames":["n2"],"Error":""}"#).is_err());
        assert!(
            Expect::NoNode
                .check(br#"{"NodeNames":[],"Error":""}"#)
                .is_ok()
        );
        assert!(
            Expect::NoNode
                .check(br#"{"NodeNames":[],"Error":"x"}"#)
                .is_err()
        );
        let allowed = Expect::Allowed("u".into());
        assert!(
            allowed
                .check(br#"{"response":{"uid":"u","allowed":true}}"#)
                .is_ok()
        );
        assert!(
            allowed
                .check(br#"{"response":{"uid":"v","allowed":true}}"#)
                .is_err()
        );
    }
}
