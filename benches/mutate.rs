//! Server-side service time of `POST /mutate` without the network: read the AdmissionReview,
//! decide, encode the answer (`kube_tas::admission::http::review`), for the request shapes
//! the API server sends most (performance.md G9: p50 ≤ 80 µs for a Pod).
//!
//! ```text
//! cargo bench --bench mutate
//! ```
//!
//! The reviews are the test fixtures (`tests/fixtures/admission/`), in the API server's own
//! shape, against the cluster beside them:
//! * `job`: a TAS Job on CREATE, admitted and patched (nodeSelector + stamps);
//! * `job-pod`: a pod the Job controller creates from a template the webhook never patched
//!   (the Job is in the cluster view): admitted as its Job, patched;
//! * `pod-from-patched-template`: the common case, a Job's pod that already carries
//!   everything: admitted, no patch;
//! * `denied`: a Job with an invalid annotation.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use kube_tas::admission::Webhook;
use kube_tas::admission::http::review;
use kube_tas::cluster::load_paths;
use kube_tas::topology::FeatureGates;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/admission");

fn bench(c: &mut Criterion) {
    let cluster =
        load_paths(&[Path::new(FIXTURES).join("cluster.yaml")]).expect("the fixture cluster loads");
    let webhook = Webhook::over_cluster(&cluster, FeatureGates::default());
    let mut group = c.benchmark_group("mutate");
    for (name, file, patched) in [
        ("job", "job-tas-rack.json", Some(true)),
        ("job-pod", "pod-legacy-job-replacement.json", Some(true)),
        (
            "pod-from-patched-template",
            "pod-gpu-job-patched-template.json",
            Some(false),
        ),
        ("denied", "job-invalid-slice-size.json", None),
    ] {
        let body = std::fs::read(Path::new(FIXTURES).join(file)).expect("the fixture exists");
        // The bench measures what it says: check the answer once before timing it.
        let answer = review(&webhook, &body);
        match patched {
            Some(p) => {
                assert!(answer.response.allowed, "{name}: {:?}", answer.response);
                assert_eq!(answer.response.patch.is_some(), p, "{name}");
            }
            None => assert!(!answer.response.allowed, "{name}"),
        }
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = review(&webhook, black_box(&body));
                serde_json::to_vec(&out).expect("the answer encodes")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
